#include "engine/official/tensor_core_lanes.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>

#include "engine/cpu_features.h"
#include "engine/error.h"
#include "engine/official/tensor_core_chain.h"
#include "engine/parallel.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace psi::official::tc {

namespace {

// n consecutive BF16 values as decode() gives them (a non-finite one as a zero): the significand
// times `scale` and the exponent. Masks, not branches, so that it vectorises.
void decode_run(const Bf16* __restrict v, std::int64_t n, std::int32_t scale, std::int32_t* __restrict sig,
                std::int32_t* __restrict exp) {
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int32_t b = v[i].bits;
    const std::int32_t field = (b >> 7) & 0xff;
    const std::int32_t finite = -std::int32_t(field != 0xff), normal = -std::int32_t(field != 0);
    const std::int32_t m = (b & 0x7f) | (normal & 0x80);
    const std::int32_t nonzero = finite & -std::int32_t(m != 0);
    // A subnormal's exponent is −126: field 0 counts as 1.
    exp[i] = (((field | (~normal & 1)) - 127) & nonzero) | (kZeroExp & ~nonzero);
    const std::int32_t sign = -(b >> 15);  // 0 or −1
    sig[i] = ((m ^ sign) - sign) * scale & nonzero;
  }
}

void decode_rows(CBf16Mat A, std::int64_t r0, std::int64_t nr, RowData& d) {
  const std::int64_t K = A.cols;
  d.sig.resize(std::size_t(nr * K));
  d.exp.resize(std::size_t(nr * K));
  for (std::int64_t i = 0; i < nr; ++i)
    decode_run(A.row(r0 + i), K, 1 << kProductShift, d.sig.data() + i * K, d.exp.data() + i * K);
}

// W's rows n0..n0+nn decoded row by row, then laid out k-major, 16 columns a k.
void decode_panel(CBf16Mat W, std::int64_t n0, std::int64_t nn, PanelData& d) {
  const std::int64_t K = W.cols;
  d.row_exp.resize(std::size_t(nn * K));
  d.row_sig.resize(std::size_t(nn * K));
  for (std::int64_t j = 0; j < nn; ++j)
    decode_run(W.row(n0 + j), K, 1, d.row_sig.data() + j * K, d.row_exp.data() + j * K);
  // Every element is written once: a panel's missing columns (nn < kLanes) as zeros, the rest
  // from the rows, with no clearing pass before.
  d.sig.resize(std::size_t(K * kLanes));
  d.exp.resize(std::size_t(K * kLanes));
  for (std::int64_t k = 0; k < K; ++k) {
    for (std::int64_t j = 0; j < nn; ++j) {
      const std::size_t to = std::size_t(k * kLanes + j), from = std::size_t(j * K + k);
      d.exp[to] = d.row_exp[from];
      d.sig[to] = d.row_sig[from];
    }
    for (std::int64_t j = nn; j < kLanes; ++j) {
      d.exp[std::size_t(k * kLanes + j)] = kZeroExp;
      d.sig[std::size_t(k * kLanes + j)] = 0;
    }
  }
}

// One block's end for one lane: add the accumulator's aligned term to the products' sum S and
// normalise. Same arithmetic as dot().
inline float finish_lane(std::int64_t S, int E, float acc) {
  if (std::isinf(acc)) return acc;
  const Acc a = decode_acc(acc);
  return normalize(a.mag ? S + acc_term(a, E, nullptr) : S, E, nullptr);
}

// The entering accumulator's exponent as a lane's starting E (a zero takes no part).
inline int acc_exp(float acc) {
  const Acc a = decode_acc(acc);
  return a.mag ? a.exp : kZeroExp;
}

// Portable lanes: the reference shape of the vector kernel, for machines without AVX2.
void chain_rows_portable(const std::int32_t* xs, const std::int32_t* xe, const PanelData& p, std::int64_t K,
                         float* acc /* [kLanes] */) {
  for (std::int64_t k0 = 0; k0 < K; k0 += kBlock) {
    const std::int64_t k1 = std::min(K, k0 + kBlock);
    int E[kLanes];
    std::int64_t S[kLanes] = {};
    for (int l = 0; l < kLanes; ++l) E[l] = acc_exp(acc[l]);
    for (std::int64_t k = k0; k < k1; ++k)
      for (int l = 0; l < kLanes; ++l) E[l] = std::max(E[l], xe[k] + p.exp[std::size_t(k * kLanes + l)]);
    for (int l = 0; l < kLanes; ++l) E[l] = std::max(E[l], kMinAlignExp);
    for (std::int64_t k = k0; k < k1; ++k)
      for (int l = 0; l < kLanes; ++l) {
        const std::int64_t prod = std::int64_t(xs[k]) * p.sig[std::size_t(k * kLanes + l)];
        const std::int64_t t = shifted(prod < 0 ? -prod : prod, E[l] - xe[k] - p.exp[std::size_t(k * kLanes + l)]);
        S[l] += prod < 0 ? -t : t;
      }
    for (int l = 0; l < kLanes; ++l) acc[l] = finish_lane(S[l], E[l], acc[l]);
  }
}

