// The AVX2 double-FMA lane kernel (tensor_core_lanes.h, ../shared/spec/tensor-core-double-fma.md):
// one block FMA of the model as one double-precision FMA per product, rounding toward −∞.
//
// For an output's block with alignment exponent E and unit u = 2^(E−25), each term is
// q = x w / u (|q| < 2^27, at most 16 significant bits) and the model sums trunc(q). With
// x' = x (1 + 2^−28), floor(q (1 + 2^−28)) is trunc(q) for q ≥ 0 and trunc(q) − 1 for q < 0:
// q 2^−28 is below both 1 and the weight of q's lowest bit, so it moves q past no integer and
// past no other multiple of that weight. A double S started at S0 = 1.5 · 2^52 · u has ulp
// exactly u for as long as |S − S0| < 2^51 u, so S ← RD(S + x' w) adds floor(x' w / u) units,
// exactly. Starting from S0 + N u, N the block's negative terms, S − S0 is the model's T. The
// accumulator is one more term (acc (1 + 2^−28), counted in N where negative).
//
// A zero (or non-finite) operand is stored as −2^−500: its products are tiny, floor to 0 or
// −1, and count as negative exactly when they floor to −1, so N is a popcount of the XOR of the
// row's and the column's sign bits over the block with no test for zeros. Exponents are int16
// (a zero's kZeroExp saturates and never sets E).
//
// Only the FMAs round, and only toward −∞; the MXCSR is set so for the kernel's call and put
// back after it (run_panel_double), and every other floating-point operation in the kernel is exact,
// so the mode changes nothing else. T = S − S0 is exact, and truncating it to 24 significant bits
// is clearing the low 29 bits of the double's significand, after which the conversion to FP32
// is exact for −126 ≤ E − 25 ≤ 96; T's exact zero, which the rounding mode makes −0, is made +0.
// A row's block with a lane that allows neither (decided at the block's start, from E and the
// accumulator) is finished lane by lane as dot() finishes it.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/official/tensor_core_chain.h"
#include "engine/official/tensor_core_lanes.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace psi::official::tc {

#if defined(__x86_64__)
namespace {

constexpr double kZeroValue = -0x1p-500;
constexpr double kRowFactor = 1.0 + 0x1p-28;

// 16 BF16 values (the first n of src, zeros past it) as the kernel stores them: the values times
// `factor` (exact: 8 + 28 significant bits) into val, a zero or non-finite one as −2^−500, the
// exponents (field 0 counting as 1; kZeroExp for those) into exp; returns the sign word.
__attribute__((target("avx2"))) inline std::uint16_t decode16(const Bf16* src, std::int64_t n, __m256d factor,
                                                              double* val, std::int16_t* exp) {
  __m256i b;
  if (n >= 16) {
    b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src));
  } else {
    alignas(32) std::uint16_t part[16] = {};
    for (std::int64_t i = 0; i < n; ++i) part[i] = src[i].bits;
    b = _mm256_load_si256(reinterpret_cast<const __m256i*>(part));
  }
  const __m256i field = _mm256_and_si256(_mm256_srli_epi16(b, 7), _mm256_set1_epi16(0xff));
  const __m256i zero = _mm256_or_si256(
      _mm256_cmpeq_epi16(field, _mm256_set1_epi16(0xff)),
      _mm256_cmpeq_epi16(_mm256_and_si256(b, _mm256_set1_epi16(0x7fff)), _mm256_setzero_si256()));
  const __m256i e = _mm256_sub_epi16(_mm256_max_epi16(field, _mm256_set1_epi16(1)), _mm256_set1_epi16(127));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(exp), _mm256_blendv_epi8(e, _mm256_set1_epi16(kZeroExp), zero));
  const __m256i negative = _mm256_or_si256(_mm256_srai_epi16(b, 15), zero);
  const auto signs = std::uint16_t(
      _mm_movemask_epi8(_mm_packs_epi16(_mm256_castsi256_si128(negative), _mm256_extracti128_si256(negative, 1))));
  for (int h = 0; h < 2; ++h) {
    const __m128i bits = h ? _mm256_extracti128_si256(b, 1) : _mm256_castsi256_si128(b);
    const __m128i z = h ? _mm256_extracti128_si256(zero, 1) : _mm256_castsi256_si128(zero);
    const __m256 f = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
    for (int q = 0; q < 2; ++q) {
      const __m256d v = _mm256_mul_pd(_mm256_cvtps_pd(q ? _mm256_extractf128_ps(f, 1) : _mm256_castps256_ps128(f)), factor);
      const __m256i zq = _mm256_cvtepi16_epi64(q ? _mm_srli_si128(z, 8) : z);
      _mm256_storeu_pd(val + 8 * h + 4 * q, _mm256_blendv_pd(v, _mm256_set1_pd(kZeroValue), _mm256_castsi256_pd(zq)));
    }
  }
  return signs;
}

