#include "dataset.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <fmt/format.h>
#include <xxhash.h>

#include "core/error.h"

namespace zs::train {

namespace fs = std::filesystem;

namespace {

void append_file(const fs::path& p, std::vector<uint8_t>& out) {
  std::ifstream in(p, std::ios::binary);
  ZS_CHECK(in.good(), ErrorCode::kNotFound, "data file '{}' cannot be read", p.string());
  out.insert(out.end(), std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The regular files of a directory, in name order (what the dataset joins).
std::vector<fs::path> directory_files(const std::string& path) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(path)) {
    if (e.is_regular_file()) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

std::string default_data_path() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  ZS_CHECK(!ec, ErrorCode::kNotFound,
           "no --data given, and the shipped corpus cannot be located: /proc/self/exe: {}",
           ec.message());
  const fs::path p = exe.parent_path().parent_path() / "share" / "zeroshard" / "corpus.txt";
  ZS_CHECK(fs::is_regular_file(p, ec), ErrorCode::kNotFound,
           "no --data given, and the shipped corpus is not at {} (beside the program {}); "
           "pass --data FILE",
           p.string(), exe.string());
  return p.string();
}

int64_t data_bytes(const std::string& path) {
  std::error_code ec;
  ZS_CHECK(fs::exists(path, ec), ErrorCode::kNotFound, "data path '{}' does not exist", path);
  if (!fs::is_directory(path)) return static_cast<int64_t>(fs::file_size(path));
  int64_t n = 0;
  for (const fs::path& f : directory_files(path)) n += static_cast<int64_t>(fs::file_size(f));
  return n;
}

uint64_t TextDataset::content_hash() const { return XXH3_64bits(bytes_.data(), bytes_.size()); }

TextDataset::TextDataset(const std::string& path, double val_fraction, int context)
    : Dataset(context) {
  std::error_code ec;
  ZS_CHECK(fs::exists(path, ec), ErrorCode::kNotFound, "data path '{}' does not exist", path);
  if (fs::is_directory(path)) {
    for (const fs::path& f : directory_files(path)) append_file(f, bytes_);
  } else {
    append_file(path, bytes_);
  }
  const int64_t n = static_cast<int64_t>(bytes_.size());
  set_split(n, n - static_cast<int64_t>(static_cast<double>(n) * val_fraction),
            fmt::format("data '{}' has {} bytes", path, n),
            fmt::format("with --val-fraction {}", val_fraction));
}

std::vector<int32_t> TextDataset::sample_prompt(const std::string& prompt) const {
  std::vector<int32_t> out;
  for (unsigned char c : prompt) out.push_back(c);
  return out;
}

void TextDataset::copy_sequence(int64_t start, int32_t* out) const {
  for (int t = 0; t <= context(); ++t) out[t] = bytes_[static_cast<size_t>(start + t)];
}

void Dataset::set_split(int64_t size, int64_t split, const std::string& what,
                        const std::string& how) {
  size_ = size;
  split_ = split;
  ZS_CHECK(split_ > context_ + 1 && size_ - split_ > context_ + 1, ErrorCode::kInvalidArgument,
           "{}: too short for training and validation sequences of {} {} (context {} + 1) {}", what,
           context_ + 1, unit(), context_, how);
}

void Dataset::fill_train(int64_t step, int micro_batches, int world, int rank, int batch,
                         uint64_t seed, std::vector<int32_t>& tokens) const {
  const int64_t row = context_ + 1;
  tokens.resize(static_cast<size_t>(micro_batches) * batch * row);
  const int64_t span = split_ - row;  // starts in [0, span]
  for (int m = 0; m < micro_batches; ++m) {
    for (int i = 0; i < batch; ++i) {
      const int64_t g = ((step * micro_batches + m) * world + rank) * batch + i;
      const int64_t start = static_cast<int64_t>(mix(mix(seed) ^ static_cast<uint64_t>(g)) %
                                                 static_cast<uint64_t>(span + 1));
      copy_sequence(start, tokens.data() + (static_cast<int64_t>(m) * batch + i) * row);
    }
  }
}

void Dataset::fill_val(int micro_batches, int world, int rank, int batch,
                       std::vector<int32_t>& tokens, int64_t total, int first) const {
  const int64_t row = context_ + 1;
  tokens.resize(static_cast<size_t>(micro_batches) * batch * row);
  const int64_t count =
      total > 0 ? total : (static_cast<int64_t>(first) + micro_batches) * world * batch;
  const int64_t span = val_tokens() - row;
  for (int m = 0; m < micro_batches; ++m) {
    const int64_t mb = static_cast<int64_t>(first) + m;  // in the whole set
    for (int i = 0; i < batch; ++i) {
      const int64_t g = std::min((mb * world + rank) * batch + i, count - 1);
      const int64_t start = split_ + (count > 1 ? span * g / (count - 1) : 0);
      copy_sequence(start, tokens.data() + (static_cast<int64_t>(m) * batch + i) * row);
    }
  }
}

}  // namespace zs::train
