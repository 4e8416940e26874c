// Where zs_train's data comes from (--data, or --train-shards and --val-shards), and the one
// place that opens it: raw bytes (TextDataset) by default, llm.c's token shards (token_shards.h)
// when shards are given.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "dataset.h"

namespace zs::train {

struct DataSource {
  std::string text;          // --data: a file or a directory of text (bytes); empty with shards
  std::string train_shards;  // --train-shards: a file or a glob of token shards
  std::string val_shards;    // --val-shards: optional; without it the last val_fraction is held out
  double val_fraction = 0.1;

  bool shards() const { return !train_shards.empty(); }
  // The path or pattern(s) the banner names.
  std::string name() const;
};

// Reads the source whole. Throws what TextDataset or TokenShardDataset throw (a token id >= vocab
// is refused naming its file and offset).
std::unique_ptr<Dataset> open_dataset(const DataSource& source, int context, int vocab);

// The bytes the opened dataset will hold, without reading the data (for the memory check).
// Throws zs::Error for a missing path, a pattern that matches nothing or a malformed header.
int64_t dataset_bytes(const DataSource& source);

}  // namespace zs::train
