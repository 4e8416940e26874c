// Writes valid seed inputs for the fuzz targets: OUT/manifest/seed, OUT/shard_header/seed,
// OUT/safetensors_header/seed.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "checkpoint/checkpoint_format.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  namespace fs = std::filesystem;
  const fs::path out = argv[1];
  for (const char* d : {"manifest", "shard_header", "safetensors_header"})
    fs::create_directories(out / d);
  using namespace zs::ckpt;
  Manifest m;
  m.step = 7;
  m.world_size = 2;
  m.stage = 3;
  m.optimizer = "adamw";
  m.state_mask = kStateAll;
  m.trainer_state = R"({"cursor": 5})";
  m.units = {{"hidden.0", 64, {{"weight", {4, 3}, 0, 12}, {"bias", {4}, 32, 4}}},
             {"head", 64, {{"weight", {2, 4}, 0, 8}}}};
  for (int r = 0; r < 2; ++r)
    m.files.push_back(
        {"shard-0000" + std::to_string(r) + ".bin", r, 0, 0x1234, {{32 * r, 32}, {32 * r, 32}}});
  std::ofstream(out / "manifest" / "seed") << serialize_manifest(m);
  ShardHeader h;
  h.rank = 1;
  h.world = 2;
  h.state_mask = kStateAll;
  h.step = 7;
  h.units = {{32, 32}, {32, 32}};
  const auto bytes = serialize_shard_header(h);
  std::ofstream(out / "shard_header" / "seed", std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  std::string json =
      R"({"__metadata__":{"format":"pt"},"a.w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},"a.b":{"dtype":"BF16","shape":[2],"data_offsets":[16,20]}})";
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((json.size() >> (8 * i)) & 0xff);
  file += json + std::string(20, '\x01');
  std::ofstream(out / "safetensors_header" / "seed", std::ios::binary) << file;
  return 0;
}
