// The vector level psi's kernels run at (engine/cpu_features.h, engine/isa_dispatch.h): the CPU's
// level read independently from CPUID, every dispatched kernel running the level in force, the
// same bits at every level this CPU has, PSI_ISA refused where it names no level or one above
// the CPU's, and `psi --version` naming the level.
#include <gtest/gtest.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <unistd.h>

#include <bit>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/cpu_features.h"
#include "engine/error.h"
#include "engine/isa_dispatch.h"
#include "engine/official/nv_expf.h"
#include "engine/ops/attention.h"
#include "engine/ops/gemm.h"
#include "engine/parallel.h"
#include "engine/synthinit.h"
#include "hdf5/h5.h"
#include "oracle/float64_filter.h"
#include "tests/psi_command.h"

namespace ops = psi::ops;
using psi::Isa;

namespace {

// The level from CPUID and XGETBV directly, not through __builtin_cpu_supports.
Isa level_from_cpuid() {
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return Isa::portable;
  const bool fma = c >> 12 & 1, osxsave = c >> 27 & 1, avx = c >> 28 & 1;
  if (!osxsave || !avx) return Isa::portable;
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  const bool ymm_saved = (xcr0_lo & 0x6) == 0x6, zmm_saved = (xcr0_lo & 0xe0) == 0xe0;
  if (!ymm_saved || __get_cpuid_max(0, nullptr) < 7) return Isa::portable;
  __cpuid_count(7, 0, a, b, c, d);
  const bool avx2 = b >> 5 & 1;
  const bool avx512 = (b >> 16 & 1) && (b >> 17 & 1) && (b >> 30 & 1) && (b >> 31 & 1);  // F, DQ, BW, VL
  if (!avx2 || !fma) return Isa::portable;
  return avx512 && zmm_saved ? Isa::avx512 : Isa::avx2;
#else
  return Isa::portable;
#endif
}

std::vector<Isa> levels_here() {
  std::vector<Isa> v;
  for (Isa isa : {Isa::portable, Isa::avx2, Isa::avx512})
    if (isa <= psi::cpu_isa()) v.push_back(isa);
  return v;
}

struct ThreadGuard {
  ~ThreadGuard() { psi::set_thread_count(0); }
};

template <class T>
std::vector<std::uint8_t> bytes_of(const std::vector<T>& v) {
  std::vector<std::uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// Each kernel run through isa_dispatch, by the public call that reaches it, with its output's
// bytes. `dispatched_at(level)`: whether the call reaches a dispatched kernel at that level (the
// GEMM's AVX-512 level runs its own intrinsics kernel instead), else none may run.
struct KernelCall {
  std::string name;
  std::function<std::vector<std::uint8_t>()> run;
  std::function<bool(Isa)> dispatched_at = [](Isa) { return true; };
};

std::vector<KernelCall> kernel_calls() {
  using psi::Bf16Tensor;
  // Operands with every kind of value the kernels step through in lanes: ±0, subnormal-range
  // and large exponents, NaN and ±∞ for the exponential.
  std::vector<float> ex(333);
  for (std::size_t i = 0; i < ex.size(); ++i) ex[i] = float(int(i) - 200) * 0.731f;
  ex[3] = -0.0f;
  ex[4] = std::bit_cast<float>(0x7fc00001u);
  ex[5] = std::bit_cast<float>(0xff800000u);
  ex[6] = std::bit_cast<float>(0x00000003u);
  const Bf16Tensor x = psi::synthinit::make("input.test.x", {37, 700}, 21);
  const Bf16Tensor w = psi::synthinit::make("test.weight", {45, 700}, 21);
  const Bf16Tensor b = psi::synthinit::make("test.bias", {45}, 21);
  const Bf16Tensor q = psi::synthinit::make("input.test.q", {40, 2 * 64}, 22);
  const Bf16Tensor k = psi::synthinit::make("input.test.k", {56, 2 * 64}, 23);
  const Bf16Tensor v = psi::synthinit::make("input.test.v", {56, 2 * 64}, 24);
  const auto sdpa = [=](ops::SoftmaxForm form, ops::AttentionCore core) {
    return [=] {
      Bf16Tensor out({40, 2 * 64});
      ops::SdpaOptions opt;
      opt.form = form;
      opt.core = core;
      ops::sdpa(psi::as_matrix(q), psi::as_matrix(k), psi::as_matrix(v), 2, opt, psi::as_matrix(out));
      return bytes_of(out.data);
    };
  };
  return {
      {"nv_expf_lanes",
       [=] {
         std::vector<float> y(ex.size());
         psi::official::nv_expf_lanes(ex.data(), y.data(), std::int64_t(ex.size()));
         return bytes_of(y);
       }},
      {"ex2_approx_ftz_lanes",
       [=] {
         std::vector<float> y(ex.size());
         psi::official::ex2_approx_ftz_lanes(ex.data(), y.data(), std::int64_t(ex.size()));
         return bytes_of(y);
       }},
      {"gemm chunk_kernel (psi's order)",
       [=] {
         psi::F32Tensor y({37, 45});
         ops::linear_f32(psi::as_matrix(x), psi::as_matrix(w), b.ptr(), psi::as_matrix(y));
         return bytes_of(y.data);
       },
       [](Isa isa) { return isa < Isa::avx512; }},
      {"attention dot_ordered and axpy (psi's online form)",
       sdpa(ops::SoftmaxForm::online, ops::AttentionCore::psi_f32)},
      {"attention gemm chunk_kernel (psi's MATH)", sdpa(ops::SoftmaxForm::math, ops::AttentionCore::psi_f32),
       [](Isa isa) { return isa < Isa::avx512; }},
      {"attention fma_step, fma_tile and nv_expf_lanes (SDPA MATH)",
       sdpa(ops::SoftmaxForm::math, ops::AttentionCore::h200_math)},
      {"attention ex2_approx_ftz_lanes (SDPA FLASH)", sdpa(ops::SoftmaxForm::math, ops::AttentionCore::h200_flash)},
      // Not dispatched: the lane kernels choose by have_avx512 and have_avx2, which follow the level.
      {"tensor-core lane kernels (official-h200 linear)",
       [=] { return bytes_of(ops::linear(x, w, &b, psi::BiasRule::fused_f32, ops::Product::h200_tensor_core).data); },
       [](Isa) { return false; }},
      {"oracle float64 GEMM (float64 filter)",
       [=] {
         const auto c = psi::oracle::certified_linear(x.span(), w.span(), b.span(), 700, 0, 37, 1);
         return bytes_of(c.correct.data);
       }},
  };
}

}  // namespace

TEST(Isa, CpuLevelIsWhatCpuidSays) {
  EXPECT_EQ(psi::cpu_isa(), level_from_cpuid()) << "cpu_isa " << psi::isa_name(psi::cpu_isa()) << ", CPUID "
                                                << psi::isa_name(level_from_cpuid());
  EXPECT_LE(psi::active_isa(), psi::cpu_isa());
}

// Every dispatched kernel runs the wrapper of the level in force, and gives the same bytes at
// every level this CPU has.
TEST(Isa, EveryDispatchedKernelRunsTheLevelInForceWithTheSameBits) {
  ThreadGuard threads;
  psi::set_thread_count(1);  // the record is the calling thread's
  for (const KernelCall& call : kernel_calls()) {
    std::optional<std::vector<std::uint8_t>> first;
    for (Isa isa : levels_here()) {
      psi::ScopedIsa level(isa);
      psi::forget_dispatched_isa();
      const std::vector<std::uint8_t> out = call.run();
      if (call.dispatched_at(isa)) {
        ASSERT_TRUE(psi::last_dispatched_isa().has_value()) << call.name << " at " << psi::isa_name(isa);
        EXPECT_EQ(*psi::last_dispatched_isa(), isa) << call.name << " ran " << psi::isa_name(*psi::last_dispatched_isa())
                                                    << " with " << psi::isa_name(isa) << " in force";
      } else {
        EXPECT_FALSE(psi::last_dispatched_isa().has_value()) << call.name << " at " << psi::isa_name(isa);
      }
      if (!first) first = out;
      else EXPECT_TRUE(out == *first) << call.name << ": the bytes at " << psi::isa_name(isa) << " differ from portable's";
    }
  }
}

TEST(Isa, LevelsFollowTheSetting) {
  for (Isa isa : levels_here()) {
    psi::ScopedIsa level(isa);
    EXPECT_EQ(psi::active_isa(), isa);
    EXPECT_EQ(psi::have_avx2(), isa >= Isa::avx2);
    EXPECT_EQ(psi::have_avx512(), isa >= Isa::avx512);
  }
  if (psi::cpu_isa() < Isa::avx512) {
    EXPECT_THROW(psi::set_active_isa(Isa::avx512), psi::Error);
  }
}

TEST(Isa, PsiIsaIsCheckedAndNamedByVersion) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("psi_isa_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const char* outer = std::getenv("PSI_ISA");
  const std::optional<std::string> saved = outer ? std::optional<std::string>(outer) : std::nullopt;
  for (Isa isa : levels_here()) {
    ::setenv("PSI_ISA", psi::isa_name(isa), 1);
    const auto r = psi::testing::run_psi_in("--version", dir);
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find(std::string("\nvector level: ") + psi::isa_name(isa) + " (PSI_ISA; this CPU supports up to " +
                         psi::isa_name(psi::cpu_isa()) + ")"),
              std::string::npos)
        << r.out;
    const char* lanes = isa == Isa::avx512 ? "\ntensor-core product: avx512_fp (FP32 products), avx512 (integer products) "
                                             "where those are not all exact\n"
                        : isa == Isa::avx2 ? "\ntensor-core product: avx2_double (one double FMA a product)\n"
                                           : "\ntensor-core product: portable\n";
    EXPECT_NE(r.out.find(lanes), std::string::npos) << r.out;
  }
  ::unsetenv("PSI_ISA");
  const auto plain = psi::testing::run_psi_in("--version", dir);
  EXPECT_NE(plain.out.find(std::string("\nvector level: ") + psi::isa_name(psi::cpu_isa()) + " (this CPU's highest"),
            std::string::npos)
      << plain.out;
  // A level above the CPU's is refused before anything runs; so is a bad name, by --version too.
  if (psi::cpu_isa() < Isa::avx512) {
    ::setenv("PSI_ISA", "avx512", 1);
    const auto above = psi::testing::run_psi_in("list", dir);
    EXPECT_EQ(above.status, 2);
    EXPECT_EQ(above.err, std::string("psi: error: environment variable PSI_ISA='avx512' names a vector level this CPU "
                                     "lacks (it supports up to ") +
                             psi::isa_name(psi::cpu_isa()) + ")\n");
  }
  ::setenv("PSI_ISA", "avx3", 1);
  const auto bad = psi::testing::run_psi_in("--version", dir);
  EXPECT_EQ(bad.status, 2);
  EXPECT_EQ(bad.err, "psi: error: environment variable PSI_ISA='avx3' is not one of avx512, avx2, portable\n");
  if (saved) ::setenv("PSI_ISA", saved->c_str(), 1);
  else ::unsetenv("PSI_ISA");
  std::filesystem::remove_all(dir);
}

