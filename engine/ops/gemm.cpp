#include "engine/ops/gemm.h"

#include <algorithm>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "engine/bf16_scan.h"
#include "engine/cpu_features.h"
#include "engine/error.h"
#include "engine/isa_dispatch.h"
#include "engine/official/op_observer.h"
#include "engine/official/tensor_core.h"
#include "engine/ops/reduce.h"
#include "engine/parallel.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace psi::ops {

namespace {

constexpr int kMr = 4;              // register block: kMr rows of A ...
constexpr int kNr = 4;              // ... times kNr rows of W
constexpr int kNrWide = 8;          // ... or kNrWide in the AVX-512 kernel
constexpr std::int64_t kMb = 64;    // task block of A rows
constexpr std::int64_t kNb = 64;    // task block of W rows

inline float widen(Bf16 v) { return v.to_float(); }
inline float widen(float v) { return v; }

std::int64_t round_up(std::int64_t x, std::int64_t m) { return (x + m - 1) / m * m; }

// Copies rows [r0, r0+nr) and columns [k0, k0+kc) of src into a zero-padded float32 panel of
// nr_pad rows of kc_pad floats. Padding adds +0 products, which change no lane sum (lanes
// start at +0, and x + 0 = x for every x reachable from +0).
template <class T>
void load_panel(Matrix<const T> src, std::int64_t r0, std::int64_t nr, std::int64_t k0,
                std::int64_t kc, std::int64_t nr_pad, std::int64_t kc_pad, float* dst) {
  for (std::int64_t i = 0; i < nr_pad; ++i) {
    float* d = dst + i * kc_pad;
    if (i < nr) {
      const T* s = src.row(r0 + i) + k0;
      for (std::int64_t k = 0; k < kc; ++k) d[k] = widen(s[k]);
      for (std::int64_t k = kc; k < kc_pad; ++k) d[k] = 0.0f;
    } else {
      std::fill(d, d + kc_pad, 0.0f);
    }
  }
}

// One chunk of the product for an (mr x nr) block of padded panels: P[i][j] = lane_tree of the
// eight strided lane sums of A_i · W_j over kc_pad (a multiple of 8). Run per vector level
// (engine/isa_dispatch.h) for speed only.
struct ChunkKernel {
  [[gnu::always_inline]] static void run(const float* Ap, const float* Wp, std::int64_t kc_pad, std::int64_t mr,
                                         std::int64_t nr, float* P, std::int64_t ldp) {
    for (std::int64_t m = 0; m < mr; m += kMr) {
      for (std::int64_t n = 0; n < nr; n += kNr) {
        Lanes acc[kMr][kNr] = {};
        const float* a = Ap + m * kc_pad;
        const float* w = Wp + n * kc_pad;
        for (std::int64_t k = 0; k < kc_pad; k += kLanes) {
          Lanes av[kMr], wv[kNr];
          for (int i = 0; i < kMr; ++i) load_lanes(av[i], a + i * kc_pad + k);
          for (int j = 0; j < kNr; ++j) load_lanes(wv[j], w + j * kc_pad + k);
          for (int i = 0; i < kMr; ++i)
            for (int j = 0; j < kNr; ++j) {
              const Lanes prod = av[i] * wv[j];
              acc[i][j] = acc[i][j] + prod;
            }
        }
        for (int i = 0; i < kMr; ++i)
          for (int j = 0; j < kNr; ++j) P[(m + i) * ldp + n + j] = lane_tree(acc[i][j]);
      }
    }
  }
};

void chunk_kernel(const float* Ap, const float* Wp, std::int64_t kc_pad, std::int64_t mr, std::int64_t nr,
                  float* P, std::int64_t ldp) {
  isa_dispatch<ChunkKernel>(Ap, Wp, kc_pad, mr, nr, P, ldp);
}

// The AVX-512 form of chunk_kernel, for speed only: the same products and additions in the same
// order, two outputs' eight lanes in one 16-float vector (the 8-float Lanes use half of an
// AVX-512 unit). W's panel holds its rows in pairs, each pair's columns interleaved by eights
// ([nr_pad/2][kc_pad/8][2][8], load_panel_pairs), so one load gives rows j and j+1 at k..k+7,
// and A's eight are broadcast to both halves. A block is kMr rows of A by kNrWide rows of W:
// 16 accumulators, enough independent additions to cover their latency. Blocks go down A's rows
// for one group of W's rows, which stays in L1 while A's half-line broadcasts come from L2.
#if defined(__x86_64__)
// Row s's columns from group g0 on into its half of a pair (d: the pair's first float plus the
// half's offset), zero past kc.
template <class T>
void pair_groups(const T* s, std::int64_t kc, std::int64_t g0, std::int64_t kc_pad, float* d) {
  for (std::int64_t g = g0; g < kc_pad; g += kLanes)
    for (std::int64_t l = 0; l < kLanes; ++l) d[2 * g + l] = s && g + l < kc ? widen(s[g + l]) : 0.0f;
}

template <class T>
void load_panel_pairs(Matrix<const T> src, std::int64_t r0, std::int64_t nr, std::int64_t k0, std::int64_t kc,
                      std::int64_t nr_pad, std::int64_t kc_pad, float* dst) {
  for (std::int64_t i = 0; i < nr_pad; ++i)
    pair_groups(i < nr ? src.row(r0 + i) + k0 : nullptr, kc, 0, kc_pad, dst + (i / 2) * 2 * kc_pad + (i % 2) * kLanes);
}

// GCC 12's AVX-512 headers leave the pass-through operand of unmasked intrinsics undefined on
// purpose, which -Wmaybe-uninitialized reports at every use.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// BF16 rows, both of a pair widened in one vector: eight values of each, shifted up as
// Bf16::to_float does. The groups that kc cuts, and a pair with one row, as above.
template <>
__attribute__((target("avx512f"))) void load_panel_pairs(CBf16Mat src, std::int64_t r0, std::int64_t nr,
                                                         std::int64_t k0, std::int64_t kc, std::int64_t nr_pad,
                                                         std::int64_t kc_pad, float* dst) {
  const std::int64_t full = kc / kLanes * kLanes;
  for (std::int64_t i = 0; i < nr_pad; i += 2) {
    float* d = dst + i * kc_pad;
    const Bf16* s0 = i < nr ? src.row(r0 + i) + k0 : nullptr;
    const Bf16* s1 = i + 1 < nr ? src.row(r0 + i + 1) + k0 : nullptr;
    std::int64_t g0 = 0;
    if (s0 && s1) {
      for (; g0 < full; g0 += kLanes) {
        const __m256i b = _mm256_set_m128i(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s1 + g0)),
                                           _mm_loadu_si128(reinterpret_cast<const __m128i*>(s0 + g0)));
        _mm512_storeu_ps(d + 2 * g0, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(b), 16)));
      }
    }
    pair_groups(s0, kc, g0, kc_pad, d);
    pair_groups(s1, kc, g0, kc_pad, d + kLanes);
  }
}