#if defined(__x86_64__)
// AVX2: 8 lanes of int32, the panel's 16 columns as two halves. |x_sig * 2^11 * w_sig| < 2^27
// and a block's 16 aligned product terms sum to less than 2^31 in magnitude, so S fits an
// int32. vpsrlvd yields 0 for counts above 31, which is the truncation of a term shifted past
// all its bits.
//
// The block's end in the lanes, as finish_block does it with AVX-512 (below): the accumulator's
// fields from max(field, 1), its term A·4 >> (E − a) signed, T = S + term, and the result
// sign(T) · trunc24(|T|) · 2^(E−25). AVX2 has no round-toward-zero conversion, so |T| is
// truncated to 24 significant bits first: |T| >> 8 converts exactly, its exponent e gives |T|'s
// width e + 9, and the low max(e − 15, 0) bits are cleared; the conversion of what is left is
// exact, and so is the multiply by 2^(E−25) for −126 ≤ E − 25 ≤ 96. Lanes outside that, with a
// T that overflowed int32, or entering with an infinite accumulator, send the half's block to
// finish_lane.
__attribute__((target("avx2"))) inline __m256 finish_block_avx2(__m256 A, __m256i S, __m256i E, __m256i acc_bits,
                                                                __m256i acc_mag, __m256i acc_exp,
                                                                __m256i acc_finite) {
  const __m256i zero = _mm256_setzero_si256();
  const __m256i term =
      _mm256_sign_epi32(_mm256_srlv_epi32(_mm256_slli_epi32(acc_mag, kExtraBits), _mm256_sub_epi32(E, acc_exp)), acc_bits);
  const __m256i T = _mm256_add_epi32(S, term);
  // Signed overflow: the sign bit of (S^T) & (term^T).
  const __m256i overflow = _mm256_and_si256(_mm256_xor_si256(S, T), _mm256_xor_si256(term, T));
  const __m256i t_nonzero = _mm256_xor_si256(_mm256_cmpeq_epi32(T, zero), _mm256_set1_epi32(-1));
  const __m256i unit = _mm256_add_epi32(E, _mm256_set1_epi32(127 - kUnitExp));
  const __m256i unit_ok =
      _mm256_and_si256(_mm256_cmpgt_epi32(unit, zero), _mm256_cmpgt_epi32(_mm256_set1_epi32(224), unit));
  const __m256i t_zero_or_unit_ok = _mm256_or_si256(_mm256_cmpeq_epi32(T, zero), unit_ok);
  const __m256i ok = _mm256_andnot_si256(overflow, _mm256_and_si256(acc_finite, t_zero_or_unit_ok));
  if (_mm256_movemask_ps(_mm256_castsi256_ps(ok)) == 0xff) {
    const __m256i mag = _mm256_abs_epi32(T);  // −2^31 stays 0x80000000, read unsigned below
    const __m256i high = _mm256_castps_si256(_mm256_cvtepi32_ps(_mm256_srli_epi32(mag, 8)));
    const __m256i drop = _mm256_max_epi32(_mm256_sub_epi32(_mm256_srli_epi32(high, 23), _mm256_set1_epi32(127 + 15)), zero);
    const __m256i kept = _mm256_sign_epi32(_mm256_and_si256(mag, _mm256_sllv_epi32(_mm256_set1_epi32(-1), drop)), T);
    const __m256 r = _mm256_mul_ps(_mm256_cvtepi32_ps(kept), _mm256_castsi256_ps(_mm256_slli_epi32(unit, 23)));
    return _mm256_and_ps(r, _mm256_castsi256_ps(t_nonzero));
  }
  alignas(32) float a_lane[8];
  alignas(32) std::int32_t e_lane[8], s_lane[8];
  _mm256_store_ps(a_lane, A);
  _mm256_store_si256(reinterpret_cast<__m256i*>(e_lane), E);
  _mm256_store_si256(reinterpret_cast<__m256i*>(s_lane), S);
  for (int l = 0; l < 8; ++l) a_lane[l] = finish_lane(s_lane[l], e_lane[l], a_lane[l]);
  return _mm256_load_ps(a_lane);
}

