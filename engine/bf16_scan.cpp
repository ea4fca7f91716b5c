#include "engine/bf16_scan.h"

#include <algorithm>
#include <cstdint>

#include "engine/cpu_features.h"
#include "engine/parallel.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace psi {

namespace {

// One row's part of a scan: whether it is all finite, and its normal fields' range and
// subnormals folded into `s`.
bool scan_row(const Bf16* row, std::int64_t n, Bf16Scan& s) {
  bool finite = true;
  for (std::int64_t k = 0; k < n; ++k) {
    const int field = (row[k].bits >> 7) & 0xff;
    if (field == 0xff) {
      finite = false;
    } else if (field == 0) {
      s.subnormal |= (row[k].bits & 0x7f) != 0;
    } else {
      s.lo = std::min(s.lo, field);
      s.hi = std::max(s.hi, field);
    }
  }
  return finite;
}

#if defined(__x86_64__)
// scan_row 32 values at a time.
__attribute__((target("avx512f,avx512bw"))) bool scan_row_avx512(const Bf16* row, std::int64_t n, Bf16Scan& s) {
  __m512i lo = _mm512_set1_epi16(0xff), hi = _mm512_setzero_si512();
  __mmask32 nonfinite = 0, subnormal = 0;
  for (std::int64_t k = 0; k < n; k += 32) {
    const __mmask32 m = n - k >= 32 ? ~__mmask32(0) : __mmask32((1u << (n - k)) - 1);
    const __m512i b = _mm512_maskz_loadu_epi16(m, row + k);
    const __m512i field = _mm512_and_si512(_mm512_srli_epi16(b, 7), _mm512_set1_epi16(0xff));
    const __mmask32 top = _mm512_mask_cmpeq_epi16_mask(m, field, _mm512_set1_epi16(0xff));
    const __mmask32 bottom = _mm512_mask_cmpeq_epi16_mask(m, field, _mm512_setzero_si512());
    nonfinite |= top;
    subnormal |= _mm512_mask_test_epi16_mask(bottom, b, _mm512_set1_epi16(0x7f));
    const __mmask32 normal = m & ~top & ~bottom;
    lo = _mm512_mask_min_epu16(lo, normal, lo, field);
    hi = _mm512_mask_max_epu16(hi, normal, hi, field);
  }
  alignas(64) std::uint16_t lo_lane[32], hi_lane[32];
  _mm512_store_si512(lo_lane, lo);
  _mm512_store_si512(hi_lane, hi);
  for (int l = 0; l < 32; ++l) {
    // A lane that saw no normal value keeps 0xff and 0, which move neither bound.
    if (lo_lane[l] <= hi_lane[l]) {
      s.lo = std::min<int>(s.lo, lo_lane[l]);
      s.hi = std::max<int>(s.hi, hi_lane[l]);
    }
  }
  s.subnormal |= subnormal != 0;
  return nonfinite == 0;
}

// scan_row 16 values at a time; a row's last values read through a copy padded with zeros
// (which are neither normal nor subnormal), so nothing past the row is read.
__attribute__((target("avx2"))) bool scan_row_avx2(const Bf16* row, std::int64_t n, Bf16Scan& s) {
  const __m256i ff = _mm256_set1_epi16(0xff);
  __m256i lo = ff, hi = _mm256_setzero_si256(), nonfinite = hi, subnormal = hi;
  for (std::int64_t k = 0; k < n; k += 16) {
    __m256i b;
    if (n - k >= 16) {
      b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + k));
    } else {
      alignas(32) std::uint16_t part[16] = {};
      for (std::int64_t i = k; i < n; ++i) part[i - k] = row[i].bits;
      b = _mm256_load_si256(reinterpret_cast<const __m256i*>(part));
    }
    const __m256i field = _mm256_and_si256(_mm256_srli_epi16(b, 7), ff);
    const __m256i top = _mm256_cmpeq_epi16(field, ff);
    const __m256i bottom = _mm256_cmpeq_epi16(field, _mm256_setzero_si256());
    nonfinite = _mm256_or_si256(nonfinite, top);
    const __m256i no_mantissa = _mm256_cmpeq_epi16(_mm256_and_si256(b, _mm256_set1_epi16(0x7f)), _mm256_setzero_si256());
    subnormal = _mm256_or_si256(subnormal, _mm256_andnot_si256(no_mantissa, bottom));
    // A field of 0 or 0xff moves neither bound: 0xff for the minimum, 0 for the maximum.
    lo = _mm256_min_epu16(lo, _mm256_or_si256(field, _mm256_and_si256(bottom, ff)));
    hi = _mm256_max_epu16(hi, _mm256_andnot_si256(top, field));
  }
  alignas(32) std::uint16_t lo_lane[16], hi_lane[16];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lo_lane), lo);
  _mm256_store_si256(reinterpret_cast<__m256i*>(hi_lane), hi);
  for (int l = 0; l < 16; ++l) {
    if (lo_lane[l] <= hi_lane[l]) {
      s.lo = std::min<int>(s.lo, lo_lane[l]);
      s.hi = std::max<int>(s.hi, hi_lane[l]);
    }
  }
  s.subnormal |= !_mm256_testz_si256(subnormal, subnormal);
  return _mm256_testz_si256(nonfinite, nonfinite);
}
#endif

}  // namespace

