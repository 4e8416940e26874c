// Training data and the distributed sampler: byte-level text (vocabulary 256) and, in
// token_shards.h, llm.c's token shards, both behind one interface (Dataset).
//
// A dataset is one stream of token ids split into a training part and a held-out validation tail.
// Sequence g of the run (a global index: step, micro-batch, rank, row) starts at a position drawn
// from (seed, g) alone, so every rank reads its own part of every global batch, and the stream of
// batches does not depend on how they were split across ranks: the sampler's whole state is the
// number of steps taken.
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

// What the trainer reads: the sizes, the content hash the ranks compare, and the batches.
// Immutable after construction; the const methods may be called from any thread.
class Dataset {
 public:
  virtual ~Dataset() = default;

  int64_t train_tokens() const { return split_; }
  int64_t val_tokens() const { return size_ - split_; }
  // True: the tokens are the bytes of a text (a sample prints as text); false: token ids.
  virtual bool text() const = 0;
  // "bytes" or "tokens": what train_tokens() counts, for messages.
  const char* unit() const { return text() ? "bytes" : "tokens"; }
  // The tokens a generated sample continues: `prompt`'s bytes for text; for token ids (no
  // tokenizer here) the first validation token.
  virtual std::vector<int32_t> sample_prompt(const std::string& prompt) const = 0;
  // XXH3 of the whole stream, to check that every rank reads the same (check_same_data, main.cc).
  virtual uint64_t content_hash() const = 0;

  // Fills tokens [micro_batches][batch][context + 1] with this rank's sequences of `step`.
  void fill_train(int64_t step, int micro_batches, int world, int rank, int batch, uint64_t seed,
                  std::vector<int32_t>& tokens) const;
  // Validation sequences: micro-batches m in [first, first + micro_batches) of this rank (at
  // tokens[m - first]), evenly spaced over the held-out tail. The global sequence
  // g = (m * world + rank) * batch + i is the g-th of `total` evenly spaced ones (0:
  // (first + micro_batches) * world * batch, the set ending here); sequences past `total` repeat
  // the last. A set filled in pieces of micro-batches holds the sequences of one fill.
  void fill_val(int micro_batches, int world, int rank, int batch, std::vector<int32_t>& tokens,
                int64_t total = 0, int first = 0) const;

 protected:
  explicit Dataset(int context) : context_(context) {}
  // Sets the stream's length and its training part (the first `split` tokens). Throws
  // zs::Error(kInvalidArgument) naming `what` when either part is too short for one sequence of
  // context + 1 tokens (`how` says where the split came from).
  void set_split(int64_t size, int64_t split, const std::string& what, const std::string& how);
  // Writes tokens [start, start + context] of the stream to out.
  virtual void copy_sequence(int64_t start, int32_t* out) const = 0;
  int context() const { return context_; }

 private:
  int64_t size_ = 0;
  int64_t split_ = 0;
  int context_ = 0;
};

// Text read as bytes: one file, or every regular file of a directory in name order, joined; the
// last `val_fraction` held out.
class TextDataset : public Dataset {
 public:
  // Throws zs::Error(kNotFound) for a missing path, kInvalidArgument for text too short for
  // one training and one validation sequence of `context + 1` bytes.
  TextDataset(const std::string& path, double val_fraction, int context);

  bool text() const override { return true; }
  uint64_t content_hash() const override;
  std::vector<int32_t> sample_prompt(const std::string& prompt) const override;

 private:
  void copy_sequence(int64_t start, int32_t* out) const override;
  std::vector<uint8_t> bytes_;
};

}  // namespace zs::train