__attribute__((target("avx2"))) void chain_rows_avx2(const std::int32_t* xs, const std::int32_t* xe,
                                                      const PanelData& p, std::int64_t K, float* acc) {
  const __m256i min_e = _mm256_set1_epi32(kMinAlignExp);
  for (int half = 0; half < kLanes; half += 8) {
    const std::int32_t* ws = p.sig.data() + half;
    const std::int32_t* we = p.exp.data() + half;
    __m256 A = _mm256_loadu_ps(acc + half);
    for (std::int64_t k0 = 0; k0 < K; k0 += kBlock) {
      const std::int64_t k1 = std::min(K, k0 + kBlock);
      // The accumulator's fields, as acc_lanes() below.
      const __m256i bits = _mm256_castps_si256(A);
      const __m256i abs_bits = _mm256_and_si256(bits, _mm256_set1_epi32(0x7fffffff));
      const __m256i field1 = _mm256_max_epi32(_mm256_srli_epi32(abs_bits, 23), _mm256_set1_epi32(1));
      const __m256i a_exp = _mm256_sub_epi32(field1, _mm256_set1_epi32(127));
      const __m256i a_mag =
          _mm256_sub_epi32(abs_bits, _mm256_slli_epi32(_mm256_sub_epi32(field1, _mm256_set1_epi32(1)), 23));
      const __m256i a_finite = _mm256_cmpgt_epi32(_mm256_set1_epi32(0x7f800000), abs_bits);
      const __m256i a_zero = _mm256_cmpeq_epi32(abs_bits, _mm256_setzero_si256());
      __m256i E = _mm256_blendv_epi8(a_exp, _mm256_set1_epi32(kZeroExp), a_zero);
      for (std::int64_t k = k0; k < k1; ++k) {
        const __m256i pe = _mm256_add_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(we + k * kLanes)),
                                            _mm256_set1_epi32(xe[k]));
        E = _mm256_max_epi32(E, pe);
      }
      E = _mm256_max_epi32(E, min_e);
      __m256i S = _mm256_setzero_si256();
      for (std::int64_t k = k0; k < k1; ++k) {
        const __m256i wsig = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ws + k * kLanes));
        const __m256i wexp = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(we + k * kLanes));
        const __m256i prod = _mm256_mullo_epi32(wsig, _mm256_set1_epi32(xs[k]));
        const __m256i shift = _mm256_sub_epi32(_mm256_sub_epi32(E, _mm256_set1_epi32(xe[k])), wexp);
        const __m256i t = _mm256_srlv_epi32(_mm256_abs_epi32(prod), shift);
        S = _mm256_add_epi32(S, _mm256_sign_epi32(t, prod));
      }
      A = finish_block_avx2(A, S, E, bits, a_mag, a_exp, a_finite);
    }
    _mm256_storeu_ps(acc + half, A);
  }
}

// GCC 12's AVX-512 headers leave the pass-through operand of unmasked intrinsics undefined on
// purpose, which -Wmaybe-uninitialized reports at every use.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// The accumulator's fields at a block's start, as decode_acc() gives them: field 0 (a zero or a
// subnormal) counts as field 1 without the implicit bit, so a = max(field, 1) − 127 and
// A = |bits| − ((max(field, 1) − 1) << 23) whatever the field.
struct AccLanes {
  __m512i bits, mag, exp;
  __mmask16 nonzero, finite;
};

__attribute__((target("avx512f"))) inline AccLanes acc_lanes(__m512 A) {
  AccLanes a;
  a.bits = _mm512_castps_si512(A);
  const __m512i abs_bits = _mm512_and_si512(a.bits, _mm512_set1_epi32(0x7fffffff));
  const __m512i field1 = _mm512_max_epi32(_mm512_srli_epi32(abs_bits, 23), _mm512_set1_epi32(1));
  a.exp = _mm512_sub_epi32(field1, _mm512_set1_epi32(127));
  a.mag = _mm512_sub_epi32(abs_bits, _mm512_slli_epi32(_mm512_sub_epi32(field1, _mm512_set1_epi32(1)), 23));
  a.nonzero = _mm512_test_epi32_mask(abs_bits, abs_bits);
  a.finite = _mm512_cmplt_epu32_mask(abs_bits, _mm512_set1_epi32(0x7f800000));
  return a;
}

// The products' exponent sums e_x + e_w of `n` consecutive k (N: the count known at compile time,
// a whole block, so that the loop unrolls; 0: given at run time) folded into E by max.
template <int N>
__attribute__((target("avx512f"))) inline __m512i max_exponents(__m512i E, const std::int32_t* xe, const std::int32_t* we,
                                                                 int n) {
  const int count = N ? N : n;
#pragma GCC unroll 16
  for (int i = 0; i < count; ++i)
    E = _mm512_max_epi32(E, _mm512_add_epi32(_mm512_loadu_si512(we + i * kLanes), _mm512_set1_epi32(xe[i])));
  return E;
}

// A block's E in the lanes: the accumulator's exponent where it is non-zero, the products'
// e_x + e_w over k0..k1, at least kMinAlignExp (the accumulator's exponent is −126 or more).
__attribute__((target("avx512f"))) inline __m512i block_exponent(const AccLanes& a, const std::int32_t* xe,
                                                                  const std::int32_t* we, std::int64_t k0,
                                                                  std::int64_t k1) {
  const __m512i E = _mm512_mask_mov_epi32(_mm512_set1_epi32(kMinAlignExp), a.nonzero, a.exp);
  return k1 - k0 == kBlock ? max_exponents<kBlock>(E, xe + k0, we + k0 * kLanes, kBlock)
                           : max_exponents<0>(E, xe + k0, we + k0 * kLanes, int(k1 - k0));
}