// One row of K values padded to Kp, in row layout.
__attribute__((target("avx2"))) void decode_row(const Bf16* src, std::int64_t K, std::int64_t Kp, double factor,
                                                double* val, std::int16_t* exp, std::uint16_t* signs) {
  const __m256d f = _mm256_set1_pd(factor);
  for (std::int64_t k = 0; k < Kp; k += kBlock)
    signs[k / kBlock] = decode16(src + k, std::max<std::int64_t>(0, K - k), f, val + k, exp + k);
}

}  // namespace

void decode_rows_double(CBf16Mat A, std::int64_t r0, std::int64_t nr, std::int64_t Kp, RowData& d) {
  const std::int64_t blocks = Kp / kBlock;
  d.xd.resize(std::size_t(nr * Kp));
  d.xe16.resize(std::size_t(nr * Kp));
  d.xsign.resize(std::size_t(nr * blocks));
  for (std::int64_t i = 0; i < nr; ++i)
    decode_row(A.row(r0 + i), A.cols, Kp, kRowFactor, d.xd.data() + i * Kp, d.xe16.data() + i * Kp,
               d.xsign.data() + i * blocks);
}

// W's rows decoded in row layout, then turned k-major: the doubles four rows by four k at a time.
__attribute__((target("avx2"))) void decode_panel_double(CBf16Mat W, std::int64_t n0, std::int64_t nn,
                                                         std::int64_t Kp, PanelData& d) {
  const std::int64_t blocks = Kp / kBlock;
  thread_local std::vector<double> val;
  thread_local std::vector<std::int16_t> exp;
  thread_local std::vector<std::uint16_t> signs;
  val.resize(std::size_t(kLanes * Kp));
  exp.resize(std::size_t(kLanes * Kp));
  signs.resize(std::size_t(kLanes * blocks));
  for (std::int64_t j = 0; j < kLanes; ++j)
    decode_row(W.row(n0 + std::min(j, nn - 1)), j < nn ? W.cols : 0, Kp, 1.0, val.data() + j * Kp,
               exp.data() + j * Kp, signs.data() + j * blocks);
  d.wd.resize(std::size_t(Kp * kLanes));
  d.we16.resize(std::size_t(Kp * kLanes));
  d.wsign.resize(std::size_t(blocks * kLanes));
  for (std::int64_t j0 = 0; j0 < kLanes; j0 += 4)
    for (std::int64_t k = 0; k < Kp; k += 4) {
      const double* v = val.data() + j0 * Kp + k;
      const __m256d r0 = _mm256_loadu_pd(v), r1 = _mm256_loadu_pd(v + Kp), r2 = _mm256_loadu_pd(v + 2 * Kp),
                    r3 = _mm256_loadu_pd(v + 3 * Kp);
      const __m256d t0 = _mm256_unpacklo_pd(r0, r1), t1 = _mm256_unpackhi_pd(r0, r1);
      const __m256d t2 = _mm256_unpacklo_pd(r2, r3), t3 = _mm256_unpackhi_pd(r2, r3);
      double* out = d.wd.data() + k * kLanes + j0;
      _mm256_storeu_pd(out, _mm256_permute2f128_pd(t0, t2, 0x20));
      _mm256_storeu_pd(out + kLanes, _mm256_permute2f128_pd(t1, t3, 0x20));
      _mm256_storeu_pd(out + 2 * kLanes, _mm256_permute2f128_pd(t0, t2, 0x31));
      _mm256_storeu_pd(out + 3 * kLanes, _mm256_permute2f128_pd(t1, t3, 0x31));
    }
  for (std::int64_t k = 0; k < Kp; ++k)
    for (std::int64_t j = 0; j < kLanes; ++j) d.we16[std::size_t(k * kLanes + j)] = exp[std::size_t(j * Kp + k)];
  for (std::int64_t b = 0; b < blocks; ++b)
    for (std::int64_t j = 0; j < kLanes; ++j) d.wsign[std::size_t(b * kLanes + j)] = signs[std::size_t(j * blocks + b)];
}

