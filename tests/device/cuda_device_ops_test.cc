// CudaDeviceOps against the CPU DeviceOps (zs::cpu_device_ops(): convert.h, optim::cpu_adamw =
// optim::adamw_reference's bits, optim::sgd_update, optim::span_stats) making the same calls on
// host copies of the same data: random values with NaN, inf, zeros and subnormals, sizes that are
// not multiples of the block sizes, every dtype combination:
//   convert                     bitwise, NaN payloads included
//   accumulate, adamw, sgd      bitwise, except that a NaN result matches any NaN (arithmetic
//                               makes the GPU's canonical NaN where the CPU propagates an input's)
//   grad_stats                  sum within 1e-12 relative, finite flags exact, same bits twice
//   copies                      sync and async round trips, ordering after compute work
// Each test prints what it compared. All skip without a device ("no CUDA device").
#include "device/cuda/cuda_device_ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "core/convert.h"
#include "core/error.h"
#include "device/device_ops.h"
#include "optim/adamw.h"
#include "optim/sgd.h"
#include "tests/cuda_test_util.h"

namespace zs {
namespace {

constexpr DType kFloatDtypes[] = {DType::kF32, DType::kBF16, DType::kF16};
// 0, a partial warp, one block exactly, one past it, a partial last block, many blocks.
constexpr int64_t kSizes[] = {0, 1, 31, 256, 257, 4097, 100'003};

// ---- host data -------------------------------------------------------------------------------

// n elements of dtype dt as raw bytes.
struct HostData {
  DType dt = DType::kF32;
  int64_t n = 0;
  std::vector<uint8_t> bytes;

  HostData(DType d, int64_t count) : dt(d), n(count), bytes(static_cast<size_t>(count) * size()) {}
  size_t size() const { return dtype_size(dt); }
  size_t nbytes() const { return bytes.size(); }
  void* data() { return bytes.data(); }
  const void* data() const { return bytes.data(); }
  float get(int64_t i) const { return load_as_fp32(bytes.data(), dt, static_cast<size_t>(i)); }
  void set(int64_t i, float v) { store_from_fp32(bytes.data(), dt, static_cast<size_t>(i), v); }
  uint32_t bits(int64_t i) const {
    if (dt == DType::kF32) {
      uint32_t u;
      std::memcpy(&u, bytes.data() + 4 * i, 4);
      return u;
    }
    uint16_t h;
    std::memcpy(&h, bytes.data() + 2 * i, 2);
    return h;
  }
  bool is_nan(int64_t i) const {
    const uint32_t b = bits(i);
    if (dt == DType::kF32) return (b & 0x7fffffffu) > 0x7f800000u;
    if (dt == DType::kBF16) return (b & 0x7fffu) > 0x7f80u;
    return (b & 0x7fffu) > 0x7c00u;
  }
};

// Values in [lo, hi] with about 2% specials: NaNs of both signs and several payloads, infinities,
// signed zeros, fp32 subnormals, fp16 subnormal-range values, magnitudes past the fp16 range.
std::vector<float> values_with_specials(int64_t n, uint32_t seed, float lo, float hi,
                                        bool specials = true) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::uniform_int_distribution<int> pick(0, 399);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) {
    x = d(gen);
    if (!specials) continue;
    switch (pick(gen)) {
      case 0:
        x = std::bit_cast<float>(
            static_cast<uint32_t>(0x7fc00000u | (gen() & 0x3fffffu)));  // +qNaN with a payload
        break;
      case 1:
        x = std::bit_cast<float>(
            static_cast<uint32_t>(0xff800001u | (gen() & 0x3fffffu)));  // -sNaN with a payload
        break;
      case 2:
        x = INFINITY;
        break;
      case 3:
        x = -INFINITY;
        break;
      case 4:
        x = -0.0f;
        break;
      case 5:
        x = std::bit_cast<float>(static_cast<uint32_t>(gen() & 0x807fffffu));  // fp32 subnormal
        break;
      case 6:
        x = std::ldexp(d(gen), -20);  // fp16 subnormal range
        break;
      case 7:
        x = d(gen) * 1e5f;  // past fp16's largest finite
        break;
      default:
        break;
    }
  }
  return v;
}

HostData make_data(DType dt, int64_t n, uint32_t seed, float lo, float hi, bool specials = true) {
  HostData h(dt, n);
  const auto v = values_with_specials(n, seed, lo, hi, specials);
  for (int64_t i = 0; i < n; ++i) h.set(i, v[static_cast<size_t>(i)]);
  return h;
}

// Uniformly random bit patterns: every class of value, NaN payloads included.
HostData random_bits(DType dt, int64_t n, uint32_t seed) {
  HostData h(dt, n);
  std::mt19937 gen(seed);
  for (auto& b : h.bytes) b = static_cast<uint8_t>(gen());
  return h;
}

// Mismatching elements of got vs want (same dtype and size). With nan_any, a NaN matches any NaN.
struct BitsReport {
  int64_t mismatches = 0;
  int64_t nan_matched = 0;  // NaN on both sides with different bits (allowed with nan_any)
  int64_t first = -1;
};

BitsReport compare_bits(const HostData& got, const HostData& want, bool nan_any) {
  BitsReport r;
  EXPECT_EQ(got.dt, want.dt);
  EXPECT_EQ(got.n, want.n);
  for (int64_t i = 0; i < std::min(got.n, want.n); ++i) {
    if (got.bits(i) == want.bits(i)) continue;
    if (nan_any && got.is_nan(i) && want.is_nan(i)) {
      ++r.nan_matched;
      continue;
    }
    if (r.mismatches++ == 0) r.first = i;
  }
  return r;
}

void expect_bits(const char* what, const HostData& got, const HostData& want, bool nan_any) {
  const BitsReport r = compare_bits(got, want, nan_any);
  std::printf("%-44s n %7lld: %lld mismatches, %lld NaNs with other bits\n", what,
              static_cast<long long>(want.n), static_cast<long long>(r.mismatches),
              static_cast<long long>(r.nan_matched));
  if (r.mismatches > 0) {
    ADD_FAILURE() << what << ": " << r.mismatches << " elements differ; first at " << r.first
                  << ": got 0x" << std::hex << got.bits(r.first) << " (" << got.get(r.first)
                  << ") want 0x" << want.bits(r.first) << " (" << want.get(r.first) << ")";
  }
}

std::string label(const char* op, std::initializer_list<DType> dts) {
  std::string s = op;
  for (DType d : dts) {
    s += ' ';
    s += dtype_name(d);
  }
  return s;
}

// ---- fixture ---------------------------------------------------------------------------------

class CudaDeviceOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ZS_REQUIRE_CUDA();
    cuda_check(cudaSetDevice(0), "cudaSetDevice");
    // A non-blocking stream: nothing may rely on the legacy default stream's implicit ordering.
    cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    ops_ = std::make_unique<CudaDeviceOps>(stream_);
  }
  void TearDown() override {
    ops_.reset();
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  // A device buffer holding h (uploaded with the synchronous copy).
  Buffer upload(const HostData& h) {
    Buffer b(h.nbytes(), MemCategory::kOther, nullptr, &ops_->allocator());
    ops_->copy_from_host(b.data(), h.data(), h.nbytes());
    return b;
  }
  Buffer device(DType dt, int64_t n) {
    return Buffer(static_cast<size_t>(n) * dtype_size(dt), MemCategory::kOther, nullptr,
                  &ops_->allocator());
  }
  HostData download(const Buffer& b, DType dt, int64_t n) {
    HostData h(dt, n);
    ops_->copy_to_host(h.data(), b.data(), h.nbytes());
    return h;
  }

  DeviceOps& cpu_ = cpu_device_ops();  // the reference, on host copies
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<CudaDeviceOps> ops_;
};