// The block's end in the lanes, from the accumulator's term (however it was formed) and 2^(E−25)
// as a float: T = S + term, and for T ≠ 0 the result is sign(T) · trunc24(|T|) · 2^(E−25): T
// converted to FP32 rounding toward zero (exactly the sign and the truncation of |T| to a 24-bit
// significand), then multiplied by the power of two. That product is exact and normal when
// −126 ≤ E − 25 ≤ 96: 1 ≤ |trunc24(T)| ≤ 2^31 puts it in [2^−126, 2^127]. Embedded rounding, not
// the MXCSR, so nothing else changes. A block where any lane's T ≠ 0 overflows int32 or has E
// outside that range, or whose accumulator the caller did not find `acc_ok` (an infinite one),
// goes to finish_lane lane by lane (the subnormal grid, ±Inf and the model's -0 rules live there).
__attribute__((target("avx512f"))) inline __m512 end_block(__m512 A, __mmask16 acc_ok, __m512i S, __m512i term,
                                                            __m512i E, __m512 unit) {
  const __m512i zero = _mm512_setzero_si512();
  const __m512i T = _mm512_add_epi32(S, term);
  // Signed overflow: S and term of one sign, T of the other, i.e. the sign bit of (S^T) & (term^T).
  const __mmask16 overflow = _mm512_cmplt_epi32_mask(_mm512_ternarylogic_epi32(S, term, T, 0x42), zero);
  const __mmask16 t_nonzero = _mm512_test_epi32_mask(T, T);
  const __mmask16 in_range = _mm512_cmple_epu32_mask(_mm512_add_epi32(E, _mm512_set1_epi32(101)), _mm512_set1_epi32(222));
  const __m512 f = _mm512_cvt_roundepi32_ps(T, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m512 r = _mm512_mul_ps(f, unit);
  if ((acc_ok & ~overflow & (~t_nonzero | in_range)) == 0xffff) return _mm512_maskz_mov_ps(t_nonzero, r);
  alignas(64) float a_lane[kLanes];
  alignas(64) std::int32_t e_lane[kLanes], s_lane[kLanes];
  _mm512_store_ps(a_lane, A);
  _mm512_store_si512(e_lane, E);
  _mm512_store_si512(s_lane, S);
  for (int l = 0; l < kLanes; ++l) a_lane[l] = finish_lane(s_lane[l], e_lane[l], a_lane[l]);
  return _mm512_load_ps(a_lane);
}

// The integer kernel's block end: the accumulator's term A·4 >> (E − a) (an int32: A < 2^24),
// signed, and 2^(E−25) from its biased exponent E + 102.
__attribute__((target("avx512f"))) inline __m512 finish_block(__m512 A, const AccLanes& a, __m512i S, __m512i E) {
  const __m512i zero = _mm512_setzero_si512();
  const __m512i term_mag = _mm512_srlv_epi32(_mm512_slli_epi32(a.mag, kExtraBits), _mm512_sub_epi32(E, a.exp));
  const __m512i term = _mm512_mask_sub_epi32(term_mag, _mm512_cmplt_epi32_mask(a.bits, zero), zero, term_mag);
  const __m512i unit = _mm512_slli_epi32(_mm512_add_epi32(E, _mm512_set1_epi32(127 - kUnitExp)), 23);
  return end_block(A, a.finite, S, term, E, _mm512_castsi512_ps(unit));
}

// AVX-512, integer products: the 16 columns in one vector; each term is |x_sig 2^11 w_sig|
// shifted right by E − e_x − e_w (vpsrlvd: 0 past 31), signed.
__attribute__((target("avx512f"))) void chain_rows_avx512(const std::int32_t* xs, const std::int32_t* xe,
                                                          const PanelData& p, std::int64_t K, float* acc) {
  static_assert(kLanes == 16);
  const std::int32_t* ws = p.sig.data();
  const std::int32_t* we = p.exp.data();
  const __m512i zero = _mm512_setzero_si512();
  __m512 A = _mm512_loadu_ps(acc);
  for (std::int64_t k0 = 0; k0 < K; k0 += kBlock) {
    const std::int64_t k1 = std::min(K, k0 + kBlock);
    const AccLanes a = acc_lanes(A);
    const __m512i E = block_exponent(a, xe, we, k0, k1);
    __m512i S = zero;
    for (std::int64_t k = k0; k < k1; ++k) {
      const __m512i prod = _mm512_mullo_epi32(_mm512_loadu_si512(ws + k * kLanes), _mm512_set1_epi32(xs[k]));
      const __m512i shift =
          _mm512_sub_epi32(_mm512_sub_epi32(E, _mm512_set1_epi32(xe[k])), _mm512_loadu_si512(we + k * kLanes));
      const __m512i t = _mm512_srlv_epi32(_mm512_abs_epi32(prod), shift);
      const __mmask16 neg = _mm512_cmplt_epi32_mask(prod, zero);
      S = _mm512_add_epi32(S, _mm512_mask_sub_epi32(t, neg, zero, t));
    }
    A = finish_block(A, a, S, E);
  }
  _mm512_storeu_ps(acc, A);
}

// The FP32-product kernel's view of the accumulator at a block's start: its exponent
// max(field, 1) − 127 (a zero's −126 may take part in E: a zero accumulator with a non-zero
// product meets E ≥ −100, and with none T is 0 whatever E is), and whether finish_block_fp may
// end the block in the lanes: a finite accumulator that is zero or at least 2^−101.
struct AccExp {
  __m512i exp;
  __mmask16 vector_ok;
};

__attribute__((target("avx512f"))) inline AccExp acc_exp_lanes(__m512 A) {
  const __m512i abs_bits = _mm512_and_si512(_mm512_castps_si512(A), _mm512_set1_epi32(0x7fffffff));
  const __m512i field1 = _mm512_max_epi32(_mm512_srli_epi32(abs_bits, 23), _mm512_set1_epi32(1));
  const __mmask16 finite = _mm512_cmplt_epu32_mask(abs_bits, _mm512_set1_epi32(0x7f800000));
  const __mmask16 tiny = _mm512_mask_cmplt_epu32_mask(_mm512_test_epi32_mask(abs_bits, abs_bits), abs_bits,
                                                      _mm512_set1_epi32((127 - 101) << 23));
  return {_mm512_sub_epi32(field1, _mm512_set1_epi32(127)), __mmask16(finite & ~tiny)};
}

// The two halves' maximum (the rotation puts it in both) sign-extended from the high half, and the
// accumulator's exponent.
__attribute__((target("avx512f,avx512bw"))) inline __m512i fold_exponent_pairs(const AccExp& a, __m512i E16) {
  const __m512i E = _mm512_srai_epi32(_mm512_max_epi16(E16, _mm512_ror_epi32(E16, 16)), 16);
  return _mm512_max_epi32(E, a.exp);
}

// The FP32-product kernel's block end. The accumulator's term sign·trunc(|A|·2^(25−E)) is formed
// as the products' terms are: A times the power of two, then the truncating conversion. While
// −101 ≤ E ≤ 121 both 2^(25−E) and 2^(E−25) are normal floats, and |A|·2^(25−E) < 2^26 is
// exact wherever it is normal (A has 24 bits; a subnormal A scaled by 2^(25−E) ≥ 1 lands on its
// grid) and below 1 where it is not, so it truncates to 0 as the shifted magnitude does. Past
// 121 the term is still exact (E ≤ 127), only 2^(E−25) is not normal. Below −101 every product
// is zero (a non-zero one puts E at −100 or above), so the accumulator sets E, and A is zero
// (T = 0 with the scale clamped, `D`) or tiny, which acc_exp_lanes leaves to finish_lane. The
// rest as end_block.
__attribute__((target("avx512f"))) inline __m512 finish_block_fp(__m512 A, __mmask16 vector_ok, __m512i S, __m512i E,
                                                                  __m512i scale_bits) {
  const __m512i scale = _mm512_add_epi32(scale_bits, _mm512_set1_epi32(127 << 23));
  const __m512i term = _mm512_cvttps_epi32(_mm512_mul_ps(A, _mm512_castsi512_ps(scale)));
  // 2^(E−25): its field 127 + E − 25 is 254 less the field of 2^(25−E).
  const __m512i unit = _mm512_sub_epi32(_mm512_set1_epi32(254 << 23), scale);
  return end_block(A, vector_ok, S, term, E, _mm512_castsi512_ps(unit));
}

// One block's terms of R rows into S: each sign·trunc(|x w| 2^D), D = 25 − E per row and lane
// (`scale_bits` = D << 23). x·w is exact in FP32 and so is its scaling by 2^D; where D ≥ 0
// (`by_exponent`) the scaling is an integer add to the exponent field, since x·w·2^D then stays
// a normal float (x·w ≥ 2^−100 and < 2^(E+2)) and a zero product becomes 2^(D−127) < 1, which
// truncates to 0 as the product would: one multiply, one add and one truncating conversion
// (vcvttps2dq rounds toward zero, the sign kept) for 16 products. Otherwise (E > 25, values of
// 2^25 and more) the power of two is multiplied in.
template <int R, bool by_exponent>
__attribute__((target("avx512f,avx512bw"))) inline void block_terms(const float* xv, std::int64_t K, std::int64_t k0,
                                                                     const float* wv, const __m512i* scale_bits,
                                                                     __m512i* S) {
  const __m512i one = _mm512_set1_epi32(127 << 23);
#pragma GCC unroll 16
  for (int i = 0; i < kBlock; ++i) {
    const __m512 w = _mm512_loadu_ps(wv + (k0 + i) * kLanes);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 prod = _mm512_mul_ps(_mm512_set1_ps(xv[r * K + k0 + i]), w);
      const __m512 scaled =
          by_exponent ? _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(prod), scale_bits[r]))
                      : _mm512_mul_ps(prod, _mm512_castsi512_ps(_mm512_add_epi32(scale_bits[r], one)));
      S[r] = _mm512_add_epi32(S[r], _mm512_cvttps_epi32(scaled));
      // GCC would otherwise reassociate the sum into a tree over all 16 k's terms, which
      // spills them; the running sum is the order the registers allow.
      asm("" : "+v"(S[r]));
    }
  }
}

