// Writes one value over a parameter's state in a checkpoint and re-signs it, so that only the
// checks on the values (or what training makes of them) can catch the edit:
//   ckpt_poke DIR UNIT PARAM STATE VALUE
// STATE is master, exp_avg or exp_avg_sq. Every element of parameter PARAM of unit UNIT in every
// shard file of checkpoint directory DIR becomes VALUE (fp32); then each file's size and XXH3 in
// the manifest are recomputed. Prints the number of elements written. Exit 1 with a message for an
// unknown unit, parameter or state. (The test tool of tests/apps/zs_train_finite_isa.sh.)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_format.h"
#include "checkpoint/checkpoint_io.h"
#include "core/error.h"

namespace {

uint32_t state_bit(const std::string& name) {
  if (name == "master") return zs::ckpt::kStateMaster;
  if (name == "exp_avg") return zs::ckpt::kStateExpAvg;
  if (name == "exp_avg_sq") return zs::ckpt::kStateExpAvgSq;
  zs::fail(zs::ErrorCode::kInvalidArgument, "state '{}' is not master, exp_avg or exp_avg_sq",
           name);
}

int64_t poke(const std::string& dir, const std::string& unit, const std::string& param,
             uint32_t bit, float value) {
  namespace ckpt = zs::ckpt;
  const std::string path = dir + "/" + ckpt::kManifestName;
  ckpt::Manifest m = ckpt::parse_manifest(ckpt::read_whole_file(path, int64_t{1} << 26));
  const int pos = ckpt::state_index(m.state_mask, bit);
  ZS_CHECK(pos >= 0, zs::ErrorCode::kInvalidArgument, "the checkpoint holds no such state ({})",
           ckpt::state_mask_text(m.state_mask));
  size_t u = 0;
  while (u < m.units.size() && m.units[u].name != unit) ++u;
  ZS_CHECK(u < m.units.size(), zs::ErrorCode::kInvalidArgument, "no unit '{}'", unit);
  const ckpt::ParamEntry* p = nullptr;
  for (const ckpt::ParamEntry& e : m.units[u].params) {
    if (e.name == param) p = &e;
  }
  ZS_CHECK(p != nullptr, zs::ErrorCode::kInvalidArgument, "unit '{}' has no parameter '{}'", unit,
           param);
  int64_t written = 0;
  for (ckpt::FileEntry& f : m.files) {
    ckpt::ShardHeader h;
    h.state_mask = m.state_mask;
    h.units = f.units;
    const int64_t lo = std::max(p->offset, f.units[u].begin);
    const int64_t hi = std::min(p->offset + p->numel, f.units[u].begin + f.units[u].numel);
    if (lo < hi) {
      const std::vector<float> values(static_cast<size_t>(hi - lo), value);
      std::fstream io(dir + "/" + f.name, std::ios::in | std::ios::out | std::ios::binary);
      io.seekp(h.offset_of(u, pos, lo));
      io.write(reinterpret_cast<const char*>(values.data()),
               static_cast<std::streamsize>(values.size() * sizeof(float)));
      ZS_CHECK(io.good(), zs::ErrorCode::kNotFound, "cannot write {}", f.name);
      written += hi - lo;
    }
  }
  for (ckpt::FileEntry& f : m.files) {  // re-sign
    const ckpt::InFile in(dir + "/" + f.name);
    f.size = in.size();
    f.xxh3 = in.hash();
  }
  std::ofstream(path, std::ios::trunc) << ckpt::serialize_manifest(m);
  return written;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: ckpt_poke DIR UNIT PARAM STATE VALUE\n");
    return 2;
  }
  try {
    const int64_t n =
        poke(argv[1], argv[2], argv[3], state_bit(argv[4]), std::strtof(argv[5], nullptr));
    std::printf("%lld elements written\n", static_cast<long long>(n));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ckpt_poke: %s\n", e.what());
    return 1;
  }
  return 0;
}