// A's BF16 rows for the AVX-512 kernel, 16 values a vector, shifted up as Bf16::to_float does;
// the columns that kc cuts and the padding as load_panel.
__attribute__((target("avx512f"))) void load_panel_a_wide(CBf16Mat src, std::int64_t r0, std::int64_t nr,
                                                          std::int64_t k0, std::int64_t kc, std::int64_t nr_pad,
                                                          std::int64_t kc_pad, float* dst) {
  const std::int64_t full = kc / 16 * 16;
  for (std::int64_t i = 0; i < nr_pad; ++i) {
    float* d = dst + i * kc_pad;
    if (i >= nr) {
      std::fill(d, d + kc_pad, 0.0f);
      continue;
    }
    const Bf16* s = src.row(r0 + i) + k0;
    std::int64_t k = 0;
    for (; k < full; k += 16) {
      const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + k));
      _mm512_storeu_ps(d + k, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(b), 16)));
    }
    for (; k < kc_pad; ++k) d[k] = k < kc ? widen(s[k]) : 0.0f;
  }
}

// `fused` (BF16 operands whose products are all exact in FP32, products_exact_in_fp32) adds each
// product with one FMA instead of a multiply and an add: the same bits, in half the operations.
template <bool fused>
__attribute__((target("avx512f"))) void chunk_kernel_avx512(const float* Ap, const float* Wp, std::int64_t kc_pad,
                                                            std::int64_t mr, std::int64_t nr, float* P,
                                                            std::int64_t ldp) {
  constexpr int kPairs = kNrWide / 2;
  for (std::int64_t n = 0; n < nr; n += kNrWide) {
    for (std::int64_t m = 0; m < mr; m += kMr) {
      __m512 acc[kMr][kPairs];
#pragma GCC unroll 4
      for (int i = 0; i < kMr; ++i)
#pragma GCC unroll 4
        for (int j = 0; j < kPairs; ++j) acc[i][j] = _mm512_setzero_ps();
      const float* a = Ap + m * kc_pad;
      const float* w = Wp + n * kc_pad;
      for (std::int64_t k = 0; k < kc_pad; k += kLanes) {
        __m512 av[kMr], wv[kPairs];
#pragma GCC unroll 4
        for (int i = 0; i < kMr; ++i)
          av[i] = _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_loadu_pd(reinterpret_cast<const double*>(a + i * kc_pad + k))));
#pragma GCC unroll 4
        for (int j = 0; j < kPairs; ++j) wv[j] = _mm512_loadu_ps(w + j * 2 * kc_pad + 2 * k);
#pragma GCC unroll 4
        for (int i = 0; i < kMr; ++i)
#pragma GCC unroll 4
          for (int j = 0; j < kPairs; ++j)
            acc[i][j] = fused ? _mm512_fmadd_ps(av[i], wv[j], acc[i][j]) : _mm512_add_ps(acc[i][j], _mm512_mul_ps(av[i], wv[j]));
      }
      for (int i = 0; i < kMr; ++i)
        for (int j = 0; j < kPairs; ++j) {
          alignas(64) float l[2 * kLanes];
          _mm512_store_ps(l, acc[i][j]);
          P[(m + i) * ldp + n + 2 * j] = lane_tree(l);
          P[(m + i) * ldp + n + 2 * j + 1] = lane_tree(l + kLanes);
        }
    }
  }
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#endif