// AVX-512, FP32 products (only where fp_products_exact holds for the whole product), R rows of A
// at once against one panel, K a whole number of blocks, each block's terms by block_terms: four
// vector operations for 16 products where the integer kernel needs about ten. A term below 1
// truncates to 0 however its tiny value rounds. E < −101 (D = 126 or more) happens only where
// every product is zero: D is clamped there, so that a zero stays below 1. A block's E takes two k a vector: the
// exponent sums in 16-bit lanes (saturating, so that two zeros' −20000 + −20000 stays far below
// every real sum), even k in the low and odd k in the high half of each 32-bit lane. Each W
// vector loaded serves R rows, and their chains are independent, so one row's block finish (a
// long dependent sequence from the accumulator to the next block's E) overlaps the others'
// products.
template <int R>
__attribute__((target("avx512f,avx512bw"))) void chain_rows_avx512_fp_rows(const float* xv, const std::int32_t* xe_pairs,
                                                                            const PanelData& p, std::int64_t K,
                                                                            float* acc /* [R][kLanes] */) {
  const float* wv = p.val.data();
  const std::int16_t* we16 = p.exp16.data();
  const std::int64_t half = K / 2;
  __m512 A[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) A[r] = _mm512_loadu_ps(acc + r * kLanes);
  for (std::int64_t k0 = 0; k0 + kBlock <= K; k0 += kBlock) {
    __m512i E16[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) E16[r] = _mm512_set1_epi16(std::int16_t(kMinAlignExp));
#pragma GCC unroll 8
    for (int q = 0; q < kBlock / 2; ++q) {
      const __m512i w = _mm512_loadu_si512(we16 + (k0 / 2 + q) * 2 * kLanes);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
        E16[r] = _mm512_max_epi16(E16[r], _mm512_adds_epi16(w, _mm512_set1_epi32(xe_pairs[r * half + k0 / 2 + q])));
    }
    __m512i scale_bits[R], E[R], S[R];
    AccExp a[R];
    __mmask16 large = 0;
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      a[r] = acc_exp_lanes(A[r]);
      E[r] = fold_exponent_pairs(a[r], E16[r]);
      const __m512i D = _mm512_sub_epi32(_mm512_set1_epi32(kUnitExp), _mm512_max_epi32(E[r], _mm512_set1_epi32(-101)));
      large |= _mm512_cmplt_epi32_mask(D, _mm512_setzero_si512());
      scale_bits[r] = _mm512_slli_epi32(D, 23);
      S[r] = _mm512_setzero_si512();
    }
    if (large == 0)
      block_terms<R, true>(xv, K, k0, wv, scale_bits, S);
    else
      block_terms<R, false>(xv, K, k0, wv, scale_bits, S);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) A[r] = finish_block_fp(A[r], a[r].vector_ok, S[r], E[r], scale_bits[r]);
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) _mm512_storeu_ps(acc + r * kLanes, A[r]);
}

