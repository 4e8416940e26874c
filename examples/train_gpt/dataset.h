// Byte-level text data (vocabulary 256) and the distributed sampler.
//
// The text (one file, or every regular file of a directory in name order, joined) is split into a
// training part and a held-out validation tail. Sequence g of the run (a global index: step,
// micro-batch, rank, row) starts at a position drawn from (seed, g) alone, so every rank reads
// its own part of every global batch, and the stream of batches does not depend on how they were
// split across ranks: the sampler's whole state is the number of steps taken.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zs::train {

// The corpus shipped with zeroshard, found relative to this program: <dir of the executable>/
// ../share/zeroshard/corpus.txt, which holds in the build tree (CMake copies it to
// <build>/share/zeroshard) and in an install prefix (<prefix>/bin, <prefix>/share/zeroshard).
// Throws zs::Error(kNotFound) naming the places it looked.
std::string default_data_path();

// The bytes a TextDataset of `path` holds: the file's size, or the sum of the directory's regular
// files (read from the directory, not the files). Throws zs::Error(kNotFound) for a missing path.
int64_t data_bytes(const std::string& path);

class TextDataset {
 public:
  // Throws zs::Error(kNotFound) for a missing path, kInvalidArgument for text too short for
  // one training and one validation sequence of `context + 1` bytes.
  TextDataset(const std::string& path, double val_fraction, int context);

  int64_t train_bytes() const { return split_; }
  int64_t val_bytes() const { return static_cast<int64_t>(bytes_.size()) - split_; }
  // XXH3 of the whole text, to check that every rank reads the same (check_same_data, main.cc).
  uint64_t content_hash() const;

  // Fills tokens [micro_batches][batch][context + 1] with this rank's sequences of `step`.
  void fill_train(int64_t step, int micro_batches, int world, int rank, int batch, uint64_t seed,
                  std::vector<int32_t>& tokens) const;
  // Validation sequences: micro-batch m of this rank, evenly spaced over the held-out text.
  void fill_val(int micro_batches, int world, int rank, int batch,
                std::vector<int32_t>& tokens) const;

 private:
  void copy_sequence(int64_t start, int32_t* out) const;
  std::vector<uint8_t> bytes_;
  int64_t split_ = 0;
  int context_ = 0;
};

}  // namespace zs::train