namespace {

// The 16 lanes' 16-bit popcounts.
__attribute__((target("avx2"))) inline __m256i popcount16(__m256i v) {
  const __m256i lut = _mm256_setr_epi8(0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4, 0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2,
                                       3, 2, 3, 3, 4);
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  const __m256i c8 = _mm256_add_epi8(_mm256_shuffle_epi8(lut, _mm256_and_si256(v, nibble)),
                                     _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble)));
  return _mm256_add_epi16(_mm256_and_si256(c8, _mm256_set1_epi16(0xff)), _mm256_srli_epi16(c8, 8));
}

// Two vectors of 8 int32 as one of 16 int16, in lane order (packs interleaves the 128-bit halves).
__attribute__((target("avx2"))) inline __m256i pack16(__m256i lo, __m256i hi) {
  return _mm256_permute4x64_epi64(_mm256_packs_epi32(lo, hi), 0xd8);
}

// Lanes 4q..4q+3 of 16 uint16, zero-extended to 64 bits.
template <int q>
__attribute__((target("avx2"))) inline __m256i quarter64(__m256i v) {
  const __m128i half = q < 2 ? _mm256_castsi256_si128(v) : _mm256_extracti128_si256(v, 1);
  return _mm256_cvtepu16_epi64(q % 2 ? _mm_srli_si128(half, 8) : half);
}

// Lanes 4q..4q+3 of 16 floats held as two vectors, as doubles.
template <int q>
__attribute__((target("avx2"))) inline __m256d quarter_pd(const __m256* a) {
  return _mm256_cvtps_pd(q % 2 ? _mm256_extractf128_ps(a[q / 2], 1) : _mm256_castps256_ps128(a[q / 2]));
}

// The products' part of E starts below every real exponent sum (−254 and up) and above every sum
// with a zero (kZeroExp + 127 and below), so that it is still this after a block of zero products.
constexpr std::int16_t kNoProduct = -10000;

// One row's block: E and N as 16 int16 (N ≥ 0), and whether the vector end may take every lane.
struct BlockStart {
  __m256i E16, N16;
  bool vector_end;
};

// The entering accumulator's part of E (its exponent where it is non-zero, field 0 counting as
// 1; else kMinAlignExp, below every such exponent) joined with the products' part, and N, the
// negative terms with the accumulator's. All in 16-bit lanes, from each float's top half (sign,
// exponent field) and its comparison with zero. The vector end takes a lane that enters finite
// and whose E is in −101..121, where a non-zero T u is a normal FP32 value once truncated; or
// whose T is sure to be 0, a zero accumulator and no non-zero product (its E is kMinAlignExp).
// Every other block of the row ends lane by lane, as dot() ends it.
__attribute__((target("avx2"))) inline BlockStart block_start(const __m256* A, __m256i product_e, __m256i negative) {
  const __m256i top = pack16(_mm256_srai_epi32(_mm256_castps_si256(A[0]), 16),
                             _mm256_srai_epi32(_mm256_castps_si256(A[1]), 16));
  const __m256i zero = pack16(_mm256_castps_si256(_mm256_cmp_ps(A[0], _mm256_setzero_ps(), _CMP_EQ_OQ)),
                              _mm256_castps_si256(_mm256_cmp_ps(A[1], _mm256_setzero_ps(), _CMP_EQ_OQ)));
  const __m256i field = _mm256_and_si256(_mm256_srli_epi16(top, 7), _mm256_set1_epi16(0xff));
  const __m256i exp = _mm256_sub_epi16(_mm256_max_epi16(field, _mm256_set1_epi16(1)), _mm256_set1_epi16(127));
  const __m256i E = _mm256_max_epi16(_mm256_blendv_epi8(exp, _mm256_set1_epi16(kMinAlignExp), zero), product_e);
  const __m256i N = _mm256_sub_epi16(negative, _mm256_andnot_si256(zero, _mm256_srai_epi16(top, 15)));
  const __m256i in_range =
      _mm256_and_si256(_mm256_cmpgt_epi16(E, _mm256_set1_epi16(-102)), _mm256_cmpgt_epi16(_mm256_set1_epi16(122), E));
  const __m256i sure_zero = _mm256_and_si256(zero, _mm256_cmpeq_epi16(product_e, _mm256_set1_epi16(kNoProduct)));
  const __m256i ok = _mm256_andnot_si256(_mm256_cmpeq_epi16(field, _mm256_set1_epi16(0xff)),
                                         _mm256_or_si256(in_range, sure_zero));
  return {E, N, _mm256_movemask_epi8(ok) == -1};
}