TEST_F(CudaDeviceOpsTest, DeviceAndAllocator) {
  EXPECT_EQ(ops_->device(), Device::cuda(0));
  EXPECT_EQ(ops_->allocator().device(), Device::cuda(0));
  EXPECT_FALSE(ops_->host_accessible());
  EXPECT_EQ(ops_->compute_stream(), stream_);
  EXPECT_NE(ops_->copy_stream(), nullptr);
}

TEST_F(CudaDeviceOpsTest, ZeroClearsExactlyTheRange) {
  HostData h = random_bits(DType::kF32, 1000, 1);
  Buffer b = upload(h);
  ops_->zero(static_cast<char*>(b.data()) + 12, 1001);
  ops_->zero(b.data(), 0);
  const HostData got = download(b, DType::kF32, 1000);
  std::memset(h.bytes.data() + 12, 0, 1001);
  EXPECT_EQ(got.bytes, h.bytes);
}

TEST_F(CudaDeviceOpsTest, ConvertBitwiseEveryDtypePair) {
  uint32_t seed = 10;
  for (DType sdt : kFloatDtypes)
    for (DType ddt : kFloatDtypes)
      for (int64_t n : kSizes) {
        // Half random bit patterns (every NaN payload), half values around the fp16 range.
        HostData src = random_bits(sdt, n, ++seed);
        const HostData vals = make_data(sdt, n, ++seed, -7e4f, 7e4f);
        for (int64_t i = 0; i < n; i += 2)
          std::memcpy(src.bytes.data() + i * src.size(), vals.bytes.data() + i * src.size(),
                      src.size());
        HostData want(ddt, n);
        cpu_.convert(src.data(), sdt, want.data(), ddt, n);
        Buffer gs = upload(src), gd = device(ddt, n);
        ops_->convert(gs.data(), sdt, gd.data(), ddt, n);
        expect_bits(label("convert", {sdt, ddt}).c_str(), download(gd, ddt, n), want, false);
        // Same dtype in place: nothing changes.
        ops_->convert(gs.data(), sdt, gs.data(), sdt, n);
        expect_bits(label("convert in place", {sdt}).c_str(), download(gs, sdt, n), src, false);
      }
}

