// The CUDA OpKernels against the CPU OpKernels (the reference), method by method, on the same
// random inputs in small arenas: the same arena image goes to a CPU backend and to the backend
// under test, the same kernel runs on both through KernelContext::ops, and the two arenas come
// back whole. Every output element is compared (bitwise where the arithmetic is the same, in a
// proven interval where it is not: cuBLAS's summation order, CUDA's expf / tanhf), every output
// was poisoned first and must have been written, and every byte outside the outputs must be
// unchanged.
//
// The device tests need a CUDA device and skip without one ("no CUDA device"). The same harness
// also runs with a second CPU backend as the backend under test (the *OnCpu tests): that checks
// the harness itself and that every interval bound holds for the CPU's own result (an interval
// that excluded the reference would be a wrong bound), so the device tests run for the first
// time with checks that are known to work.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cpu/cpu_kernels.h"
#include "engine/backend/cuda/element_math.h"
#include "engine/backend/op_kernels.h"
#include "engine/bf16.h"
#include "engine/error.h"
#include "engine/official/attention_math.h"
#include "engine/ops/attention.h"
#include "engine/ops/norm.h"
#include "tests/cuda_attention_replay.h"
#ifdef PSI_HAVE_CUDA
#include "engine/backend/cuda/cuda_backend.h"
#endif

namespace psi {
namespace {

using rt::DeviceRegion;
using rt::KernelContext;
using rt::MatRef;
using u16 = std::uint16_t;

constexpr std::size_t kArena = std::size_t(8) << 20;
constexpr u16 kPoisonBf16 = 0x7fa5;             // a signalling-NaN pattern no kernel produces
constexpr std::uint32_t kPoisonF32 = 0x7fa5a5a5u;
constexpr double kU = 0x1p-24;                  // float32 unit roundoff
// CUDA's expf and tanhf are within 2 ulp of the exact result (CUDA C Programming Guide,
// "Mathematical Functions": maximum ulp error 2 for both, full range); glibc's expf within
// 1 ulp. Two implementations therefore differ by at most 3 ulp ≤ 3·2^-23 relative for normal
// results; 2^-21 bounds that.
constexpr double kExpDiff = 0x1p-21;
// First-order bounds below are multiplied by this to cover the second-order terms.
constexpr double kSecondOrder = 1.0 + 0x1p-7;

// ---- backends -------------------------------------------------------------------------------------

// A backend with its arena and one stream; every operation is waited for.
class Rig {
 public:
  explicit Rig(std::unique_ptr<rt::Backend> b) : b_(std::move(b)) {
    b_->allocate_arena(kArena);
    s_ = b_->create_stream("test");
  }
  rt::Backend& backend() { return *b_; }
  void upload(const std::vector<std::byte>& image) {
    b_->copy_h2d(s_, 0, image.data(), image.size(), {});
    sync();
  }
  std::vector<std::byte> download() {
    std::vector<std::byte> out(kArena);
    b_->copy_d2h(s_, out.data(), 0, kArena, {});
    sync();
    return out;
  }
  void run(const rt::Kernel& k) {
    b_->launch(s_, k, {});
    sync();
  }

 private:
  void sync() {
    b_->synchronize_stream(s_);
    b_->rethrow_async_error();
  }
  std::unique_ptr<rt::Backend> b_;
  rt::StreamHandle s_ = 0;
};

// The CUDA backend, or null with the reason.
std::unique_ptr<rt::Backend> cuda_backend(std::string* why) {
#ifdef PSI_HAVE_CUDA
  if (rt::cuda_device_count(why) > 0) return rt::make_cuda_backend(0);
  return nullptr;
#else
  *why = "this build has no CUDA backend";
  return nullptr;
#endif
}

// ---- arena images ----------------------------------------------------------------------------------

class Source {
 public:
  explicit Source(std::uint64_t seed) : rng_(seed) {}
  // Finite, non-zero BF16 values of magnitude in [2^-lo, 2^hi), of random sign or positive.
  Bf16Tensor tensor(const Shape& shape, int lo = 6, int hi = 3, bool positive = false) {
    std::uniform_int_distribution<int> e(127 - lo, 127 + hi - 1), m(0, 127), s(0, 1);
    Bf16Tensor t(shape);
    for (auto& v : t.data) v = Bf16::from_bits(u16(((positive ? 0 : s(rng_)) << 15) | (e(rng_) << 7) | m(rng_)));
    return t;
  }
  std::vector<float> f32(std::size_t n, float lo, float hi) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng_);
    return v;
  }

 private:
  std::mt19937_64 rng_;
};

// Regions laid out from offset 0, 256-byte aligned, over a zero-filled image.
class Image {
 public:
  Image() : bytes_(kArena) {}
  DeviceRegion region(std::uint64_t bytes, const std::string& name) {
    const DeviceRegion r{top_, bytes, name};
    top_ = (top_ + bytes + 255) / 256 * 256;
    if (top_ > kArena) throw Error("test image: arena too small for " + name);
    return r;
  }
  DeviceRegion put(const Bf16Tensor& t, const std::string& name) {
    const DeviceRegion r = region(t.bytes(), name);
    std::memcpy(bytes_.data() + r.offset, t.ptr(), t.bytes());
    return r;
  }
  DeviceRegion put(const std::vector<float>& v, const std::string& name) {
    const DeviceRegion r = region(v.size() * 4, name);
    std::memcpy(bytes_.data() + r.offset, v.data(), v.size() * 4);
    return r;
  }
  // A region filled with the poison pattern of its element type.
  DeviceRegion poisoned(std::uint64_t elements, bool f32, const std::string& name) {
    const DeviceRegion r = region(elements * (f32 ? 4 : 2), name);
    for (std::uint64_t i = 0; i < elements; ++i) {
      if (f32)
        std::memcpy(bytes_.data() + r.offset + 4 * i, &kPoisonF32, 4);
      else
        std::memcpy(bytes_.data() + r.offset + 2 * i, &kPoisonBf16, 2);
    }
    return r;
  }
  const std::vector<std::byte>& bytes() const { return bytes_; }

 private:
  std::vector<std::byte> bytes_;
  std::uint64_t top_ = 0;
};

// An output of a kernel: the elements of `m` (BF16 or float32) may change, nothing else may.
struct Out {
  MatRef m;
  bool f32 = false;
  bool poisoned = true;  // false for in-place outputs (their inputs are their initial contents)
};

struct Result {
  std::vector<std::byte> image, ref, dut;
};

// Runs `k` on the reference (CPU) and on the backend under test from the same image; checks that
// only the declared outputs changed and that every poisoned output element was written.
Result run_both(Rig& ref, Rig& dut, const Image& img, const std::vector<Out>& outs, const rt::Kernel& k) {
  Result r{img.bytes(), {}, {}};
  ref.upload(r.image);
  dut.upload(r.image);
  ref.run(k);
  dut.run(k);
  r.ref = ref.download();
  r.dut = dut.download();
  std::vector<bool> out_byte(kArena, false);
  for (const Out& o : outs) {
    const std::size_t es = o.f32 ? 4 : 2;
    for (std::int64_t i = 0; i < o.m.rows; ++i)
      for (std::int64_t j = 0; j < o.m.cols; ++j) {
        const std::size_t at = o.m.region.offset + std::size_t(o.m.start + i * o.m.ld + j) * es;
        for (std::size_t b = 0; b < es; ++b) out_byte[at + b] = true;
        if (o.poisoned) {
          const bool still = o.f32 ? std::memcmp(r.dut.data() + at, &kPoisonF32, 4) == 0
                                   : std::memcmp(r.dut.data() + at, &kPoisonBf16, 2) == 0;
          EXPECT_FALSE(still) << o.m.region.name << " element (" << i << ", " << j << ") was not written";
        }
      }
  }
  std::size_t stray = 0;
  for (std::size_t b = 0; b < kArena; ++b)
    if (!out_byte[b] && r.dut[b] != r.image[b] && stray++ < 5)
      ADD_FAILURE() << "byte " << b << " outside the outputs changed";
  EXPECT_EQ(stray, 0u) << "bytes outside the declared outputs changed";
  return r;
}