// S0 = 1.5 · 2^(E+27) as bits: its top 16 bits are the biased exponent E + 1050 shifted by 4 and
// the significand's first bit, (E << 4) + (1050 << 4 | 8), so that each quarter is one widening
// and one shift. The start S0 + N u is S0's bits or N (N < 2^48 and S0's low bits are 0).
template <int q>
__attribute__((target("avx2,fma"))) inline void start_quarter(__m256i top16, __m256i N16, const __m256* A,
                                                               __m256i* S0, __m256d* S) {
  S0[q] = _mm256_slli_epi64(quarter64<q>(top16), 48);
  const __m256d start = _mm256_castsi256_pd(_mm256_or_si256(S0[q], quarter64<q>(N16)));
  S[q] = _mm256_fmadd_pd(quarter_pd<q>(A), _mm256_set1_pd(kRowFactor), start);
}

// The block's end lane by lane, as dot() ends it, for the rows the vector end cannot take: out of
// line, so that the hot path's values stay in registers (its arrays would put them in memory).
// Lanes that enter non-finite are left as they are (gemm_accumulate gives them dot()'s value).
__attribute__((target("avx2"), noinline, cold)) void end_block_lanes(__m256d T0, __m256d T1, __m256d T2, __m256d T3,
                                                                     __m256i E16, __m256* A) {
  alignas(32) double t[16];
  alignas(32) std::int16_t e[16];
  alignas(32) float a[16];
  _mm256_store_pd(t, T0);
  _mm256_store_pd(t + 4, T1);
  _mm256_store_pd(t + 8, T2);
  _mm256_store_pd(t + 12, T3);
  _mm256_store_si256(reinterpret_cast<__m256i*>(e), E16);
  _mm256_store_ps(a, A[0]);
  _mm256_store_ps(a + 8, A[1]);
  for (int l = 0; l < kLanes; ++l)
    if (std::isfinite(a[l])) a[l] = normalize(std::int64_t(std::ldexp(t[l], kUnitExp - e[l])), e[l], nullptr);
  A[0] = _mm256_load_ps(a);
  A[1] = _mm256_load_ps(a + 8);
}

// The block's end for one row: T u = S − S0 truncated to 24 bits and converted, where the block's
// start allows it; else end_block_lanes.
__attribute__((target("avx2,fma"))) inline void end_block(const BlockStart& b, const __m256i* S0, const __m256d* S,
                                                           __m256* A) {
  const __m256d keep24 = _mm256_castsi256_pd(_mm256_set1_epi64x(std::int64_t(~((std::uint64_t(1) << 29) - 1))));
  __m256d T[4];
  for (int q = 0; q < 4; ++q) T[q] = _mm256_sub_pd(S[q], _mm256_castsi256_pd(S0[q]));
  if (!b.vector_end) return end_block_lanes(T[0], T[1], T[2], T[3], b.E16, A);
  for (int h = 0; h < 2; ++h) {
    const __m256 r = _mm256_set_m128(_mm256_cvtpd_ps(_mm256_and_pd(T[2 * h + 1], keep24)),
                                     _mm256_cvtpd_ps(_mm256_and_pd(T[2 * h], keep24)));
    // An exact zero is +0 (the rounding mode made it −0).
    A[h] = _mm256_and_ps(r, _mm256_cmp_ps(r, _mm256_setzero_ps(), _CMP_NEQ_OQ));
  }
}

