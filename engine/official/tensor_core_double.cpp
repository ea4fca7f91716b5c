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
// so the mode changes nothing else. −T u = S0 − S is exact, and truncating it to 24 significant
// bits is clearing the low 29 bits of the double's significand: for −126 ≤ E − 25 ≤ 96 that is
// the model's FP32 accumulator negated, held as a double into the next block and converted to
// FP32 only when stored. Held negated, the −0 that the rounding mode gives T's exact zero is the
// model's +0. A row's block with a lane that allows neither (decided at the block's start, from
// E and the accumulator) is finished lane by lane as dot() finishes it.
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

ExponentBytes exponent_bytes(const Bf16Scan& a, const Bf16Scan& w) {
  // Each operand's non-zero fields, a subnormal's 0 counted as 1 (bf16_scan.h); none: no byte used.
  const auto span = [](const Bf16Scan& s, int& lo, int& hi) {
    lo = s.subnormal ? 1 : s.lo;
    hi = s.lo <= s.hi ? s.hi : 1;
    if (s.lo > s.hi && !s.subnormal) lo = hi = 127;
  };
  int alo = 0, ahi = 0, wlo = 0, whi = 0;
  span(a, alo, ahi);
  span(w, wlo, whi);
  if (ahi - alo > 63 || whi - wlo > 63) return {};
  // The greatest exponent of each operand, hi − 127, becomes byte 63.
  return {true, ahi - 127 - 63, whi - 127 - 63};
}

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

__attribute__((target("avx2"))) void decode_rows_double(CBf16Mat A, std::int64_t r0, std::int64_t nr,
                                                        std::int64_t Kp, const ExponentBytes& bytes, RowData& d) {
  const std::int64_t blocks = Kp / kBlock;
  d.xd.resize(std::size_t(nr * Kp));
  d.xe16.resize(std::size_t(nr * Kp));
  d.xsign.resize(std::size_t(nr * blocks));
  if (bytes.on) d.xe8.resize(std::size_t(nr * Kp / 2));
  const __m128i offset = _mm_set1_epi16(std::int16_t(bytes.a_offset));
  for (std::int64_t i = 0; i < nr; ++i) {
    const std::int16_t* e = d.xe16.data() + i * Kp;
    decode_row(A.row(r0 + i), A.cols, Kp, kRowFactor, d.xd.data() + i * Kp, d.xe16.data() + i * Kp,
               d.xsign.data() + i * blocks);
    if (!bytes.on) continue;
    // The exponents less the offset, in order, saturated to bytes (a zero's to −128).
    auto* out = reinterpret_cast<std::int8_t*>(d.xe8.data() + i * Kp / 2);
    for (std::int64_t k = 0; k < Kp; k += 16) {
      const __m128i lo = _mm_subs_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(e + k)), offset);
      const __m128i hi = _mm_subs_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(e + k + 8)), offset);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + k), _mm_packs_epi16(lo, hi));
    }
  }
}

namespace {

// In the 16-bit lanes the kernel works in (E, N, W's exponents and sign words), column 4q + i,
// the i-th double of the accumulator's quarter q, sits at lane 4i + 3 − q: where gathering the
// quarters' top 16 bits with word blends puts it (top_words), and from where one shift and one
// mask take it back to its 64-bit lane (start_quarter).
constexpr int slot_of_column(int c) { return 4 * (c % 4) + 3 - c / 4; }

// 16 int16 in column order put in slots: the even and odd pairs of columns to the two 128-bit
// halves, then each half's words to slots.
__attribute__((target("avx2"))) inline __m256i to_slots(__m256i v) {
  const __m256i pairs = _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7));
  const __m256i words = _mm256_setr_epi8(12, 13, 8, 9, 4, 5, 0, 1, 14, 15, 10, 11, 6, 7, 2, 3, 12, 13, 8, 9, 4, 5, 0,
                                         1, 14, 15, 10, 11, 6, 7, 2, 3);
  return _mm256_shuffle_epi8(pairs, words);
}