u16 bf16_at(const std::vector<std::byte>& a, const MatRef& m, std::int64_t i, std::int64_t j) {
  u16 v;
  std::memcpy(&v, a.data() + m.region.offset + std::size_t(m.start + i * m.ld + j) * 2, 2);
  return v;
}
float f32_at(const std::vector<std::byte>& a, const MatRef& m, std::int64_t i, std::int64_t j) {
  float v;
  std::memcpy(&v, a.data() + m.region.offset + std::size_t(m.start + i * m.ld + j) * 4, 4);
  return v;
}

void expect_bitwise(const Result& r, const MatRef& m, bool f32) {
  std::int64_t differ = 0;
  for (std::int64_t i = 0; i < m.rows; ++i)
    for (std::int64_t j = 0; j < m.cols; ++j) {
      const bool same = f32 ? std::bit_cast<std::uint32_t>(f32_at(r.ref, m, i, j)) ==
                                  std::bit_cast<std::uint32_t>(f32_at(r.dut, m, i, j))
                            : bf16_at(r.ref, m, i, j) == bf16_at(r.dut, m, i, j);
      if (!same && differ++ < 5)
        ADD_FAILURE() << m.region.name << " (" << i << ", " << j << "): reference "
                      << (f32 ? f32_at(r.ref, m, i, j) : Bf16::from_bits(bf16_at(r.ref, m, i, j)).to_float())
                      << ", under test " << (f32 ? f32_at(r.dut, m, i, j) : Bf16::from_bits(bf16_at(r.dut, m, i, j)).to_float());
    }
  EXPECT_EQ(differ, 0) << m.region.name << ": elements not bitwise equal to the CPU backend's";
}

// The BF16 values a float32 in [lo, hi] (double bounds) can round to, as ordinals.
struct Interval {
  std::int32_t lo, hi;
};
Interval bf16_interval(double lo, double hi) {
  const float inf = std::numeric_limits<float>::infinity();
  float fl = float(lo), fh = float(hi);
  if (double(fl) > lo) fl = std::nextafter(fl, -inf);
  if (double(fh) < hi) fh = std::nextafter(fh, inf);
  return {bf16_ordinal(bf16_rne(fl)), bf16_ordinal(bf16_rne(fh))};
}
bool inside(u16 v, Interval iv) {
  const Bf16 b = Bf16::from_bits(v);
  return !b.is_nan() && bf16_ordinal(b) >= iv.lo && bf16_ordinal(b) <= iv.hi;
}

// How sharp a set of interval checks was: the share of elements allowed at most two BF16 values.
// On well-conditioned data (no cancellation) the bounds below must be that sharp, or a check
// could pass a wrong kernel; each such case asserts it.
struct Sharpness {
  std::int64_t tight = 0, all = 0;
  void add(Interval iv) {
    tight += iv.hi - iv.lo <= 1;
    ++all;
  }
  void expect_sharp(const std::string& what) const {
    EXPECT_GE(double(tight), 0.9 * double(all)) << what << ": only " << tight << " of " << all
                                               << " intervals allow at most two values";
  }
};

// ‖got − exact‖ / ‖exact‖ over the elements of m.
double rel_l2(const std::vector<std::byte>& a, const MatRef& m, const std::vector<double>& exact) {
  double num = 0, den = 0;
  for (std::int64_t i = 0; i < m.rows; ++i)
    for (std::int64_t j = 0; j < m.cols; ++j) {
      const double e = exact[std::size_t(i * m.cols + j)], g = Bf16::from_bits(bf16_at(a, m, i, j)).to_float();
      num += (g - e) * (g - e);
      den += e * e;
    }
  return std::sqrt(num / den);
}

// The device result must be as close to the exact one as the CPU's: both are dominated by the
// final BF16 rounding (relative error up to 2^-9 per element), and the device can land on the
// other side of a rounding boundary only where its float32 value differs from the CPU's within
// the per-element bound, i.e. in a small fraction of the elements, each by one ulp. A ratio
// above 1.25 would mean the device is systematically less accurate, which no such bound allows.
void expect_rel_l2_like_cpu(const Result& r, const MatRef& m, const std::vector<double>& exact) {
  const double cpu = rel_l2(r.ref, m, exact), dut = rel_l2(r.dut, m, exact);
  ::testing::Test::RecordProperty(m.region.name + " rel-L2 cpu", std::to_string(cpu));
  ::testing::Test::RecordProperty(m.region.name + " rel-L2 under test", std::to_string(dut));
  EXPECT_LE(dut, 1.25 * cpu + 1e-7) << m.region.name << ": rel-L2 to the float64 result, CPU " << cpu;
}

// ---- the cases ---------------------------------------------------------------------------------------
// Each case builds its image, runs on both rigs and checks; the device tests and the *OnCpu tests
// run the same cases.

using Case = std::function<void(Rig& ref, Rig& dut)>;