// R rows (1 or 2: 4R accumulators of 4 doubles, four loads and R broadcasts a k) against the
// panel's blocks blk0..blk1 (K = Kp padded to whole blocks). Runs with the MXCSR rounding toward −∞.
template <int R>
__attribute__((target("avx2,fma"), noinline)) void chain_rows_double(const RowData& rows, std::int64_t i,
                                                                      const PanelData& p, std::int64_t Kp,
                                                                      std::int64_t blk0, std::int64_t blk1,
                                                                      float* acc) {
  const std::int64_t blocks = Kp / kBlock;
  const double* xd[R];
  const std::int16_t* xe[R];
  const std::uint16_t* xs[R];
  __m256 A[R][2];
  for (int r = 0; r < R; ++r) {
    xd[r] = rows.xd.data() + (i + r) * Kp;
    xe[r] = rows.xe16.data() + (i + r) * Kp;
    xs[r] = rows.xsign.data() + (i + r) * blocks;
    A[r][0] = _mm256_loadu_ps(acc + r * kLanes);
    A[r][1] = _mm256_loadu_ps(acc + r * kLanes + 8);
  }
  for (std::int64_t blk = blk0; blk < blk1; ++blk) {
    const std::int64_t k0 = blk * kBlock;
    // The products' part of E does not depend on the accumulator: two max chains a row, joined
    // with the accumulator's part after, so that the pass can run while the last block ends.
    __m256i e[R][2];
    for (int r = 0; r < R; ++r) e[r][0] = e[r][1] = _mm256_set1_epi16(kNoProduct);
#pragma GCC unroll 16
    for (int k = 0; k < kBlock; ++k) {
      const __m256i we = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.we16.data() + (k0 + k) * kLanes));
      for (int r = 0; r < R; ++r)
        e[r][k % 2] = _mm256_max_epi16(e[r][k % 2], _mm256_adds_epi16(we, _mm256_set1_epi16(xe[r][k0 + k])));
    }
    const __m256i ws = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.wsign.data() + blk * kLanes));
    BlockStart b[R];
    __m256i S0[R][4];
    __m256d S[R][4];
    for (int r = 0; r < R; ++r) {
      const __m256i negative = popcount16(_mm256_xor_si256(ws, _mm256_set1_epi16(std::int16_t(xs[r][blk]))));
      b[r] = block_start(A[r], _mm256_max_epi16(e[r][0], e[r][1]), negative);
      const __m256i top16 = _mm256_add_epi16(_mm256_slli_epi16(b[r].E16, 4), _mm256_set1_epi16((1050 << 4) | 8));
      start_quarter<0>(top16, b[r].N16, A[r], S0[r], S[r]);
      start_quarter<1>(top16, b[r].N16, A[r], S0[r], S[r]);
      start_quarter<2>(top16, b[r].N16, A[r], S0[r], S[r]);
      start_quarter<3>(top16, b[r].N16, A[r], S0[r], S[r]);
    }
#pragma GCC unroll 16
    for (int k = 0; k < kBlock; ++k) {
      const double* w = p.wd.data() + (k0 + k) * kLanes;
      const __m256d w0 = _mm256_loadu_pd(w), w1 = _mm256_loadu_pd(w + 4), w2 = _mm256_loadu_pd(w + 8),
                    w3 = _mm256_loadu_pd(w + 12);
      for (int r = 0; r < R; ++r) {
        const __m256d x = _mm256_broadcast_sd(xd[r] + k0 + k);
        S[r][0] = _mm256_fmadd_pd(x, w0, S[r][0]);
        S[r][1] = _mm256_fmadd_pd(x, w1, S[r][1]);
        S[r][2] = _mm256_fmadd_pd(x, w2, S[r][2]);
        S[r][3] = _mm256_fmadd_pd(x, w3, S[r][3]);
      }
    }
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) end_block(b[r], S0[r], S[r], A[r]);
  }
  for (int r = 0; r < R; ++r) {
    _mm256_storeu_ps(acc + r * kLanes, A[r][0]);
    _mm256_storeu_ps(acc + r * kLanes + 8, A[r][1]);
  }
}

// The MXCSR rounding toward −∞ for one scope, then as it was.
class RoundingDown {
 public:
  RoundingDown() : saved_(_mm_getcsr()) { _mm_setcsr((saved_ & ~0x6000u) | 0x2000u); }
  ~RoundingDown() { _mm_setcsr(saved_); }
  RoundingDown(const RoundingDown&) = delete;
  RoundingDown& operator=(const RoundingDown&) = delete;

 private:
  unsigned saved_;
};

}  // namespace

void run_panel_double(const RowData& r, std::int64_t rows, const PanelData& p, std::int64_t Kp, float* acc) {
  const RoundingDown mode;
  // All the rows go through 32 blocks at a time (80 KiB of the panel), so that those stay in the
  // L2 cache while every row passes: a whole panel of K = 4,096 is 640 KiB, more than a 512 KiB L2.
  constexpr std::int64_t kChunkBlocks = 32;
  for (std::int64_t b0 = 0; b0 < Kp / kBlock; b0 += kChunkBlocks) {
    const std::int64_t b1 = std::min(Kp / kBlock, b0 + kChunkBlocks);
    std::int64_t i = 0;
    for (; i + 2 <= rows; i += 2) chain_rows_double<2>(r, i, p, Kp, b0, b1, acc + i * kLanes);
    if (i < rows) chain_rows_double<1>(r, i, p, Kp, b0, b1, acc + i * kLanes);
  }
}
#endif

}  // namespace psi::official::tc