// The 16 × 16 16-bit values r[j][k] turned k-major: out[k][j]. Three rounds of unpacks pair
// rows within each 128-bit half (k and k + 8 travel together), the last joins the halves.
__attribute__((target("avx2"))) inline void transpose16x16(const __m256i* r, __m256i* out) {
  __m256i a[16], b[16], c[16];
  for (int p = 0; p < 8; ++p) {
    a[2 * p] = _mm256_unpacklo_epi16(r[2 * p], r[2 * p + 1]);
    a[2 * p + 1] = _mm256_unpackhi_epi16(r[2 * p], r[2 * p + 1]);
  }
  // a[2p + s]: rows 2p, 2p + 1 at k = 4s + {0..3} (and + 8 in the high half).
  for (int q = 0; q < 4; ++q)
    for (int s = 0; s < 2; ++s) {
      b[4 * q + 2 * s] = _mm256_unpacklo_epi32(a[4 * q + s], a[4 * q + 2 + s]);
      b[4 * q + 2 * s + 1] = _mm256_unpackhi_epi32(a[4 * q + s], a[4 * q + 2 + s]);
    }
  // b[4q + 2s + t]: rows 4q..4q + 3 at k = 4s + 2t + {0, 1}.
  for (int m = 0; m < 2; ++m)
    for (int st = 0; st < 4; ++st) {
      c[8 * m + 2 * st] = _mm256_unpacklo_epi64(b[8 * m + st], b[8 * m + 4 + st]);
      c[8 * m + 2 * st + 1] = _mm256_unpackhi_epi64(b[8 * m + st], b[8 * m + 4 + st]);
    }
  // c[8m + k]: rows 8m..8m + 7 at k (low half) and k + 8 (high half), k < 8.
  for (int k = 0; k < 8; ++k) {
    out[k] = _mm256_permute2x128_si256(c[k], c[8 + k], 0x20);
    out[k + 8] = _mm256_permute2x128_si256(c[k], c[8 + k], 0x31);
  }
}

}  // namespace

// W's 16 rows a block of 16 k at a time: loaded, turned k-major in the vector unit, and decoded
// there as decode16 decodes a row: the values as doubles in column order, the exponents and the
// sign words in the kernel's slots.
__attribute__((target("avx2"))) void decode_panel_double(CBf16Mat W, std::int64_t n0, std::int64_t nn,
                                                         std::int64_t Kp, const ExponentBytes& bytes, PanelData& d) {
  const std::int64_t blocks = Kp / kBlock, K = W.cols;
  d.wd.resize(std::size_t(Kp * kLanes));
  d.we16.resize(std::size_t(Kp * kLanes));
  d.wsign.resize(std::size_t(blocks * kLanes));
  if (bytes.on) d.we8.resize(std::size_t(Kp * kLanes));
  const __m256i offset = _mm256_set1_epi16(std::int16_t(bytes.w_offset));
  const Bf16* row[kLanes];
  // Lanes past the panel's columns repeat its last column with no values: zeros.
  for (int j = 0; j < kLanes; ++j) row[j] = W.row(n0 + std::min<std::int64_t>(j, nn - 1));
  for (std::int64_t blk = 0; blk < blocks; ++blk) {
    const std::int64_t k0 = blk * kBlock, n = std::max<std::int64_t>(0, std::min<std::int64_t>(kBlock, K - k0));
    __m256i r[kLanes], t[kLanes];
    for (int j = 0; j < kLanes; ++j) {
      if (j < nn && n == kBlock) {
        r[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row[j] + k0));
        continue;
      }
      alignas(32) std::uint16_t part[kBlock] = {};
      for (std::int64_t i = 0; j < nn && i < n; ++i) part[i] = row[j][k0 + i].bits;
      r[j] = _mm256_load_si256(reinterpret_cast<const __m256i*>(part));
    }
    transpose16x16(r, t);
    __m256i signs = _mm256_setzero_si256(), even = signs;
    for (int k = 0; k < kBlock; ++k) {
      const __m256i b = t[k];
      const __m256i field = _mm256_and_si256(_mm256_srli_epi16(b, 7), _mm256_set1_epi16(0xff));
      const __m256i zero = _mm256_or_si256(
          _mm256_cmpeq_epi16(field, _mm256_set1_epi16(0xff)),
          _mm256_cmpeq_epi16(_mm256_and_si256(b, _mm256_set1_epi16(0x7fff)), _mm256_setzero_si256()));
      const __m256i e = _mm256_sub_epi16(_mm256_max_epi16(field, _mm256_set1_epi16(1)), _mm256_set1_epi16(127));
      const __m256i slots = to_slots(_mm256_blendv_epi8(e, _mm256_set1_epi16(kZeroExp), zero));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d.we16.data() + (k0 + k) * kLanes), slots);
      if (bytes.on) {
        // The exponents less the offset, a zero's saturated to −128: k even in the low byte of
        // each lane, the next k in the high byte.
        const __m256i code = _mm256_max_epi16(_mm256_subs_epi16(slots, offset), _mm256_set1_epi16(-128));
        if (k % 2 == 0) {
          even = _mm256_and_si256(code, _mm256_set1_epi16(0xff));
        } else {
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(d.we8.data() + (k0 + k - 1) * kLanes),
                              _mm256_or_si256(even, _mm256_slli_epi16(code, 8)));
        }
      }
      const __m256i negative = _mm256_or_si256(_mm256_srai_epi16(b, 15), zero);
      signs = _mm256_or_si256(signs, _mm256_and_si256(negative, _mm256_set1_epi16(std::int16_t(1u << k))));
      double* out = d.wd.data() + (k0 + k) * kLanes;
      for (int h = 0; h < 2; ++h) {
        const __m128i bits = h ? _mm256_extracti128_si256(b, 1) : _mm256_castsi256_si128(b);
        const __m128i z = h ? _mm256_extracti128_si256(zero, 1) : _mm256_castsi256_si128(zero);
        const __m256 f = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
        for (int q = 0; q < 2; ++q) {
          const __m256d v = _mm256_cvtps_pd(q ? _mm256_extractf128_ps(f, 1) : _mm256_castps256_ps128(f));
          const __m256i zq = _mm256_cvtepi16_epi64(q ? _mm_srli_si128(z, 8) : z);
          _mm256_storeu_pd(out + 8 * h + 4 * q,
                           _mm256_blendv_pd(v, _mm256_set1_pd(kZeroValue), _mm256_castsi256_pd(zq)));
        }
      }
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d.wsign.data() + blk * kLanes), to_slots(signs));
  }
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