// W's panel for one chunk in the layout of the kernel the machine runs, and the chunk's products
// of an A panel with it.
template <class TW>
void load_w_panel(bool wide, Matrix<const TW> W, std::int64_t n0, std::int64_t nb, std::int64_t k0,
                  std::int64_t kc, std::int64_t kc_pad, std::int64_t nb_pad, float* Wp) {
#if defined(__x86_64__)
  if (wide) return load_panel_pairs(W, n0, nb, k0, kc, nb_pad, kc_pad, Wp);
#endif
  load_panel(W, n0, nb, k0, kc, nb_pad, kc_pad, Wp);
}

template <class TA>
void load_a_panel(bool wide, Matrix<const TA> A, std::int64_t m0, std::int64_t mb, std::int64_t k0,
                  std::int64_t kc, std::int64_t kc_pad, std::int64_t mb_pad, float* Ap) {
#if defined(__x86_64__)
  if constexpr (std::is_same_v<TA, Bf16>)
    if (wide) return load_panel_a_wide(A, m0, mb, k0, kc, mb_pad, kc_pad, Ap);
#endif
  load_panel(A, m0, mb, k0, kc, mb_pad, kc_pad, Ap);
}

void chunk_products(bool wide, bool fused, const float* Ap, const float* Wp, std::int64_t kc_pad,
                    std::int64_t mb_pad, std::int64_t nb_pad, float* P) {
#if defined(__x86_64__)
  if (wide && fused) return chunk_kernel_avx512<true>(Ap, Wp, kc_pad, mb_pad, nb_pad, P, kNb);
  if (wide) return chunk_kernel_avx512<false>(Ap, Wp, kc_pad, mb_pad, nb_pad, P, kNb);
#else
  (void)fused;
#endif
  chunk_kernel(Ap, Wp, kc_pad, mb_pad, nb_pad, P, kNb);
}