// The FP32-product kernel's operands decoded in the vector unit, 32 BF16 values at a time: a
// value is its bit pattern shifted up (a non-finite one as 0, as decode()), an exponent an int16
// (kZeroExp for a zero or non-finite value; a subnormal's is −126, field 0 counting as 1).
__attribute__((target("avx512f,avx512bw"))) inline __m512i exponents16(__m512i b) {
  const __m512i field = _mm512_and_si512(_mm512_srli_epi16(b, 7), _mm512_set1_epi16(0xff));
  const __mmask32 nonzero =
      _mm512_cmpneq_epi16_mask(field, _mm512_set1_epi16(0xff)) & _mm512_test_epi16_mask(b, _mm512_set1_epi16(0x7fff));
  const __m512i e = _mm512_sub_epi16(_mm512_max_epi16(field, _mm512_set1_epi16(1)), _mm512_set1_epi16(127));
  return _mm512_mask_blend_epi16(nonzero, _mm512_set1_epi16(std::int16_t(kZeroExp)), e);
}

// The first n (up to 32) lanes.
inline __mmask32 first_lanes(std::int64_t n) { return n >= 32 ? ~__mmask32(0) : __mmask32((1u << n) - 1); }

// FP32 values whose top halves are BF16 patterns, with every non-finite one made 0.
__attribute__((target("avx512f"))) inline __m512 finite_values(__m512i v) {
  const __m512i inf = _mm512_set1_epi32(0x7f800000);
  return _mm512_castsi512_ps(_mm512_maskz_mov_epi32(_mm512_cmpneq_epi32_mask(_mm512_and_si512(v, inf), inf), v));
}