// The top 16 bits (sign, exponent field, 4 fraction bits) of the 16 doubles D[0..3], in slots.
__attribute__((target("avx2"))) inline __m256i top_words(const __m256d* D) {
  const __m256i d0 = _mm256_castpd_si256(D[0]);
  const __m256i d1 = _mm256_srli_epi64(_mm256_castpd_si256(D[1]), 16);
  const __m256i d2 = _mm256_srli_epi64(_mm256_castpd_si256(D[2]), 32);
  const __m256i d3 = _mm256_srli_epi64(_mm256_castpd_si256(D[3]), 48);
  return _mm256_blend_epi16(_mm256_blend_epi16(d3, d2, 0x22), _mm256_blend_epi16(d1, d0, 0x88), 0xcc);
}

// The products' part of E starts below every real exponent sum (−254 and up) and above every sum
// with a zero (kZeroExp + 127 and below), so that it is still this after a block of zero products.
constexpr std::int16_t kNoProduct = -10000;

// One row's block: E and N as 16 int16 in slots (N ≥ 0), and whether the vector end may take
// every lane.
struct BlockStart {
  __m256i E16, N16;
  bool vector_end;
};

// The entering accumulator's part of E (its exponent as an FP32 value where it is non-zero, a
// subnormal's counting as −126; else kMinAlignExp, below every such exponent) joined with the
// products' part, and N, the negative terms with the accumulator's. The accumulator is held
// negated as doubles, each exactly its FP32 value, so its sign (the other way round), exponent and
// zeroness are in its top 16 bits (a non-zero FP32 value's double has an exponent field of 874 or
// more). The vector end takes a
// lane that enters finite and whose E is in −101..121, where a non-zero T u is a normal FP32 value
// once truncated; or whose T is sure to be 0, a zero accumulator and no non-zero product (its E
// is kMinAlignExp). Every other block of the row ends lane by lane, as dot() ends it.
__attribute__((target("avx2"))) inline BlockStart block_start(const __m256d* D, __m256i product_e, __m256i negative) {
  const __m256i top = top_words(D);
  const __m256i zero = _mm256_cmpeq_epi16(_mm256_and_si256(top, _mm256_set1_epi16(0x7fff)), _mm256_setzero_si256());
  const __m256i field = _mm256_and_si256(_mm256_srli_epi16(top, 4), _mm256_set1_epi16(0x7ff));
  const __m256i exp = _mm256_sub_epi16(_mm256_max_epi16(field, _mm256_set1_epi16(1023 - 126)), _mm256_set1_epi16(1023));
  const __m256i E = _mm256_max_epi16(_mm256_blendv_epi8(exp, _mm256_set1_epi16(kMinAlignExp), zero), product_e);
  const __m256i N = _mm256_sub_epi16(negative, _mm256_andnot_si256(zero, _mm256_cmpgt_epi16(top, _mm256_set1_epi16(-1))));
  const __m256i in_range =
      _mm256_and_si256(_mm256_cmpgt_epi16(E, _mm256_set1_epi16(-102)), _mm256_cmpgt_epi16(_mm256_set1_epi16(122), E));
  const __m256i sure_zero = _mm256_and_si256(zero, _mm256_cmpeq_epi16(product_e, _mm256_set1_epi16(kNoProduct)));
  const __m256i ok = _mm256_andnot_si256(_mm256_cmpeq_epi16(field, _mm256_set1_epi16(0x7ff)),
                                         _mm256_or_si256(in_range, sure_zero));
  return {E, N, _mm256_movemask_epi8(ok) == -1};
}