TEST_F(CudaDeviceOpsTest, AccumulateBitwiseEveryDtypePair) {
  uint32_t seed = 100;
  for (DType ddt : kFloatDtypes)
    for (DType sdt : kFloatDtypes) {
      if (sdt != ddt && sdt != DType::kF32) continue;  // the source is dst's dtype or fp32
      for (int64_t n : kSizes) {
        HostData dst = make_data(ddt, n, ++seed, -3.0f, 3.0f);
        const HostData src = make_data(sdt, n, ++seed, -3.0f, 3.0f);
        Buffer gd = upload(dst), gs = upload(src);
        cpu_.accumulate(dst.data(), ddt, src.data(), sdt, n);
        ops_->accumulate(gd.data(), ddt, gs.data(), sdt, n);
        expect_bits(label("accumulate", {ddt, sdt}).c_str(), download(gd, ddt, n), dst, true);
      }
    }
  // src == dst: doubles every element (same dtype).
  for (DType dt : kFloatDtypes) {
    HostData h = make_data(dt, 4097, ++seed, -3.0f, 3.0f);
    Buffer g = upload(h);
    cpu_.accumulate(h.data(), dt, h.data(), dt, h.n);
    ops_->accumulate(g.data(), dt, g.data(), dt, h.n);
    expect_bits(label("accumulate aliased", {dt}).c_str(), download(g, dt, h.n), h, true);
  }
}