// A's rows r0..r0+nr, padded to Kp: values [nr][Kp] and exponents in k order as int16 pairs
// [nr][Kp/2].
__attribute__((target("avx512f,avx512bw"))) void decode_rows_fp(CBf16Mat A, std::int64_t r0, std::int64_t nr,
                                                                 std::int64_t Kp, RowData& d) {
  const std::int64_t K = A.cols;
  d.val.resize(std::size_t(nr * Kp));
  d.exp_pairs.resize(std::size_t(nr * Kp / 2));
  for (std::int64_t i = 0; i < nr; ++i) {
    const Bf16* src = A.row(r0 + i);
    float* val = d.val.data() + i * Kp;
    auto* e16 = reinterpret_cast<std::int16_t*>(d.exp_pairs.data() + i * Kp / 2);
    for (std::int64_t k = 0; k < Kp; k += 32) {
      // Past K the lanes read as zeros, which the padding is.
      const __mmask32 m = first_lanes(Kp - k);
      const __m512i b = _mm512_maskz_loadu_epi16(first_lanes(K - k), src + k);
      _mm512_mask_storeu_epi16(e16 + k, m, exponents16(b));
      const __m512i lo = _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(b)), 16);
      const __m512i hi = _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(b, 1)), 16);
      _mm512_mask_storeu_ps(val + k, __mmask16(m), finite_values(lo));
      _mm512_mask_storeu_ps(val + k + 16, __mmask16(m >> 16), finite_values(hi));
    }
  }
}

// W's rows n0..n0+nn (up to 16) as a panel padded to Kp: k's pair q of row j is one 32-bit
// gather lane, whose int16 halves are then already the exponent layout [Kp/2][kLanes][2];
// missing columns are zeros. A pair that K cuts (odd K) is read value by value, so that nothing
// past a row is read. Needs 15·ld to fit an int32 (the gather's indices).
__attribute__((target("avx512f,avx512bw"))) void decode_panel_fp(CBf16Mat W, std::int64_t n0, std::int64_t nn,
                                                                  std::int64_t Kp, PanelData& d) {
  const std::int64_t K = W.cols;
  d.val.resize(std::size_t(Kp * kLanes));
  d.exp16.resize(std::size_t(Kp * kLanes));
  const __mmask16 cols = __mmask16(first_lanes(nn));
  const __m512i index = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32(std::int32_t(W.ld)));
  const auto* base = reinterpret_cast<const char*>(W.row(n0));
  for (std::int64_t q = 0; q < Kp / 2; ++q) {
    __m512i b = _mm512_setzero_si512();
    if (2 * q + 1 < K) {
      b = _mm512_mask_i32gather_epi32(b, cols, index, base + 4 * q, 2);
    } else if (2 * q < K) {
      alignas(64) std::uint32_t last[kLanes] = {};
      for (std::int64_t j = 0; j < nn; ++j) last[j] = W.at(n0 + j, 2 * q).bits;
      b = _mm512_load_si512(last);
    }
    _mm512_storeu_si512(d.exp16.data() + q * 2 * kLanes, exponents16(b));
    _mm512_storeu_ps(d.val.data() + 2 * q * kLanes, finite_values(_mm512_slli_epi32(b, 16)));
    _mm512_storeu_ps(d.val.data() + (2 * q + 1) * kLanes,
                     finite_values(_mm512_and_si512(b, _mm512_set1_epi32(std::int32_t(0xffff0000u)))));
  }
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

std::atomic<LaneKernel> g_kernel{LaneKernel::best};

// Whether every product x·w of the two is a normal FP32 value, which x·w then is exactly (8-bit
// significands): no subnormal operand, e_x + e_w from −100 (which also keeps every non-zero
// product's E at −100 or above) to 125 (|x w| < 2^(e_x+e_w+2)).
bool fp_products_exact(const Bf16Scan& a, const Bf16Scan& w) {
  if (a.subnormal || w.subnormal) return false;
  if (a.lo > a.hi || w.lo > w.hi) return true;  // one side all zeros (or non-finite): every product is 0
  return (a.lo - 127) + (w.lo - 127) >= -100 && (a.hi - 127) + (w.hi - 127) <= 125;
}

LaneKernel resolve(LaneKernel k, bool fp_exact) {
#if defined(__x86_64__)
  if (k == LaneKernel::best)
    k = have_avx512() ? LaneKernel::avx512_fp : have_avx2() ? LaneKernel::avx2_double : LaneKernel::portable;
#else
  if (k == LaneKernel::best) k = LaneKernel::portable;
#endif
  return k == LaneKernel::avx512_fp && !fp_exact ? LaneKernel::avx512 : k;
}