// Runs the ordered product block by block. For each (A rows, W rows) block, `begin` fills the
// block's float32 accumulator (kMb x kNb, row stride kNb), chunk results are added to it in
// order, and `end` consumes it. Blocks are independent, so they run in parallel. A task takes
// one block of W's rows and a group of consecutive blocks of A's rows, so that W's panel is
// widened once a chunk for the whole group: all of A's rows where the blocks of W alone give
// the threads enough tasks (four each), fewer otherwise. The grouping changes no output.
template <class TA, class TW, class Begin, class End>
void ordered_product(Matrix<const TA> A, Matrix<const TW> W, Begin&& begin, End&& end) {
  const std::int64_t M = A.rows, N = W.rows, K = A.cols;
  if (W.cols != K)
    throw Error("gemm: inner sizes differ (A has " + std::to_string(K) + " columns, W has " +
                std::to_string(W.cols) + ")");
  if (M == 0 || N == 0) return;
  const std::int64_t mblocks = (M + kMb - 1) / kMb, nblocks = (N + kNb - 1) / kNb;
  const std::int64_t wanted = 4 * std::int64_t(thread_count());
  const std::int64_t groups = std::min(mblocks, (wanted + nblocks - 1) / nblocks);
  const std::int64_t per_group = (mblocks + groups - 1) / groups;
  const bool wide = have_avx512();
  // The FMA form needs a scan of both operands first. With few rows of A the product is bound by
  // widening W's panel, not by its arithmetic, and the scan costs more than the FMA form saves
  // (4096 -> 16384 on one thread: 8 rows 12 % slower with it, 16 even, 32 8 % faster).
  constexpr std::int64_t kFusedMinRows = 32;
  bool fused = false;
  if constexpr (std::is_same_v<TA, Bf16> && std::is_same_v<TW, Bf16>)
    fused = wide && M >= kFusedMinRows && products_exact_in_fp32(scan_bf16(A), scan_bf16(W));
  parallel_for(groups * nblocks, [&](std::int64_t task) {
    const std::int64_t n0 = (task / groups) * kNb, nb = std::min(kNb, N - n0);
    const std::int64_t b0 = (task % groups) * per_group, b1 = std::min(mblocks, b0 + per_group);
    if (b0 >= b1) return;
    const std::int64_t nb_pad = round_up(nb, wide ? kNrWide : kNr);
    const std::int64_t kc_max = round_up(std::min(kChunk, std::max<std::int64_t>(K, 1)), kLanes);
    // Not zero-filled: every element read is written first (the panels by load_panel, P by
    // chunk_kernel, acc by begin). The fill was a seventh of a sanitized block run.
    const auto Ap = std::make_unique_for_overwrite<float[]>(std::size_t(kMb * kc_max));
    const auto Wp = std::make_unique_for_overwrite<float[]>(std::size_t(nb_pad * kc_max));
    const auto P = std::make_unique_for_overwrite<float[]>(std::size_t(kMb * kNb));
    const auto acc = std::make_unique_for_overwrite<float[]>(std::size_t((b1 - b0) * kMb * kNb));
    auto rows = [&](std::int64_t b) { return std::pair{b * kMb, std::min(kMb, M - b * kMb)}; };
    for (std::int64_t b = b0; b < b1; ++b) begin(rows(b).first, rows(b).second, n0, nb, acc.get() + (b - b0) * kMb * kNb);
    for (std::int64_t k0 = 0; k0 < K; k0 += kChunk) {
      const std::int64_t kc = std::min(kChunk, K - k0), kc_pad = round_up(kc, kLanes);
      load_w_panel(wide, W, n0, nb, k0, kc, kc_pad, nb_pad, Wp.get());
      for (std::int64_t b = b0; b < b1; ++b) {
        const auto [m0, mb] = rows(b);
        const std::int64_t mb_pad = round_up(mb, kMr);
        float* block = acc.get() + (b - b0) * kMb * kNb;
        load_a_panel(wide, A, m0, mb, k0, kc, kc_pad, mb_pad, Ap.get());
        chunk_products(wide, fused, Ap.get(), Wp.get(), kc_pad, mb_pad, nb_pad, P.get());
        for (std::int64_t i = 0; i < mb; ++i)
          for (std::int64_t j = 0; j < nb; ++j) block[i * kNb + j] = block[i * kNb + j] + P[i * kNb + j];
      }
    }
    for (std::int64_t b = b0; b < b1; ++b) end(rows(b).first, rows(b).second, n0, nb, acc.get() + (b - b0) * kMb * kNb);
  });
}