void elementwise_case(Rig& ref, Rig& dut) {
  Source src(0x0c0d'a001);
  const std::int64_t N = 33, D = 80, wide = 112, c0 = 16;
  Image img;
  const Bf16Tensor x = src.tensor({N, D}, 8, 6), y = src.tensor({N, D}, 8, 6), table = src.tensor({1, D});
  const Bf16Tensor scale1 = src.tensor({1, D}, 12, 1), shiftN = src.tensor({N, D}, 8, 4), gN = src.tensor({N, D}, 4, 2);
  const DeviceRegion rx = img.put(x, "x"), ry = img.put(y, "y"), rt_ = img.put(table, "table");
  const DeviceRegion rs = img.put(scale1, "scale"), rsh = img.put(shiftN, "shift"), rg = img.put(gN, "gate");
  const DeviceRegion rv = img.put(y, "values"), rres = img.put(x, "residual state"), rgr = img.put(x, "gated state");
  const DeviceRegion rmod = img.poisoned(std::uint64_t(N * wide), false, "modulated (column block)");
  const DeviceRegion rz = img.poisoned(std::uint64_t(N * D), true, "zeroed");
  const DeviceRegion rcopy = img.poisoned(std::uint64_t(N * D), false, "copy");
  const MatRef X = MatRef::dense(rx, N, D), Y = MatRef::dense(ry, N, D), T = MatRef::dense(rt_, 1, D);
  const MatRef S = MatRef::dense(rs, 1, D), SH = MatRef::dense(rsh, N, D), G = MatRef::dense(rg, N, D);
  const MatRef V = MatRef::dense(rv, N, D), RES = MatRef::dense(rres, N, D), GR = MatRef::dense(rgr, N, D);
  const MatRef MOD = MatRef::dense(rmod, N, wide).block(0, N, c0, D), Z = MatRef::dense(rz, N, D);
  const std::vector<Out> outs = {{V, false, false},   {RES, false, false}, {GR, false, false},
                                 {MOD, false, true}, {Z, true, true},     {MatRef::dense(rcopy, N, D), false, true}};
  const Result r = run_both(ref, dut, img, outs, [=](const KernelContext& k) {
    k.ops->ada_value(k, T, V);
    k.ops->modulate(k, X, S, SH, MOD);  // broadcast scale, per-row shift, into a column block
    k.ops->residual(k, RES, Y);
    k.ops->gated_residual(k, GR, Y, G);
    k.ops->zero_f32(k, Z);
    k.ops->copy(k, rcopy, rx, rx.bytes);
  });
  for (const Out& o : outs) expect_bitwise(r, o.m, o.f32);
}

void modulate_in_place_case(Rig& ref, Rig& dut) {
  Source src(0x0c0d'a002);
  const std::int64_t N = 21, D = 48;
  Image img;
  const DeviceRegion rx = img.put(src.tensor({N, D}, 8, 6), "x"), rs = img.put(src.tensor({N, D}, 12, 1), "scale");
  const DeviceRegion rsh = img.put(src.tensor({1, D}, 8, 4), "shift"), rg = img.put(src.tensor({1, D}, 4, 2), "gate");
  const DeviceRegion ry = img.put(src.tensor({N, D}, 8, 6), "update"), rs2 = img.put(src.tensor({N, D}, 8, 6), "state");
  const MatRef X = MatRef::dense(rx, N, D), ST = MatRef::dense(rs2, N, D);
  const Result r = run_both(ref, dut, img, {{X, false, false}, {ST, false, false}}, [=](const KernelContext& k) {
    k.ops->modulate(k, X, MatRef::dense(rs, N, D), MatRef::dense(rsh, 1, D), X);
    k.ops->gated_residual(k, ST, MatRef::dense(ry, N, D), MatRef::dense(rg, 1, D));  // broadcast gate
  });
  expect_bitwise(r, X, false);
  expect_bitwise(r, ST, false);
}

void rms_norm_case(Rig& ref, Rig& dut) {
  Source src(0x0c0d'a003);
  Image img;
  std::vector<Out> outs;
  std::vector<std::function<void(const KernelContext&)>> steps;
  for (const std::int64_t n : {64, 1000, 3000, 4096}) {
    const std::int64_t rows = 5;
    const MatRef X = MatRef::dense(img.put(src.tensor({rows, n}, 10, 8), "x" + std::to_string(n)), rows, n);
    const MatRef W = MatRef::dense(img.put(src.tensor({1, n}, 2, 2), "w" + std::to_string(n)), 1, n);
    const MatRef Y = MatRef::dense(img.poisoned(std::uint64_t(rows * n), false, "normed" + std::to_string(n)), rows, n);
    const MatRef YW = MatRef::dense(img.poisoned(std::uint64_t(rows * n), false, "weighted" + std::to_string(n)), rows, n);
    const MatRef XI = MatRef::dense(img.put(src.tensor({rows, n}, 10, 8), "in place" + std::to_string(n)), rows, n);
    outs.push_back({Y, false, true});
    outs.push_back({YW, false, true});
    outs.push_back({XI, false, false});
    steps.push_back([=](const KernelContext& k) {
      k.ops->rms_norm(k, X, nullptr, ops::kNormEps, Y, ops::NormKernel::psi_f32);
      k.ops->rms_norm(k, X, &W, ops::kNormEps, YW, ops::NormKernel::psi_f32);
      k.ops->rms_norm(k, XI, nullptr, ops::kNormEps, XI, ops::NormKernel::psi_f32);
    });
  }
  const Result r = run_both(ref, dut, img, outs, [=](const KernelContext& k) {
    for (const auto& s : steps) s(k);
  });
  for (const Out& o : outs) expect_bitwise(r, o.m, false);
}

void rope_case(Rig& ref, Rig& dut) {
  Source src(0x0c0d'a004);
  const std::int64_t T = 17, H = 4, half = 16;
  Image img;
  Bf16Tensor cos({1, H, T, half}), sin({1, H, T, half});
  const std::vector<float> angles = src.f32(cos.data.size(), -6.0f, 6.0f);
  for (std::size_t i = 0; i < angles.size(); ++i) {
    cos.data[i] = bf16_rne(std::cos(angles[i]));
    sin.data[i] = bf16_rne(std::sin(angles[i]));
  }
  const rt::RopeRef tables{img.put(cos, "cos"), img.put(sin, "sin"), H, T, half};
  const MatRef X = MatRef::dense(img.put(src.tensor({T, H * 2 * half}, 8, 4), "q"), T, H * 2 * half);
  const Result r = run_both(ref, dut, img, {{X, false, false}}, [=](const KernelContext& k) { k.ops->rope(k, X, tables); });
  expect_bitwise(r, X, false);
}

void finish_linear_case(Rig& ref, Rig& dut) {
  Source src(0x0c0d'a005);
  const std::int64_t M = 19, N = 72, wide = 100, c0 = 20;
  Image img;
  const MatRef A = MatRef::dense(img.put(src.f32(std::size_t(M * N), -30.0f, 30.0f), "acc"), M, N);
  const MatRef B = MatRef::dense(img.put(src.tensor({1, N}, 4, 6), "bias"), 1, N);
  const MatRef Y = MatRef::dense(img.poisoned(std::uint64_t(M * wide), false, "y"), M, wide).block(0, M, c0, N);
  const MatRef Y0 = MatRef::dense(img.poisoned(std::uint64_t(M * N), false, "y no bias"), M, N);
  const Result r = run_both(ref, dut, img, {{Y, false, true}, {Y0, false, true}}, [=](const KernelContext& k) {
    k.ops->finish_linear(k, A, &B, Y);
    k.ops->finish_linear(k, A, nullptr, Y0);
  });
  expect_bitwise(r, Y, false);
  expect_bitwise(r, Y0, false);
}

// The device's f(t) for t within 6 float32 steps of the exact transcendental value: CUDA's result
// lies within 2 ulp of it, i.e. at most 2.5 ulp of the nearest float, which is at most 5 steps
// when the binade changes in between. f is monotone in t, and so is the BF16 rounding.
template <class F>
Interval transcendental_interval(double exact, F f) {
  const float inf = std::numeric_limits<float>::infinity();
  float lo = float(exact), hi = float(exact);
  for (int i = 0; i < 6; ++i) {
    lo = std::nextafter(lo, -inf);
    hi = std::nextafter(hi, inf);
  }
  const float a = f(lo), b = f(hi);
  return {std::min(bf16_ordinal(bf16_rne(a)), bf16_ordinal(bf16_rne(b))),
          std::max(bf16_ordinal(bf16_rne(a)), bf16_ordinal(bf16_rne(b)))};
}

// gelu(x) = (0.5·x)·(1 + t), t = tanh(inner); inner is computed with exactly rounded operations
// (the same on both sides), t by tanhf.
Interval gelu_interval(u16 xb) {
  const float x = em::widen(xb);
  const float inner = em::mul(em::kGeluBeta, em::add(x, em::mul(em::kGeluKappa, em::mul(em::mul(x, x), x))));
  return transcendental_interval(std::tanh(double(inner)),
                                 [&](float t) { return em::mul(em::mul(0.5f, x), em::add(1.0f, t)); });
}

// sigmoid(x) = 1 / (1 + e), e = exp(−x) by expf.
Interval sigmoid_interval(u16 xb) {
  const float x = em::widen(xb);
  return transcendental_interval(std::exp(-double(x)), [](float e) { return em::div(1.0f, em::add(1.0f, e)); });
}

// Equal bits, or both NaN (a NaN's payload is not portable: CUDA returns its canonical NaN).
bool same_value(u16 a, u16 b) { return a == b || (Bf16::from_bits(a).is_nan() && Bf16::from_bits(b).is_nan()); }

// Non-finite inputs and results take IEEE's exact special values on both sides (tanhf(±∞) = ±1,
// expf(−∞) = 0, expf(∞) = ∞): those elements must equal the host formula. Returns false, after
// reporting the first few, when the element is wrong.
bool check_activation(u16 in, u16 got, u16 host, Interval iv, const char* what, std::int64_t& wrong) {
  const Bf16 b = Bf16::from_bits(in);
  const bool ok = !b.is_finite() || !Bf16::from_bits(host).is_finite() ? same_value(got, host) : inside(got, iv);
  if (!ok && wrong++ < 5)
    ADD_FAILURE() << what << " of " << b.to_float() << " (bits " << in << "): got " << Bf16::from_bits(got).to_float()
                  << ", allowed BF16 ordinals [" << iv.lo << ", " << iv.hi << "]";
  return ok;
}

// gelu on every BF16 value; the gate's sigmoid on every BF16 value, and its multiply bitwise
// given the sigmoid values the backend under test produced.
void activation_case(Rig& ref, Rig& dut) {
  Source src(0x0c0d'a006);
  Image img;
  Bf16Tensor all({256, 256});
  for (std::uint32_t b = 0; b < 0x10000; ++b) all.data[b] = Bf16::from_bits(u16(b));
  const std::int64_t R = 4096, H = 16, Dh = 8;
  const MatRef G = MatRef::dense(img.put(all, "gelu"), 256, 256);
  const MatRef Z = MatRef::dense(img.put(all, "gate z"), R, H);
  const Bf16Tensor a = src.tensor({R, H * Dh}, 6, 4);
  const MatRef A = MatRef::dense(img.put(a, "gated values"), R, H * Dh);
  const Result r = run_both(ref, dut, img, {{G, false, false}, {Z, false, false}, {A, false, false}},
                            [=](const KernelContext& k) {
                              k.ops->gelu_tanh(k, G);
                              k.ops->attention_gate(k, Z, A, H, Dh);
                            });
  std::int64_t wrong = 0, cpu_wrong = 0;
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const std::int64_t i = b / 256, j = b % 256, zi = b / H, zj = b % H;
    check_activation(u16(b), bf16_at(r.dut, G, i, j), em::gelu_tanh(u16(b)), gelu_interval(u16(b)), "gelu", wrong);
    check_activation(u16(b), bf16_at(r.dut, Z, zi, zj), em::sigmoid(u16(b)), sigmoid_interval(u16(b)), "sigmoid", wrong);
    // The bounds must hold the CPU's own values (std::tanh / std::exp are other implementations).
    check_activation(u16(b), bf16_at(r.ref, G, i, j), em::gelu_tanh(u16(b)), gelu_interval(u16(b)), "CPU gelu", cpu_wrong);
    check_activation(u16(b), bf16_at(r.ref, Z, zi, zj), em::sigmoid(u16(b)), sigmoid_interval(u16(b)), "CPU sigmoid",
                     cpu_wrong);
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(cpu_wrong, 0);
  std::int64_t differ = 0;
  for (std::int64_t i = 0; i < R; ++i)
    for (std::int64_t h = 0; h < H; ++h) {
      const float g = em::gate_factor(bf16_at(r.dut, Z, i, h));
      for (std::int64_t c = 0; c < Dh; ++c) {
        const u16 expected = em::gate_apply(a.data[std::size_t(i * H * Dh + h * Dh + c)].bits, g);
        differ += !same_value(bf16_at(r.dut, A, i, h * Dh + c), expected);
      }
    }
  EXPECT_EQ(differ, 0) << "gate multiply not bitwise given the backend's own sigmoid values";
}

// Σ_k x[i,k]·w[j,k] and Σ_k |x[i,k]·w[j,k]| in float64 (exact for these data).
std::pair<double, double> exact_dot(const Bf16Tensor& x, const Bf16Tensor& w, std::int64_t i, std::int64_t j) {
  const std::int64_t K = x.dim(1);
  double e = 0, mag = 0;
  for (std::int64_t kk = 0; kk < K; ++kk) {
    const double t = double(x.data[i * K + kk].to_float()) * double(w.data[j * K + kk].to_float());
    e += t;
    mag += std::abs(t);
  }
  return {e, mag};
}

// y = x·wᵀ (+ b): cuBLASLt sums in its own order (tiles, FMA, maybe split-K), so the device's
// float32 value before the BF16 write is only known to lie within
//   δ = (K + 2)·u·(Σ_k |x_k·w_k| + |b|)  (+ 2^-8·Σ_k |x_k·w_k| when a BF16 split-K reduction ran)
// of the exact value E (float64, exact for these data): the standard bound for a float32 sum of K
// products in any order, with or without FMA, plus the bias addition. Each BF16 output must be a
// rounding of some value in [E − δ, E + δ]; so must the CPU's (checked too).
Sharpness check_product(const Result& r, const MatRef& Y, const Bf16Tensor& x, const Bf16Tensor& w, const Bf16Tensor* b,
                        bool bf16_split_k) {
  Sharpness sharp;
  const std::int64_t M = x.dim(0), K = x.dim(1), N = w.dim(0);
  std::vector<double> exact(std::size_t(M * N));
  std::int64_t outside = 0, cpu_outside = 0;
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) {
      const auto [e, mag] = exact_dot(x, w, i, j);
      const double bias = b ? double(b->data[j].to_float()) : 0.0;
      const double delta =
          (double(K + 2) * kU * (mag + std::abs(bias)) + (bf16_split_k ? 0x1p-8 * mag : 0.0)) * kSecondOrder;
      exact[std::size_t(i * N + j)] = e + bias;
      const Interval iv = bf16_interval(e + bias - delta, e + bias + delta);
      sharp.add(iv);
      if (!inside(bf16_at(r.dut, Y, i, j), iv) && outside++ < 5)
        ADD_FAILURE() << Y.region.name << " (" << i << ", " << j << "): " << Bf16::from_bits(bf16_at(r.dut, Y, i, j)).to_float()
                      << " not a rounding of " << e + bias << " +- " << delta;
      cpu_outside += !inside(bf16_at(r.ref, Y, i, j), iv);
    }
  EXPECT_EQ(outside, 0) << Y.region.name;
  EXPECT_EQ(cpu_outside, 0) << Y.region.name << ": the bound excludes the CPU's own result";
  expect_rel_l2_like_cpu(r, Y, exact);
  return sharp;
}

// Whether the products may have reduced split-K partials in BF16 (an algorithm with splitK > 1
// and an in-place or output-type reduction); the CPU never does.
bool bf16_split_k(Rig& dut) {
#ifdef PSI_HAVE_CUDA
  if (dut.backend().name() != "cuda") return false;
  for (const rt::CudaGemmAlgo& a : rt::cuda_backend_report(dut.backend()).gemm.algorithms)
    if (a.splitk > 1 && (a.reduction_scheme == 1 || a.reduction_scheme == 4)) return true;
#else
  (void)dut;
#endif
  return false;
}

void linear_case(Rig& ref, Rig& dut) {
  Source src(0x0c0d'a007);
  const std::int64_t M = 37, K = 2304, N = 96, wide = 160, c0 = 32;
  Image img;
  const Bf16Tensor x = src.tensor({M, K}, 4, 2), w = src.tensor({N, K}, 8, 1), b = src.tensor({1, N}, 3, 2);
  const Bf16Tensor x1 = src.tensor({1, K}, 4, 2);
  // Positive data: no cancellation, so the bound is sharp (random signs make it loose where the
  // sum cancels: δ scales with Σ|x·w|, not with the result).
  const Bf16Tensor xp = src.tensor({M, K}, 4, 2, true), wp = src.tensor({N, K}, 8, 1, true);
  const MatRef XP = MatRef::dense(img.put(xp, "x positive"), M, K), WP = MatRef::dense(img.put(wp, "w positive"), N, K);
  const MatRef YP = MatRef::dense(img.poisoned(std::uint64_t(M * N), false, "y positive"), M, N);
  const MatRef X = MatRef::dense(img.put(x, "x"), M, K), W = MatRef::dense(img.put(w, "w"), N, K);
  const MatRef B = MatRef::dense(img.put(b, "b"), 1, N), X1 = MatRef::dense(img.put(x1, "x one row"), 1, K);
  const MatRef YF = MatRef::dense(img.poisoned(std::uint64_t(M * wide), false, "y fused"), M, wide).block(0, M, c0, N);
  const MatRef YA = MatRef::dense(img.poisoned(std::uint64_t(M * N), false, "y after_bf16"), M, N);
  const MatRef YN = MatRef::dense(img.poisoned(std::uint64_t(M * N), false, "y no bias"), M, N);
  const MatRef Y1 = MatRef::dense(img.poisoned(std::uint64_t(N), false, "y one row"), 1, N);
  const Result r = run_both(ref, dut, img,
                            {{YF, false, true}, {YA, false, true}, {YN, false, true}, {Y1, false, true}, {YP, false, true}},
                            [=](const KernelContext& k) {
                              k.ops->linear(k, XP, WP, nullptr, psi::BiasRule::fused_f32, YP, ops::Product::psi_f32);
                              k.ops->linear(k, X, W, &B, psi::BiasRule::fused_f32, YF, ops::Product::psi_f32);
                              k.ops->linear(k, X, W, &B, psi::BiasRule::after_bf16, YA, ops::Product::psi_f32);
                              k.ops->linear(k, X, W, nullptr, psi::BiasRule::fused_f32, YN, ops::Product::psi_f32);
                              k.ops->linear(k, X1, W, &B, psi::BiasRule::fused_f32, Y1, ops::Product::psi_f32);
                            });
  const bool split = bf16_split_k(dut);
  if (!split) check_product(r, YP, xp, wp, nullptr, split).expect_sharp("positive product");
  check_product(r, YF, x, w, &b, split);
  check_product(r, YN, x, w, nullptr, split);
  check_product(r, Y1, x1, w, &b, split);
  // after_bf16: bf(bf(acc) + b); the first rounding is the product's, bounded as above; the
  // bias kernel is exact given it. So each output is bf(p + b) for p a BF16 in the product's
  // interval: the interval of the bias-free product, shifted and rounded again.
  std::int64_t outside = 0;
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) {
      const auto [e, mag] = exact_dot(x, w, i, j);
      const double delta = (double(K + 2) * kU * mag + (split ? 0x1p-8 * mag : 0.0)) * kSecondOrder;
      const Interval pi = bf16_interval(e - delta, e + delta);
      const float bias = b.data[j].to_float();
      // Every BF16 product p in the interval, shifted by the bias and rounded: the allowed set.
      Interval out{std::numeric_limits<std::int32_t>::max(), std::numeric_limits<std::int32_t>::min()};
      for (std::int32_t o = pi.lo; o <= pi.hi; ++o) {
        const Bf16 pv = Bf16::from_bits(u16(o < 0 ? (0x8000 | -o) : o));
        const std::int32_t q = bf16_ordinal(bf16_rne(pv.to_float() + bias));
        out.lo = std::min(out.lo, q);
        out.hi = std::max(out.hi, q);
      }
      if (!inside(bf16_at(r.dut, YA, i, j), out) && outside++ < 5)
        ADD_FAILURE() << "y after_bf16 (" << i << ", " << j << ") outside its interval";
      EXPECT_TRUE(inside(bf16_at(r.ref, YA, i, j), out)) << "the bound excludes the CPU's after_bf16 result";
    }
  EXPECT_EQ(outside, 0);
}

// acc (float32) += a·wᵀ into a column block of a wider accumulator: each element within
// (K + 2)·u·(|acc₀| + Σ|a·w|) of the exact sum (float32 output: no BF16 write, no BF16 split-K).
void accumulate_case(Rig& ref, Rig& dut) {
  Source src(0x0c0d'a008);
  const std::int64_t M = 29, K = 1536, N = 80, wide = 120, c0 = 24;
  Image img;
  const Bf16Tensor a = src.tensor({M, K}, 4, 2), w = src.tensor({N, K}, 8, 1);
  const std::vector<float> acc0 = src.f32(std::size_t(M * wide), -2.0f, 2.0f);
  const MatRef A = MatRef::dense(img.put(a, "a"), M, K), W = MatRef::dense(img.put(w, "w"), N, K);
  const MatRef C = MatRef::dense(img.put(acc0, "acc"), M, wide).block(0, M, c0, N);
  const Result r = run_both(ref, dut, img, {{C, true, false}}, [=](const KernelContext& k) { k.ops->gemm_accumulate(k, A, W, C, ops::Product::psi_f32); });
  std::int64_t outside = 0;
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) {
      const double start = acc0[std::size_t(i * wide + c0 + j)];
      double e = start, mag = std::abs(start);
      for (std::int64_t kk = 0; kk < K; ++kk) {
        const double t = double(a.data[i * K + kk].to_float()) * double(w.data[j * K + kk].to_float());
        e += t;
        mag += std::abs(t);
      }
      const double delta = double(K + 2) * kU * mag * kSecondOrder;
      if (std::abs(double(f32_at(r.dut, C, i, j)) - e) > delta && outside++ < 5)
        ADD_FAILURE() << "acc (" << i << ", " << j << "): " << f32_at(r.dut, C, i, j) << " vs exact " << e << " +- " << delta;
      EXPECT_LE(std::abs(double(f32_at(r.ref, C, i, j)) - e), delta) << "the bound excludes the CPU's result";
    }
  EXPECT_EQ(outside, 0);
}

// ---- attention ------------------------------------------------------------------------------------

struct AttnData {
  std::int64_t Nq, Nk, H, d;
  Bf16Tensor q, k, v;
};

// Small enough scores (|s| < 4) that every exp(s − max) is a normal float32. Values of random
// sign, or positive (then no output cancels and the bounds below are sharp).
AttnData attn_data(std::uint64_t seed, std::int64_t Nq, std::int64_t Nk, std::int64_t H, std::int64_t d,
                   bool positive_v) {
  Source src(seed);
  return {Nq, Nk, H, d, src.tensor({Nq, H * d}, 3, 1), src.tensor({Nk, H * d}, 3, 1),
          src.tensor({Nk, H * d}, 6, 3, positive_v)};
}

// The exact MATH result (float64 from the BF16 inputs and the float32 factor).
std::vector<double> exact_attention(const AttnData& a) {
  const std::int64_t W = a.H * a.d;
  const double c = official::sdpa_qk_factor(a.d);
  std::vector<double> out(std::size_t(a.Nq * W)), s(a.Nk);
  for (std::int64_t i = 0; i < a.Nq; ++i)
    for (std::int64_t h = 0; h < a.H; ++h) {
      double mx = -1e300;
      for (std::int64_t j = 0; j < a.Nk; ++j) {
        double dot = 0;
        for (std::int64_t e = 0; e < a.d; ++e)
          dot += double(a.q.data[i * W + h * a.d + e].to_float()) * double(a.k.data[j * W + h * a.d + e].to_float());
        s[j] = dot * c * c;
        mx = std::max(mx, s[j]);
      }
      double l = 0;
      for (auto& v : s) l += (v = std::exp(v - mx));
      for (std::int64_t e = 0; e < a.d; ++e) {
        double o = 0;
        for (std::int64_t j = 0; j < a.Nk; ++j) o += s[j] * a.v.data[j * W + h * a.d + e].to_float();
        out[std::size_t(i * W + h * a.d + e)] = o / l;
      }
    }
  return out;
}

// MATH: the device's probabilities differ from the CPU's only through expf (scores, maximum and
// summation order are the same): relative kExpDiff per exp(s − m), hence
//   |P_dev − P_cpu| ≤ (2·kExpDiff + (2·Nk + 2)·u)·P   (the sum l and two divisions)
//   |O_dev − O_cpu| ≤ Σ_j |ΔP_j|·|v_jc| + 2·Nk·u·A_c ≤ (2·kExpDiff + (4·Nk + 2)·u)·A_c,
// A_c = Σ_j P_j·|v_jc|; O_cpu (float32, before the write) comes from the host replay, which
// equals ops::sdpa bit for bit (test_cuda_element_math).
void math_case(Rig& ref, Rig& dut, bool positive_v) {
  const AttnData a = attn_data(0x0c0d'a009, 6, 1300, 2, 32, positive_v);
  const std::int64_t W = a.H * a.d;
  Image img;
  const MatRef Q = MatRef::dense(img.put(a.q, "q"), a.Nq, W), K = MatRef::dense(img.put(a.k, "k"), a.Nk, W);
  const MatRef V = MatRef::dense(img.put(a.v, "v"), a.Nk, W);
  const MatRef O = MatRef::dense(img.poisoned(std::uint64_t(a.Nq * W), false, "math out"), a.Nq, W);
  const Result r = run_both(ref, dut, img, {{O, false, true}}, [=](const KernelContext& k) {
    k.ops->sdpa(k, Q, K, V, a.H, ops::SdpaOptions{}, O);
  });
  const test::MathReplay rep = test::math_replay(a.q, a.k, a.v, a.H, official::sdpa_qk_factor(a.d));
  ASSERT_GT(rep.min_p, 1e-30) << "probabilities must be normal floats for the exp bound";
  std::int64_t outside = 0;
  Sharpness sharp;
  for (std::int64_t i = 0; i < a.Nq; ++i)
    for (std::int64_t c = 0; c < W; ++c) {
      const std::size_t at = std::size_t(i * W + c);
      ASSERT_EQ(em::round_bf16(rep.o[at]), bf16_at(r.ref, O, i, c)) << "the replay is not the CPU's MATH";
      const double delta = (2 * kExpDiff + double(4 * a.Nk + 2) * kU) * rep.a[at] * kSecondOrder;
      const Interval iv = bf16_interval(rep.o[at] - delta, rep.o[at] + delta);
      sharp.add(iv);
      if (!inside(bf16_at(r.dut, O, i, c), iv) && outside++ < 5)
        ADD_FAILURE() << "math out (" << i << ", " << c << ") outside " << rep.o[at] << " +- " << delta;
    }
  EXPECT_EQ(outside, 0);
  if (positive_v) sharp.expect_sharp("math, positive values");
  expect_rel_l2_like_cpu(r, O, exact_attention(a));
}

// The online form's state after the key blocks, on the CPU (ops), for the bounds below.
struct OnlineCpu {
  std::vector<float> m, l, o;
};
OnlineCpu online_cpu(const AttnData& a, const ops::SdpaOptions& opt, const std::vector<std::int64_t>& blocks) {
  const std::int64_t W = a.H * a.d;
  OnlineCpu s{std::vector<float>(std::size_t(a.Nq * a.H)), std::vector<float>(std::size_t(a.Nq * a.H)),
              std::vector<float>(std::size_t(a.Nq * W))};
  const ops::OnlineState st{{s.m.data(), a.Nq, a.H, a.H}, {s.l.data(), a.Nq, a.H, a.H}, {s.o.data(), a.Nq, W, W}};
  ops::sdpa_online_begin(st);
  std::int64_t j0 = 0;
  for (const std::int64_t n : blocks) {
    ops::sdpa_online_update(psi::as_matrix(a.q), psi::CBf16Mat{a.k.ptr() + j0 * W, n, W, W},
                            psi::CBf16Mat{a.v.ptr() + j0 * W, n, W, W}, a.H, opt, st);
    j0 += n;
  }
  return s;
}

// Online bounds. The running maximum is the same on both sides (scores and the max fold do not
// involve exp): bitwise. Every probability p_j = exp(s_j − m_t) (m_t: the maximum after j's tile)
// and every rescaling factor α goes through exp, so with T tiles visited, relative to the CPU's,
//   γ = (T + 1)·kExpDiff + 2·(Nk + T + 2)·u
//   |l_dev − l_cpu| ≤ γ·l_cpu
//   |o_dev − o_cpu| ≤ γ·A_c + Σ_{j flippable} ulp(bf(p_j))·|v_jc|·exp(m_t − m),
// A_c = Σ_j exp(s_j − m)·|v_jc| with m the final maximum. With p_bf16 a weight bf(p_j) equals
// the CPU's unless p_j lies within kExpDiff of a BF16 rounding boundary ("flippable"); then it
// may be the neighbouring BF16 value. p_j, m_t and the tiles are the CPU's (the host replay of
// test_cuda_element_math reproduces them bit for bit).
struct OnlineBound {
  double gamma;
  std::vector<double> a, flips;  // A_c and the flippable weights' share, per (row, channel)
  std::int64_t flippable = 0;
};
OnlineBound online_bound(const AttnData& a, const ops::SdpaOptions& opt) {
  const std::int64_t W = a.H * a.d, tiles = (a.Nk + opt.key_tile - 1) / opt.key_tile;
  OnlineBound b{double(tiles + 1) * kExpDiff + 2.0 * double(a.Nk + tiles + 2) * kU,
                std::vector<double>(std::size_t(a.Nq * W)), std::vector<double>(std::size_t(a.Nq * W))};
  const float factor = official::sdpa_qk_factor(a.d);
  const auto* kb = reinterpret_cast<const u16*>(a.k.ptr());
  std::vector<float> qs(a.d), s(a.Nk), mt(a.Nk);
  for (std::int64_t i = 0; i < a.Nq; ++i)
    for (std::int64_t h = 0; h < a.H; ++h) {
      for (std::int64_t c = 0; c < a.d; ++c) qs[c] = em::mul(a.q.data[i * W + h * a.d + c].to_float(), factor);
      float m = -std::numeric_limits<float>::infinity();
      for (std::int64_t j0 = 0; j0 < a.Nk; j0 += opt.key_tile) {
        const std::int64_t j1 = std::min(a.Nk, j0 + opt.key_tile);
        for (std::int64_t j = j0; j < j1; ++j) {
          s[j] = em::score(qs.data(), kb + j * W + h * a.d, factor, a.d);
          m = em::fold_max(m, s[j]);
        }
        for (std::int64_t j = j0; j < j1; ++j) mt[j] = m;
      }
      for (std::int64_t j = 0; j < a.Nk; ++j) {
        const double p_final = std::exp(double(s[j]) - double(m));
        const float p = em::exp_f32(em::sub(s[j], mt[j]));
        const bool flip = opt.p_bf16 && bf16_rne(float(p * (1 - kExpDiff))) != bf16_rne(float(p * (1 + kExpDiff)));
        b.flippable += flip;
        const double share = flip ? double(bf16_ulp(bf16_rne(float(p * (1 + kExpDiff))))) *
                                        std::exp(double(mt[j]) - double(m))
                                  : 0.0;
        for (std::int64_t c = 0; c < a.d; ++c) {
          const double v = std::abs(double(a.v.data[j * W + h * a.d + c].to_float()));
          b.a[std::size_t(i * W + h * a.d + c)] += p_final * v;
          b.flips[std::size_t(i * W + h * a.d + c)] += share * v;
        }
      }
    }
  return b;
}

// `blocks`: the key blocks of the successive sdpa_online_update calls (all but the last a
// multiple of key_tile, so that they visit the same tiles as one call).
void online_case(Rig& ref, Rig& dut, std::int64_t key_tile, bool p_bf16, const std::vector<std::int64_t>& blocks,
                 bool positive_v) {
  const AttnData a = attn_data(0x0c0d'a00a + std::uint64_t(key_tile), 5, 1100, 2, 32, positive_v);
  const std::int64_t W = a.H * a.d;
  ops::SdpaOptions opt;
  opt.form = ops::SoftmaxForm::online;
  opt.key_tile = key_tile;
  opt.p_bf16 = p_bf16;
  Image img;
  const MatRef Q = MatRef::dense(img.put(a.q, "q"), a.Nq, W), K = MatRef::dense(img.put(a.k, "k"), a.Nk, W);
  const MatRef V = MatRef::dense(img.put(a.v, "v"), a.Nk, W);
  const rt::OnlineRef S{MatRef::dense(img.poisoned(std::uint64_t(a.Nq * a.H), true, "m"), a.Nq, a.H),
                        MatRef::dense(img.poisoned(std::uint64_t(a.Nq * a.H), true, "l"), a.Nq, a.H),
                        MatRef::dense(img.poisoned(std::uint64_t(a.Nq * W), true, "o"), a.Nq, W)};
  const MatRef O = MatRef::dense(img.poisoned(std::uint64_t(a.Nq * W), false, "online sdpa out"), a.Nq, W);
  const Result r = run_both(ref, dut, img, {{S.m, true, true}, {S.l, true, true}, {S.o, true, true}, {O, false, true}},
                            [=](const KernelContext& k) {
                              k.ops->sdpa_online_begin(k, S);
                              std::int64_t j0 = 0;
                              for (const std::int64_t n : blocks) {
                                k.ops->sdpa_online_update(k, Q, K.block(j0, n, 0, W), V.block(j0, n, 0, W), a.H, opt, S);
                                j0 += n;
                              }
                              k.ops->sdpa(k, Q, K, V, a.H, opt, O);
                            });
  expect_bitwise(r, S.m, true);
  const OnlineCpu cpu = online_cpu(a, opt, blocks);
  const OnlineBound b = online_bound(a, opt);
  std::int64_t outside = 0;
  Sharpness sharp;
  for (std::int64_t i = 0; i < a.Nq; ++i)
    for (std::int64_t h = 0; h < a.H; ++h) {
      const float lc = cpu.l[i * a.H + h];
      ASSERT_EQ(std::bit_cast<std::uint32_t>(lc), std::bit_cast<std::uint32_t>(f32_at(r.ref, S.l, i, h)));
      const double dl = b.gamma * lc * kSecondOrder;
      EXPECT_LE(std::abs(double(f32_at(r.dut, S.l, i, h)) - lc), dl) << "l (" << i << ", " << h << ")";
      for (std::int64_t c = h * a.d; c < (h + 1) * a.d; ++c) {
        const double oc = cpu.o[i * W + c];
        const double doc = (b.gamma * b.a[std::size_t(i * W + c)] + b.flips[std::size_t(i * W + c)]) * kSecondOrder;
        if (std::abs(double(f32_at(r.dut, S.o, i, c)) - oc) > doc && outside++ < 5)
          ADD_FAILURE() << "o (" << i << ", " << c << "): " << f32_at(r.dut, S.o, i, c) << " vs " << oc << " +- " << doc;
        // The one-call form (ops::sdpa online) writes bf(o / l): a rounding of a value within
        // (|Δo| + |o/l|·|Δl|) / (l − |Δl|) + 2u·|o/l| of o_cpu / l_cpu.
        const double ratio = oc / lc;
        const double dr = (doc + std::abs(ratio) * dl) / (lc - dl) + 2 * kU * std::abs(ratio);
        const Interval iv = bf16_interval(ratio - dr, ratio + dr);
        sharp.add(iv);
        if (!inside(bf16_at(r.dut, O, i, c), iv) && outside++ < 5)
          ADD_FAILURE() << "online sdpa out (" << i << ", " << c << ") outside " << ratio << " +- " << dr;
        EXPECT_TRUE(inside(bf16_at(r.ref, O, i, c), iv));
      }
    }
  EXPECT_EQ(outside, 0);
  ::testing::Test::RecordProperty("flippable weights", std::to_string(b.flippable));
  if (positive_v) sharp.expect_sharp("online, positive values");
  expect_rel_l2_like_cpu(r, O, exact_attention(a));
}

// sdpa_online_end on the same state on both sides: bf(o / l) with IEEE division, bitwise; a head
// whose l is 0 (nothing attended) writes zeros.
void online_end_case(Rig& ref, Rig& dut) {
  Source src(0x0c0d'a00b);
  const std::int64_t R = 7, H = 3, d = 16, W = H * d;
  Image img;
  std::vector<float> l = src.f32(std::size_t(R * H), 0.5f, 40.0f);
  l[4] = 0.0f;
  const std::vector<float> m = src.f32(std::size_t(R * H), -3.0f, 3.0f), o = src.f32(std::size_t(R * W), -50.0f, 50.0f);
  const rt::OnlineRef S{MatRef::dense(img.put(m, "m"), R, H), MatRef::dense(img.put(l, "l"), R, H),
                        MatRef::dense(img.put(o, "o"), R, W)};
  const MatRef O = MatRef::dense(img.poisoned(std::uint64_t(R * W), false, "out"), R, W);
  const Result r = run_both(ref, dut, img, {{O, false, true}}, [=](const KernelContext& k) { k.ops->sdpa_online_end(k, S, O); });
  expect_bitwise(r, O, false);
}

// One case per operator (or operator variant), named for --gtest_filter: '*rms_norm*' runs the
// rms_norm case on the device and on the CPU harness.
struct OpCase {
  const char* name;
  Case run;
  bool products = false;  // runs cuBLASLt products (linear, gemm_accumulate)
};

const std::vector<OpCase>& cases() {
  static const std::vector<OpCase> all = {
      {"elementwise", elementwise_case},  // ada_value, modulate, residuals, zero_f32, copy
      {"modulate_in_place", modulate_in_place_case},  // and gated_residual with a broadcast gate
      {"rms_norm", rms_norm_case},
      {"rope", rope_case},
      {"finish_linear", finish_linear_case},
      {"gelu_tanh_and_attention_gate", activation_case},
      {"linear", linear_case, true},
      {"gemm_accumulate", accumulate_case, true},
      {"sdpa_math", [](Rig& a, Rig& b) { math_case(a, b, false); }},
      {"sdpa_math_positive_values", [](Rig& a, Rig& b) { math_case(a, b, true); }},
      {"sdpa_online_key_tile_128_two_blocks_p_bf16",
       [](Rig& a, Rig& b) { online_case(a, b, 128, true, {640, 460}, false); }},
      {"sdpa_online_key_tile_128_p_bf16_positive_values",
       [](Rig& a, Rig& b) { online_case(a, b, 128, true, {1100}, true); }},
      // key tile 1500: over 1,024 keys
      {"sdpa_online_key_tile_1500_f32_p", [](Rig& a, Rig& b) { online_case(a, b, 1500, false, {1100}, false); }},
      {"sdpa_online_key_tile_1500_f32_p_positive_values",
       [](Rig& a, Rig& b) { online_case(a, b, 1500, false, {1100}, true); }},
      {"sdpa_online_end", online_end_case},
  };
  return all;
}

std::string case_name(const ::testing::TestParamInfo<OpCase>& info) { return info.param.name; }
void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name; }

// ---- the tests -------------------------------------------------------------------------------------

class CudaKernelOp : public ::testing::TestWithParam<OpCase> {};

TEST_P(CudaKernelOp, MatchesTheCpuBackend) {
  std::string why;
  auto b = cuda_backend(&why);
  if (!b) GTEST_SKIP() << "no CUDA device: " << why;
  Rig ref(rt::make_cpu_backend()), dut(std::move(b));
  GetParam().run(ref, dut);
#ifdef PSI_HAVE_CUDA
  const rt::CudaBackendReport rep = rt::cuda_backend_report(dut.backend());
  std::cout << rep.describe();
  EXPECT_EQ(dut.backend().device_allocations(), 1u);
  EXPECT_EQ(rep.arena_bytes, kArena);
  EXPECT_EQ(rep.blas_workspace_bytes, std::size_t(32) << 20);
  EXPECT_GE(rep.device_allocation_bytes, rep.arena_bytes + rep.blas_workspace_bytes);
  if (GetParam().products) {
    EXPECT_FALSE(rep.gemm.algorithms.empty());
  }
  for (const rt::CudaGemmAlgo& a : rep.gemm.algorithms) {
    if (a.algo_id >= 0) {
      EXPECT_GT(a.calls, 0u) << a.problem;
    }
  }
#endif
}

INSTANTIATE_TEST_SUITE_P(Ops, CudaKernelOp, ::testing::ValuesIn(cases()), case_name);

TEST(CudaKernels, MaskAndOutOfRegionOperandsAreErrors) {
  std::string why;
  auto b = cuda_backend(&why);
  if (!b) GTEST_SKIP() << "no CUDA device: " << why;
  Rig dut(std::move(b));
  const DeviceRegion r{0, 4096, "small"};
  const MatRef q = MatRef::dense(r, 2, 16);
  const rt::OnlineRef s{MatRef::dense({4096, 1024, "m"}, 2, 2), MatRef::dense({5120, 1024, "l"}, 2, 2),
                        MatRef::dense({6144, 1024, "o"}, 2, 16)};
  const float mask[4] = {};
  ops::SdpaOptions opt;
  opt.form = ops::SoftmaxForm::online;
  opt.mask = mask;
  EXPECT_THROW(dut.run([=](const KernelContext& k) { k.ops->sdpa_online_update(k, q, q, q, 2, opt, s); }), Error);
  EXPECT_THROW(dut.run([=](const KernelContext& k) { k.ops->residual(k, MatRef::dense(r, 64, 64), MatRef::dense(r, 64, 64)); }),
               Error);
  EXPECT_THROW(dut.run([=](const KernelContext& k) {
                 k.ops->zero_f32(k, MatRef::dense({kArena - 256, 1024, "past the arena"}, 1, 64));
               }),
               Error);
}

// The harness and the bounds with a CPU backend as the backend under test: every case must pass
// (bitwise trivially; every interval must hold the CPU's own result).
class CudaKernelOpOnCpu : public ::testing::TestWithParam<OpCase> {};

TEST_P(CudaKernelOpOnCpu, PassesWithTheCpuBackendUnderTest) {
  Rig ref(rt::make_cpu_backend()), dut(rt::make_cpu_backend());
  GetParam().run(ref, dut);
}

INSTANTIATE_TEST_SUITE_P(Ops, CudaKernelOpOnCpu, ::testing::ValuesIn(cases()), case_name);

// The harness notices a kernel that writes a wrong value, skips an element or writes outside its
// output: run with a deliberately wrong "backend under test" kernel.
TEST(CudaKernelsHarness, DetectsWrongValuesUnwrittenElementsAndStrayWrites) {
  Rig ref(rt::make_cpu_backend()), dut(rt::make_cpu_backend());
  Source src(0x0c0d'a00c);
  const std::int64_t N = 4, D = 8;
  Image img;
  const MatRef X = MatRef::dense(img.put(src.tensor({N, D}), "x"), N, D);
  const MatRef Y = MatRef::dense(img.poisoned(std::uint64_t(N * D), false, "y"), N, D);
  const DeviceRegion other = img.region(64, "other");
  bool first = true;
  // The reference runs first: copy x to y; the second run (under test) misses one element,
  // alters another and writes into `other`.
  const rt::Kernel k = [&](const KernelContext& ctx) {
    auto* y = reinterpret_cast<u16*>(ctx.arena_base + Y.region.offset);
    const auto* x = reinterpret_cast<const u16*>(ctx.arena_base + X.region.offset);
    for (std::int64_t i = 0; i < N * D; ++i) y[i] = x[i];
    if (!first) {
      y[3] = kPoisonBf16;
      y[5] ^= 1;
      ctx.arena_base[other.offset] = std::byte{1};
    }
    first = false;
  };
  ::testing::TestPartResultArray failures;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD,
                                                         &failures);
    const Result r = run_both(ref, dut, img, {{Y, false, true}}, k);
    expect_bitwise(r, Y, false);
  }
  std::string all;
  for (int i = 0; i < failures.size(); ++i) all += std::string(failures.GetTestPartResult(i).message()) + "\n";
  EXPECT_NE(all.find("element (0, 3) was not written"), std::string::npos) << all;
  EXPECT_NE(all.find("outside the outputs changed"), std::string::npos) << all;
  EXPECT_NE(all.find("not bitwise equal"), std::string::npos) << all;
}

}  // namespace
}  // namespace psi