// The integer kernels and the portable loop, one row.
void chain_rows(LaneKernel k, const RowData& r, std::int64_t i, const PanelData& p, std::int64_t K, float* acc) {
  const std::int32_t* xe = r.exp.data() + i * K;
#if defined(__x86_64__)
  if (k == LaneKernel::avx512) return chain_rows_avx512(r.sig.data() + i * K, xe, p, K, acc);
  if (k == LaneKernel::avx2) return chain_rows_avx2(r.sig.data() + i * K, xe, p, K, acc);
#endif
  chain_rows_portable(r.sig.data() + i * K, xe, p, K, acc);
}

// Rows i.. of the task (at most `left`) into acc [rows][kLanes]; returns how many it ran.
std::int64_t run_task_rows(LaneKernel k, const RowData& r, std::int64_t i, std::int64_t left, const PanelData& p,
                           std::int64_t K, std::int64_t Kp, float* acc) {
#if defined(__x86_64__)
  if (k == LaneKernel::avx512_fp) {
    const float* xv = r.val.data() + i * Kp;
    const std::int32_t* xe_pairs = r.exp_pairs.data() + i * (Kp / 2);
    if (left < kFpRows) {
      chain_rows_avx512_fp_rows<1>(xv, xe_pairs, p, Kp, acc);
      return 1;
    }
    chain_rows_avx512_fp_rows<kFpRows>(xv, xe_pairs, p, Kp, acc);
    return kFpRows;
  }
#endif
  chain_rows(k, r, i, p, K, acc);
  return 1;
}

}  // namespace

void decode_task_rows(LaneKernel k, CBf16Mat A, std::int64_t r0, std::int64_t nr, std::int64_t Kp,
                      [[maybe_unused]] const ExponentBytes& bytes, RowData& d) {
#if defined(__x86_64__)
  if (k == LaneKernel::avx512_fp) return decode_rows_fp(A, r0, nr, Kp, d);
  if (k == LaneKernel::avx2_double) return decode_rows_double(A, r0, nr, Kp, bytes, d);
#endif
  decode_rows(A, r0, nr, d);
}

void decode_task_panel(LaneKernel k, CBf16Mat W, std::int64_t n0, std::int64_t nn, std::int64_t Kp,
                       [[maybe_unused]] const ExponentBytes& bytes, PanelData& d) {
#if defined(__x86_64__)
  if (k == LaneKernel::avx512_fp) return decode_panel_fp(W, n0, nn, Kp, d);
  if (k == LaneKernel::avx2_double) return decode_panel_double(W, n0, nn, Kp, bytes, d);
#endif
  decode_panel(W, n0, nn, d);
}

void run_task_panel(LaneKernel k, const RowData& r, std::int64_t rows, const PanelData& p, std::int64_t K,
                    std::int64_t Kp, [[maybe_unused]] const ExponentBytes& bytes, float* acc) {
#if defined(__x86_64__)
  if (k == LaneKernel::avx2_double) return run_panel_double(r, rows, p, Kp, bytes, acc);
#endif
  for (std::int64_t i = 0; i < rows;) i += run_task_rows(k, r, i, rows - i, p, K, Kp, acc + i * kLanes);
}

LaneKernel kernel_for(CBf16Mat W, const Bf16Scan& a, const Bf16Scan& w) {
  const LaneKernel k = resolve(g_kernel.load(std::memory_order_relaxed), fp_products_exact(a, w));
  return k == LaneKernel::avx512_fp && W.ld > std::numeric_limits<std::int32_t>::max() / kLanes ? LaneKernel::avx512 : k;
}

bool lane_kernel_available(LaneKernel k) {
#if defined(__x86_64__)
  if (k == LaneKernel::avx512) return have_avx512();
  if (k == LaneKernel::avx512_fp) return have_avx512();
  if (k == LaneKernel::avx2 || k == LaneKernel::avx2_double) return have_avx2();
#else
  if (k != LaneKernel::best && k != LaneKernel::portable) return false;
#endif
  return true;
}

void set_lane_kernel(LaneKernel k) {
  if (!lane_kernel_available(k)) throw Error("tensor-core lanes: this machine has no such vector kernel");
  g_kernel.store(k);
}

namespace {

const char* kernel_text(LaneKernel k) {
  switch (k) {
    case LaneKernel::avx2: return "avx2 (integer products)";
    case LaneKernel::avx512: return "avx512 (integer products)";
    case LaneKernel::avx512_fp: return "avx512_fp (FP32 products)";
    case LaneKernel::avx2_double: return "avx2_double (one double FMA a product)";
    default: return "portable";
  }
}

}  // namespace

std::string lane_kernels_in_force() {
  const LaneKernel set = g_kernel.load(std::memory_order_relaxed);
  const LaneKernel exact = resolve(set, true), other = resolve(set, false);
  std::string text = kernel_text(exact);
  if (other != exact) text += std::string(", ") + kernel_text(other) + " where those are not all exact";
  return text;
}

LaneKernel lane_kernel_for(CBf16Mat A, CBf16Mat W) {
  return kernel_for(W, scan_bf16(A), scan_bf16(W));
}

}  // namespace psi::official::tc