// S0 = 1.5 · 2^(E+27) as bits: its top 16 bits are the biased exponent E + 1050 shifted by 4 and
// the significand's first bit, (E << 4) + (1050 << 4 | 8), given in slots; quarter q's are word
// 3 − q of each 64-bit lane, shifted to the top. The start S0 + N u is S0's bits or N (N < 2^16
// and S0's low bits are 0); the accumulator, held negated, is subtracted.
template <int q>
__attribute__((target("avx2,fma"))) inline void start_quarter(__m256i top16, __m256i N16, __m256i* S0, __m256d* S) {
  const __m256i top_word = _mm256_set1_epi64x(std::int64_t(0xffff000000000000ull));
  const __m256i low_word = _mm256_set1_epi64x(0xffff);
  const __m256i s0 = q == 3 ? _mm256_slli_epi64(top16, 48) : _mm256_and_si256(_mm256_slli_epi64(top16, 16 * q), top_word);
  const __m256i n = q == 0 ? _mm256_srli_epi64(N16, 48) : _mm256_and_si256(_mm256_srli_epi64(N16, 48 - 16 * q), low_word);
  S0[q] = s0;
  S[q] = _mm256_fnmadd_pd(S[q], _mm256_set1_pd(kRowFactor), _mm256_castsi256_pd(_mm256_or_si256(s0, n)));
}

// The block's end lane by lane, as dot() ends it, for the rows the vector end cannot take, from
// −T u and to the negated accumulator: out of line and by value, so that the hot path's values
// stay in registers (its arrays would put them in memory). A lane that entered non-finite has a
// non-finite T u and keeps it (gemm_accumulate gives a non-finite entering value dot()'s result;
// an overflow to infinity stays).
struct Quarters {
  __m256d q[4];
};
__attribute__((target("avx2"), noinline, cold)) Quarters end_block_lanes(__m256i E16, __m256d T0, __m256d T1,
                                                                         __m256d T2, __m256d T3) {
  alignas(32) double t[16];
  alignas(32) std::int16_t e[16];
  _mm256_store_pd(t, T0);
  _mm256_store_pd(t + 4, T1);
  _mm256_store_pd(t + 8, T2);
  _mm256_store_pd(t + 12, T3);
  _mm256_store_si256(reinterpret_cast<__m256i*>(e), E16);
  for (int c = 0; c < kLanes; ++c) {
    const int E = e[slot_of_column(c)];
    if (std::isfinite(t[c])) t[c] = -double(normalize(std::int64_t(std::ldexp(-t[c], kUnitExp - E)), E, nullptr));
  }
  return {{_mm256_load_pd(t), _mm256_load_pd(t + 4), _mm256_load_pd(t + 8), _mm256_load_pd(t + 12)}};
}