bool Bf16Scan::all_finite() const {
  return std::all_of(finite.begin(), finite.end(), [](char f) { return f != 0; });
}

Bf16Scan scan_bf16(CBf16Mat M) {
  Bf16Scan s;
  s.finite.resize(std::size_t(M.rows));
  constexpr std::int64_t kRowsPerTask = 64;
  std::vector<Bf16Scan> parts(std::size_t((M.rows + kRowsPerTask - 1) / kRowsPerTask));
  [[maybe_unused]] const Isa level = active_isa();
  parallel_for(std::int64_t(parts.size()), [&](std::int64_t t) {
    Bf16Scan& part = parts[std::size_t(t)];
    for (std::int64_t r = t * kRowsPerTask; r < std::min(M.rows, (t + 1) * kRowsPerTask); ++r) {
#if defined(__x86_64__)
      if (level == Isa::avx512) {
        s.finite[std::size_t(r)] = scan_row_avx512(M.row(r), M.cols, part);
        continue;
      }
      if (level == Isa::avx2) {
        s.finite[std::size_t(r)] = scan_row_avx2(M.row(r), M.cols, part);
        continue;
      }
#endif
      s.finite[std::size_t(r)] = scan_row(M.row(r), M.cols, part);
    }
  });
  for (const Bf16Scan& part : parts) {
    s.lo = std::min(s.lo, part.lo);
    s.hi = std::max(s.hi, part.hi);
    s.subnormal |= part.subnormal;
  }
  return s;
}

// A non-zero BF16 value is m·2^(f−134), m < 2^8 an integer and f its field (a subnormal's 0
// counted as 1), so a product is m·2^(fa+fw−268) with m < 2^16: an FP32 value when
// fa+fw−268 ≥ −149 (FP32's finest step), and finite when fa+fw ≤ 380 (m·2^112 with m ≤ 255²
// stays below FP32's largest, (2^24−1)·2^104).
bool products_exact_in_fp32(const Bf16Scan& a, const Bf16Scan& w) {
  if (!a.all_finite() || !w.all_finite()) return false;
  const auto zeros = [](const Bf16Scan& s) { return s.lo > s.hi && !s.subnormal; };
  if (zeros(a) || zeros(w)) return true;
  const auto lo = [](const Bf16Scan& s) { return s.subnormal ? 1 : s.lo; };
  const auto hi = [](const Bf16Scan& s) { return s.lo <= s.hi ? s.hi : 1; };
  return lo(a) + lo(w) >= 119 && hi(a) + hi(w) <= 380;
}

}  // namespace psi