template <class TA, class TW>
void gemm_accumulate_impl(Matrix<const TA> A, Matrix<const TW> W, F32Mat C) {
  if (C.rows != A.rows || C.cols != W.rows)
    throw Error("gemm: output is " + std::to_string(C.rows) + "x" + std::to_string(C.cols) +
                ", product is " + std::to_string(A.rows) + "x" + std::to_string(W.rows));
  ordered_product(
      A, W,
      [&](std::int64_t m0, std::int64_t mb, std::int64_t n0, std::int64_t nb, float* acc) {
        for (std::int64_t i = 0; i < mb; ++i)
          for (std::int64_t j = 0; j < nb; ++j) acc[i * kNb + j] = C.at(m0 + i, n0 + j);
      },
      [&](std::int64_t m0, std::int64_t mb, std::int64_t n0, std::int64_t nb, const float* acc) {
        for (std::int64_t i = 0; i < mb; ++i)
          for (std::int64_t j = 0; j < nb; ++j) C.at(m0 + i, n0 + j) = acc[i * kNb + j];
      });
}

void zero_block(std::int64_t, std::int64_t mb, std::int64_t, std::int64_t nb, float* acc) {
  for (std::int64_t i = 0; i < mb; ++i) std::fill(acc + i * kNb, acc + i * kNb + nb, 0.0f);
}

void check_linear(CBf16Mat x, CBf16Mat W, std::int64_t y_rows, std::int64_t y_cols) {
  if (x.cols != W.cols)
    throw Error("linear: input width " + std::to_string(x.cols) + " but weight is [" +
                std::to_string(W.rows) + ", " + std::to_string(W.cols) + "]");
  if (y_rows != x.rows || y_cols != W.rows)
    throw Error("linear: output is " + std::to_string(y_rows) + "x" + std::to_string(y_cols) +
                ", expected " + std::to_string(x.rows) + "x" + std::to_string(W.rows));
}

}  // namespace

void gemm_accumulate(CBf16Mat A, CBf16Mat W, F32Mat C, Product product) {
  if (product.arith == Arith::h200_tensor_core) return official::tc::gemm_accumulate(A, W, C);
  gemm_accumulate_impl(A, W, C);
}
void gemm_accumulate(CF32Mat A, CF32Mat W, F32Mat C) { gemm_accumulate_impl(A, W, C); }

void linear(CBf16Mat x, CBf16Mat W, const Bf16* bias, BiasRule rule, Bf16Mat y, Product product) {
  if (product.arith == Arith::h200_tensor_core) {
    official::tc::linear(x, W, bias, rule, y, product.kernels.get());
  } else {
    check_linear(x, W, y.rows, y.cols);
    ordered_product(x, W, zero_block,
                    [&](std::int64_t m0, std::int64_t mb, std::int64_t n0, std::int64_t nb,
                        const float* acc) {
                      for (std::int64_t i = 0; i < mb; ++i)
                        finish_linear(acc + i * kNb, bias ? bias + n0 : nullptr, rule,
                                      y.row(m0 + i) + n0, nb);
                    });
  }
  if (official::OpObserver* o = official::op_observer())
    o->product({official::op_site(), {official::rows_as_if(x.rows), W.rows, x.cols}, x, W, bias, rule, y, product.kernels.get()});
}

void linear_f32(CBf16Mat x, CBf16Mat W, const Bf16* bias, F32Mat y) {
  check_linear(x, W, y.rows, y.cols);
  ordered_product(x, W, zero_block,
                  [&](std::int64_t m0, std::int64_t mb, std::int64_t n0, std::int64_t nb,
                      const float* acc) {
                    for (std::int64_t i = 0; i < mb; ++i)
                      for (std::int64_t j = 0; j < nb; ++j)
                        y.at(m0 + i, n0 + j) =
                            bias ? acc[i * kNb + j] + bias[n0 + j].to_float() : acc[i * kNb + j];
                  });
}

Bf16Tensor linear(const Bf16Tensor& x, const Bf16Tensor& W, const Bf16Tensor* b, BiasRule rule, Product product) {
  if (W.shape.size() != 2) throw Error("linear: weight must be 2-D, got " + shape_str(W.shape));
  if (b && b->numel() != W.dim(0))
    throw Error("linear: bias has " + std::to_string(b->numel()) + " values for " +
                std::to_string(W.dim(0)) + " outputs");
  Shape out_shape = x.shape;
  out_shape.back() = W.dim(0);
  Bf16Tensor y(out_shape);
  linear(as_matrix(x), as_matrix(W), b ? b->ptr() : nullptr, rule, as_matrix(y), product);
  return y;
}

}  // namespace psi::ops