// The block's end for one row: −T u = S0 − S truncated to 24 bits, the negated accumulator for
// the next block, where the block's start allows it; else end_block_lanes. T's exact zero is −0
// here (the rounding mode), the negation of the model's +0.
__attribute__((target("avx2,fma"))) inline void end_block(const BlockStart& b, const __m256i* S0, __m256d* S) {
  const __m256d keep24 = _mm256_castsi256_pd(_mm256_set1_epi64x(std::int64_t(~((std::uint64_t(1) << 29) - 1))));
  for (int q = 0; q < 4; ++q) S[q] = _mm256_sub_pd(_mm256_castsi256_pd(S0[q]), S[q]);
  if (!b.vector_end) {
    const Quarters lanes = end_block_lanes(b.E16, S[0], S[1], S[2], S[3]);
    for (int q = 0; q < 4; ++q) S[q] = lanes.q[q];
    return;
  }
  for (int q = 0; q < 4; ++q) S[q] = _mm256_and_pd(S[q], keep24);
}

// The products' part of E for each of R rows' block at k0: the largest exponent sum of a non-zero
// product, kNoProduct where there is none. With exponent bytes (ExponentBytes), two k a vector:
// each 16-bit lane's low byte takes the even k's sums, the high byte the odd k's, both started
// at −1, below every real sum and above every sum with a zero; the two maxima are joined and
// the offsets added back after. Else two k at a time in int16, in two max chains.
template <int R, bool kBytes>
__attribute__((target("avx2"))) inline void products_e(const PanelData& p, const std::int16_t* const* xe,
                                                       const std::uint16_t* const* xe8, std::int64_t k0,
                                                       std::int16_t offset, __m256i* e) {
  if constexpr (kBytes) {
    for (int r = 0; r < R; ++r) e[r] = _mm256_set1_epi8(-1);
#pragma GCC unroll 8
    for (int k = 0; k < kBlock; k += 2) {
      const __m256i we = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.we8.data() + (k0 + k) * kLanes));
      for (int r = 0; r < R; ++r)
        e[r] = _mm256_max_epi8(e[r], _mm256_adds_epi8(we, _mm256_set1_epi16(std::int16_t(xe8[r][(k0 + k) / 2]))));
    }
    for (int r = 0; r < R; ++r) {
      const __m256i m = _mm256_max_epi16(_mm256_srai_epi16(e[r], 8), _mm256_srai_epi16(_mm256_slli_epi16(e[r], 8), 8));
      e[r] = _mm256_blendv_epi8(_mm256_add_epi16(m, _mm256_set1_epi16(offset)), _mm256_set1_epi16(kNoProduct),
                                _mm256_cmpeq_epi16(m, _mm256_set1_epi16(-1)));
    }
  } else {
    __m256i f[R][2];
    for (int r = 0; r < R; ++r) f[r][0] = f[r][1] = _mm256_set1_epi16(kNoProduct);
#pragma GCC unroll 16
    for (int k = 0; k < kBlock; ++k) {
      const __m256i we = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.we16.data() + (k0 + k) * kLanes));
      for (int r = 0; r < R; ++r)
        f[r][k % 2] = _mm256_max_epi16(f[r][k % 2], _mm256_adds_epi16(we, _mm256_set1_epi16(xe[r][k0 + k])));
    }
    for (int r = 0; r < R; ++r) e[r] = _mm256_max_epi16(f[r][0], f[r][1]);
  }
}

