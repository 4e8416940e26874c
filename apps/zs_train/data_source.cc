#include "data_source.h"

#include <fmt/format.h>

#include "token_shards.h"

namespace zs::train {

std::string DataSource::name() const {
  if (!shards()) return text;
  if (val_shards.empty()) return train_shards;
  return fmt::format("{} (validation {})", train_shards, val_shards);
}

std::unique_ptr<Dataset> open_dataset(const DataSource& source, int context, int vocab) {
  if (!source.shards())
    return std::make_unique<TextDataset>(source.text, source.val_fraction, context);
  return std::make_unique<TokenShardDataset>(source.train_shards, source.val_shards,
                                             source.val_fraction, context, vocab);
}

int64_t dataset_bytes(const DataSource& source) {
  if (!source.shards()) return data_bytes(source.text);
  return token_shard_bytes(source.train_shards, source.val_shards);
}

}  // namespace zs::train