// [Note: AdamW operation order]: 3 steps, every gradient dtype, no output or every output dtype.
TEST_F(CudaDeviceOpsTest, AdamWBitwiseAgainstCpu) {
  const optim::AdamWConfig cfg;
  uint32_t seed = 200;
  for (DType gdt : kFloatDtypes)
    for (int odt_i = -1; odt_i < 3; ++odt_i)
      for (int64_t n : {int64_t{0}, int64_t{257}, int64_t{100'003}}) {
        const bool with_out = odt_i >= 0;
        const DType odt = with_out ? kFloatDtypes[odt_i] : DType::kF32;
        HostData p = make_data(DType::kF32, n, ++seed, -1.0f, 1.0f);
        HostData m = make_data(DType::kF32, n, ++seed, -0.01f, 0.01f, false);
        HostData v = make_data(DType::kF32, n, ++seed, 0.0f, 1e-4f, false);
        HostData out(odt, n);
        Buffer gp = upload(p), gm = upload(m), gv = upload(v), gout = device(odt, n);
        for (int t = 1; t <= 3; ++t) {
          const HostData grad = make_data(gdt, n, ++seed, -0.5f, 0.5f);
          Buffer gg = upload(grad);
          const auto s = optim::make_adamw_step(cfg, 3e-4f * t, t, 0.37f, t != 2);
          cpu_.adamw(static_cast<float*>(p.data()), grad.data(), gdt, static_cast<float*>(m.data()),
                     static_cast<float*>(v.data()), n, s, with_out ? out.data() : nullptr, odt);
          ops_->adamw(gp.as<float>(), gg.data(), gdt, gm.as<float>(), gv.as<float>(), n, s,
                      with_out ? gout.data() : nullptr, odt);
        }
        std::string what = label("adamw grad", {gdt});
        if (with_out) what += label(" out", {odt});
        expect_bits((what + " p").c_str(), download(gp, DType::kF32, n), p, true);
        expect_bits((what + " m").c_str(), download(gm, DType::kF32, n), m, true);
        expect_bits((what + " v").c_str(), download(gv, DType::kF32, n), v, true);
        if (with_out) expect_bits((what + " out").c_str(), download(gout, odt, n), out, true);
      }
}

TEST_F(CudaDeviceOpsTest, SgdBitwiseAgainstCpu) {
  uint32_t seed = 300;
  for (DType gdt : kFloatDtypes)
    for (int odt_i = -1; odt_i < 3; ++odt_i)
      for (float momentum : {0.0f, 0.9f})
        for (bool with_decay : {false, true}) {
          const int64_t n = 4097;
          const bool with_out = odt_i >= 0;
          const DType odt = with_out ? kFloatDtypes[odt_i] : DType::kF32;
          const optim::SgdConfig cfg{momentum, 0.01f};
          HostData p = make_data(DType::kF32, n, ++seed, -1.0f, 1.0f);
          HostData buf = make_data(DType::kF32, n, ++seed, -0.1f, 0.1f, false);
          HostData out(odt, n);
          Buffer gp = upload(p), gb = upload(buf), gout = device(odt, n);
          float* hb = momentum != 0.0f ? static_cast<float*>(buf.data()) : nullptr;
          float* db = momentum != 0.0f ? gb.as<float>() : nullptr;
          for (int t = 1; t <= 3; ++t) {
            const HostData grad = make_data(gdt, n, ++seed, -0.5f, 0.5f);
            Buffer gg = upload(grad);
            const float lr = 0.05f * t, scale = 1.0f / (t + 2);
            cpu_.sgd(static_cast<float*>(p.data()), grad.data(), gdt, hb, n, cfg, lr, scale,
                     with_decay, with_out ? out.data() : nullptr, odt);
            ops_->sgd(gp.as<float>(), gg.data(), gdt, db, n, cfg, lr, scale, with_decay,
                      with_out ? gout.data() : nullptr, odt);
          }
          std::string what = label("sgd grad", {gdt});
          if (with_out) what += label(" out", {odt});
          if (momentum != 0.0f) what += " momentum";
          if (with_decay) what += " decay";
          expect_bits((what + " p").c_str(), download(gp, DType::kF32, n), p, true);
          if (momentum != 0.0f) {
            expect_bits((what + " buf").c_str(), download(gb, DType::kF32, n), buf, true);
          }
          if (with_out) expect_bits((what + " out").c_str(), download(gout, odt, n), out, true);
        }
}

// A list of spans of every dtype and size in 3 groups: group 0 finite, group 1 gets a NaN (in a
// long fp32 span), group 2 an inf (in a bf16 span). The CPU gets the same list over host copies.
TEST_F(CudaDeviceOpsTest, GradStatsListAgainstCpu) {
  std::vector<HostData> host;
  std::vector<Buffer> dev;
  std::vector<DeviceOps::StatsSpan> spans;  // device pointers; host_spans: the same on the host
  uint32_t seed = 400;
  int k = 0;
  size_t inf_at = 0;
  for (int64_t n : kSizes)
    for (DType dt : kFloatDtypes) {
      if (n == 100'003 && dt == DType::kBF16) inf_at = host.size();
      host.push_back(make_data(dt, n, ++seed, -3.0f, 3.0f, false));
      spans.push_back({nullptr, dt, n, k++ % 2});  // groups 0 and 1
    }
  const size_t nan_at = host.size();
  host.push_back(make_data(DType::kF32, 1'000'003, ++seed, -3.0f, 3.0f, false));
  spans.push_back({nullptr, DType::kF32, 1'000'003, 1});
  host[nan_at].set(777'777, NAN);
  host[inf_at].set(50'000, -INFINITY);
  spans[inf_at].group = 2;
  std::vector<DeviceOps::StatsSpan> host_spans = spans;
  for (size_t i = 0; i < host.size(); ++i) {
    dev.push_back(upload(host[i]));
    spans[i].data = dev.back().data();
    host_spans[i].data = host[i].data();
  }

  // The finite spans only (the NaN and inf ones make the sum non-finite); 4 groups, the last one
  // without spans (finite).
  std::vector<DeviceOps::StatsSpan> clean, host_clean;
  for (size_t i = 0; i < spans.size(); ++i) {
    if (i == nan_at || i == inf_at) continue;
    clean.push_back(spans[i]);
    host_clean.push_back(host_spans[i]);
  }
  std::vector<uint8_t> want_finite(4, 7), finite(4, 7);
  const double want = cpu_.grad_stats(host_clean, want_finite);
  const double got = ops_->grad_stats(clean, finite);
  std::printf("grad_stats %zu spans: gpu %.17g cpu %.17g rel %.3g\n", clean.size(), got, want,
              std::fabs(got - want) / want);
  EXPECT_NEAR(got, want, 1e-12 * want);
  EXPECT_EQ(finite, want_finite);
  EXPECT_EQ(finite, (std::vector<uint8_t>{1, 1, 1, 1}));
  std::vector<uint8_t> again(4, 7);
  const double got2 = ops_->grad_stats(clean, again);
  EXPECT_EQ(std::bit_cast<uint64_t>(got2), std::bit_cast<uint64_t>(got)) << "not deterministic";

  // Every span: groups 1 (NaN) and 2 (inf) are not finite, group 0 is.
  std::vector<uint8_t> want_all(3, 7), all(3, 7);
  EXPECT_TRUE(std::isnan(cpu_.grad_stats(host_spans, want_all)));
  EXPECT_EQ(want_all, (std::vector<uint8_t>{1, 0, 0}));
  EXPECT_TRUE(std::isnan(ops_->grad_stats(spans, all)));
  EXPECT_EQ(all, want_all);

  // One span of one element (exact on both); then an empty list.
  spans[3].group = host_spans[3].group = 0;  // kSizes[1] == 1, fp32
  std::vector<uint8_t> one(1, 7), want_one(1, 7);
  EXPECT_EQ(ops_->grad_stats(std::span(spans).subspan(3, 1), one),
            cpu_.grad_stats(std::span(host_spans).subspan(3, 1), want_one));
  EXPECT_EQ(one, want_one);
  std::vector<uint8_t> none(2, 7);
  EXPECT_EQ(ops_->grad_stats({}, none), 0.0);
  EXPECT_EQ(none, (std::vector<uint8_t>{1, 1}));

  // A group outside the flags is refused.
  std::vector<uint8_t> small(1);
  spans[0].group = 1;
  EXPECT_THROW(ops_->grad_stats(std::span(spans).subspan(0, 1), small), Error);
}

TEST_F(CudaDeviceOpsTest, CopiesRoundTrip) {
  const int64_t n = 1'000'003;
  const HostData h = random_bits(DType::kF32, n, 500);
  const size_t bytes = h.nbytes();
  Buffer g = device(DType::kF32, n), g2 = device(DType::kF32, n);
  Buffer pinned(bytes, MemCategory::kOther, nullptr, &pinned_host_allocator());
  Buffer pinned2(bytes, MemCategory::kOther, nullptr, &pinned_host_allocator());

  // Synchronous both ways.
  ops_->copy_from_host(g.data(), h.data(), bytes);
  HostData back(DType::kF32, n);
  ops_->copy_to_host(back.data(), g.data(), bytes);
  EXPECT_EQ(back.bytes, h.bytes) << "sync round trip";

  // Async in: pinned source, then a device op that reads the copy; async out after that op.
  std::memcpy(pinned.data(), h.data(), bytes);
  ops_->copy_from_host_async(g2.data(), pinned.data(), bytes);
  ops_->convert(g2.data(), DType::kF32, g.data(), DType::kF32, n);  // device copy g2 -> g
  ops_->copy_to_host_async(pinned2.data(), g.data(), bytes);
  ops_->wait_host_copies();
  EXPECT_EQ(std::memcmp(pinned2.data(), h.data(), bytes), 0) << "async round trip";
  ops_->synchronize();

  // Ordering: the async copy sees compute work enqueued just before it (a zero of the buffer),
  // not the older contents, even though it runs on the copy stream.
  ops_->zero(g.data(), bytes);
  ops_->copy_to_host_async(pinned2.data(), g.data(), bytes);
  ops_->wait_host_copies();
  const auto* z = static_cast<const uint8_t*>(pinned2.data());
  EXPECT_TRUE(std::all_of(z, z + bytes, [](uint8_t b) { return b == 0; })) << "copy overtook";

  // Several async copies in flight, then one wait; synchronize() waits for them too.
  for (int part = 0; part < 4; ++part) {
    const size_t off = bytes / 4 * static_cast<size_t>(part);
    const size_t len = part == 3 ? bytes - off : bytes / 4;
    ops_->copy_from_host_async(static_cast<char*>(g.data()) + off, h.bytes.data() + off, len);
    ops_->copy_to_host_async(static_cast<char*>(pinned2.data()) + off,
                             static_cast<const char*>(g.data()) + off, len);
  }
  ops_->synchronize();
  EXPECT_EQ(std::memcmp(pinned2.data(), h.data(), bytes), 0) << "pieces";
}

TEST_F(CudaDeviceOpsTest, BadArgumentsAreRefused) {
  Buffer a = device(DType::kF32, 16), b = device(DType::kF32, 16);
  auto code_of = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return static_cast<int>(e.code());
    }
    return -1;
  };
  const int kInvalid = static_cast<int>(ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([&] { ops_->convert(a.data(), DType::kI8, b.data(), DType::kF32, 4); }),
            kInvalid);
  EXPECT_EQ(code_of([&] { ops_->convert(a.data(), DType::kF32, a.data(), DType::kBF16, 4); }),
            kInvalid);
  EXPECT_EQ(code_of([&] { ops_->accumulate(a.data(), DType::kF16, b.data(), DType::kBF16, 4); }),
            kInvalid);
  EXPECT_EQ(code_of([&] { ops_->accumulate(a.data(), DType::kF32, b.data(), DType::kF32, -1); }),
            kInvalid);
  const optim::AdamWStep s;
  EXPECT_EQ(code_of([&] {
              ops_->adamw(a.as<float>(), b.data(), DType::kU8, a.as<float>(), a.as<float>(), 4, s,
                          nullptr, DType::kF32);
            }),
            kInvalid);
  EXPECT_EQ(code_of([&] {
              ops_->sgd(a.as<float>(), b.data(), DType::kF32, nullptr, 4, optim::SgdConfig{}, 0.1f,
                        1.0f, false, nullptr, DType::kF32);
            }),
            kInvalid);  // momentum 0.9 without a buffer
  ops_->synchronize();  // nothing was enqueued by the refused calls; the stream is healthy
}

}  // namespace
}  // namespace zs
