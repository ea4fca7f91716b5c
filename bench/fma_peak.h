#pragma once
// This CPU's float32 FMA peak on psi's threads: the yardstick the products' speed is measured
// against (docs/official-speed.md, "The machine's limit"). Each thread runs a register-resident
// loop of independent FMA chains in the widest vector ISA the CPU has, with more chains than an
// FMA's latency times the FMA units' throughput needs (16 for AVX-512's 32 registers, 12 for
// AVX2's 16), so nothing but the FMA units bounds it. One FMA counts two FLOP.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "engine/cpu_features.h"
#include "engine/parallel.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace psi::bench {

// Iterations of one thread's loop per measurement: about 10-40 ms on a core of today's machines.
inline constexpr std::int64_t kPeakIterations = std::int64_t(1) << 22;

#if defined(__x86_64__)
inline constexpr int kChainsAvx512 = 16, kChainsAvx2 = 12;

// acc <- acc*m + c with m = 1 - 2^-20 and c = 2^-20: every chain stays near 1, never subnormal.
// The lanes' sum keeps the chains live.
__attribute__((target("avx512f"))) inline float fma_loop_avx512(std::int64_t iterations) {
  const __m512 m = _mm512_set1_ps(1.0f - 0x1p-20f), c = _mm512_set1_ps(0x1p-20f);
  __m512 acc[kChainsAvx512];
#pragma GCC unroll 16
  for (int i = 0; i < kChainsAvx512; ++i) acc[i] = _mm512_set1_ps(0.5f + 0x1p-10f * float(i));
  for (std::int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < kChainsAvx512; ++i) acc[i] = _mm512_fmadd_ps(acc[i], m, c);
  }
  __m512 sum = acc[0];
  for (int i = 1; i < kChainsAvx512; ++i) sum = _mm512_add_ps(sum, acc[i]);
  alignas(64) float lane[16];
  _mm512_store_ps(lane, sum);
  return lane[0];
}

__attribute__((target("avx2,fma"))) inline float fma_loop_avx2(std::int64_t iterations) {
  const __m256 m = _mm256_set1_ps(1.0f - 0x1p-20f), c = _mm256_set1_ps(0x1p-20f);
  __m256 acc[kChainsAvx2];
#pragma GCC unroll 16
  for (int i = 0; i < kChainsAvx2; ++i) acc[i] = _mm256_set1_ps(0.5f + 0x1p-10f * float(i));
  for (std::int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < kChainsAvx2; ++i) acc[i] = _mm256_fmadd_ps(acc[i], m, c);
  }
  __m256 sum = acc[0];
  for (int i = 1; i < kChainsAvx2; ++i) sum = _mm256_add_ps(sum, acc[i]);
  alignas(32) float lane[8];
  _mm256_store_ps(lane, sum);
  return lane[0];
}
#endif

struct PeakLoop {
  const char* isa = nullptr;  // null: this CPU has neither AVX-512 nor AVX2 with FMA
  float (*run)(std::int64_t) = nullptr;
  double flop_per_iteration = 0;
};

inline PeakLoop widest_peak_loop() {
#if defined(__x86_64__)
  if (have_avx512()) return {"AVX-512", fma_loop_avx512, 2.0 * 16 * kChainsAvx512};
  if (have_avx2())
    return {"AVX2+FMA", fma_loop_avx2, 2.0 * 8 * kChainsAvx2};
#endif
  return {};
}

// FLOP/s of the loop run once on each of `threads` tasks of psi's thread pool at the same time
// (whole wall time of the fan-out, so a thread that started late counts against the peak).
inline double fma_peak_flops(const PeakLoop& loop, int threads) {
  std::vector<float> sink(std::size_t(threads), 0.0f);
  const auto t0 = std::chrono::steady_clock::now();
  psi::parallel_for(threads, [&](std::int64_t t) { sink[std::size_t(t)] = loop.run(kPeakIterations); });
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  volatile float keep = sink[0];
  (void)keep;
  return loop.flop_per_iteration * double(kPeakIterations) * threads / s;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace psi::bench