// R rows (1 or 2: 4R accumulators of 4 doubles, four loads and R broadcasts a k) against the
// panel's blocks blk0..blk1 (K = Kp padded to whole blocks). The accumulators stay doubles from
// block to block, each exactly the model's FP32 value negated: T's exact zero, which the rounding
// mode makes −0, is then the model's +0, and a −0 of the model's (a negative T u truncated to
// zero, lane by lane) stays −0. Runs with the MXCSR rounding toward −∞.
template <int R, bool kBytes>
__attribute__((target("avx2,fma"), noinline)) void chain_rows_double(const RowData& rows, std::int64_t i,
                                                                      const PanelData& p, std::int64_t Kp,
                                                                      std::int64_t blk0, std::int64_t blk1,
                                                                      std::int16_t offset, float* acc) {
  const std::int64_t blocks = Kp / kBlock;
  const double* xd[R];
  const std::int16_t* xe[R];
  const std::uint16_t* xe8[R];
  const std::uint16_t* xs[R];
  __m256d S[R][4];
  const __m256d sign = _mm256_set1_pd(-0.0);
  for (int r = 0; r < R; ++r) {
    xd[r] = rows.xd.data() + (i + r) * Kp;
    xe[r] = rows.xe16.data() + (i + r) * Kp;
    xe8[r] = kBytes ? rows.xe8.data() + (i + r) * Kp / 2 : nullptr;
    xs[r] = rows.xsign.data() + (i + r) * blocks;
    for (int h = 0; h < 2; ++h) {
      const __m256 a = _mm256_loadu_ps(acc + r * kLanes + 8 * h);
      S[r][2 * h] = _mm256_xor_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(a)), sign);
      S[r][2 * h + 1] = _mm256_xor_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(a, 1)), sign);
    }
  }
  for (std::int64_t blk = blk0; blk < blk1; ++blk) {
    const std::int64_t k0 = blk * kBlock;
    // The products' part of E does not depend on the accumulator: it is joined with the
    // accumulator's part after, so that the pass can run while the last block ends.
    __m256i e[R];
    products_e<R, kBytes>(p, xe, xe8, k0, offset, e);
    const __m256i ws = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.wsign.data() + blk * kLanes));
    BlockStart b[R];
    __m256i S0[R][4];
    for (int r = 0; r < R; ++r) {
      const __m256i negative = popcount16(_mm256_xor_si256(ws, _mm256_set1_epi16(std::int16_t(xs[r][blk]))));
      b[r] = block_start(S[r], e[r], negative);
      const __m256i top16 = _mm256_add_epi16(_mm256_slli_epi16(b[r].E16, 4), _mm256_set1_epi16((1050 << 4) | 8));
      start_quarter<0>(top16, b[r].N16, S0[r], S[r]);
      start_quarter<1>(top16, b[r].N16, S0[r], S[r]);
      start_quarter<2>(top16, b[r].N16, S0[r], S[r]);
      start_quarter<3>(top16, b[r].N16, S0[r], S[r]);
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
    for (int r = 0; r < R; ++r) end_block(b[r], S0[r], S[r]);
  }
  // Every value is an FP32 value (exact conversions).
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < 2; ++h) {
      const __m256 a = _mm256_set_m128(_mm256_cvtpd_ps(S[r][2 * h + 1]), _mm256_cvtpd_ps(S[r][2 * h]));
      _mm256_storeu_ps(acc + r * kLanes + 8 * h, _mm256_xor_ps(a, _mm256_set1_ps(-0.0f)));
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

void run_panel_double(const RowData& r, std::int64_t rows, const PanelData& p, std::int64_t Kp,
                      const ExponentBytes& bytes, float* acc) {
  const RoundingDown mode;
  // All the rows go through 32 blocks at a time (80 KiB of the panel), so that those stay in the
  // L2 cache while every row passes: a whole panel of K = 4,096 is 640 KiB, more than a 512 KiB L2.
  constexpr std::int64_t kChunkBlocks = 32;
  for (std::int64_t b0 = 0; b0 < Kp / kBlock; b0 += kChunkBlocks) {
    const std::int64_t b1 = std::min(Kp / kBlock, b0 + kChunkBlocks);
    std::int64_t i = 0;
    const auto offset = std::int16_t(bytes.a_offset + bytes.w_offset);
    if (bytes.on) {
      for (; i + 2 <= rows; i += 2) chain_rows_double<2, true>(r, i, p, Kp, b0, b1, offset, acc + i * kLanes);
      if (i < rows) chain_rows_double<1, true>(r, i, p, Kp, b0, b1, offset, acc + i * kLanes);
      continue;
    }
    for (; i + 2 <= rows; i += 2) chain_rows_double<2, false>(r, i, p, Kp, b0, b1, offset, acc + i * kLanes);
    if (i < rows) chain_rows_double<1, false>(r, i, p, Kp, b0, b1, offset, acc + i * kLanes);
  }
}
#endif

}  // namespace psi::official::tc