// A report names the level and the tensor-core lane kernels it ran at in its device record (the
// root attribute device_name), as psi --version names them: timings say which code gave them.
TEST(Isa, ReportsNameTheLevelAndTheKernelsTheyRanAt) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("psi_isa_report_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const char* outer = std::getenv("PSI_ISA");
  const std::optional<std::string> saved = outer ? std::optional<std::string>(outer) : std::nullopt;
  for (Isa isa : levels_here()) {
    ::setenv("PSI_ISA", psi::isa_name(isa), 1);
    const std::filesystem::path out = dir / (std::string("probe_") + psi::isa_name(isa) + ".h5");
    const auto r = psi::testing::run_psi_in("probe video-q-proj --variant dense --out " + out.string(), dir);
    ASSERT_EQ(r.status, 0) << r.err;
    const std::string device = psi::hdf5::File::open_read(out).attr_string("/", "device_name");
    const char* lanes = isa == Isa::avx512 ? "avx512_fp (FP32 products), avx512 (integer products) where those are "
                                             "not all exact"
                        : isa == Isa::avx2 ? "avx2_double (one double FMA a product)"
                                           : "portable";
    const std::string kernels =
        std::string(" (vector level ") + psi::isa_name(isa) + "; tensor-core product " + lanes + ")";
    EXPECT_TRUE(device.starts_with("CPU") && device.ends_with(kernels)) << device;
  }
  if (saved) ::setenv("PSI_ISA", saved->c_str(), 1);
  else ::unsetenv("PSI_ISA");
  std::filesystem::remove_all(dir);
}
