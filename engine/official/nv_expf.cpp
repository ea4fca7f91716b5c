#include "engine/official/nv_expf.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "engine/isa_dispatch.h"
#include "engine/official/sfu.h"

namespace psi::official {

namespace {

// The ex2 coefficient table of the NVIDIA SFU as recovered by envytools
// (github.com/envytools/envytools, nvhw/sfu_tab.c, sfu_ex2_tab): per 1/64 of [0, 1),
// A ≈ 2^x / 2 (26 fraction bits), B ≈ ln 2 · 2^x / 2, C ≈ ln²2 · 2^x, each chosen by the
// hardware's designers to minimise the error of the fixed-point evaluation below, not the
// mathematical values. The values are envytools', under its licence:
//
//   Copyright (C) 2015 Marcin Kościelnicki <koriakin@0x04.net>
//   All Rights Reserved.
//
//   Permission is hereby granted, free of charge, to any person obtaining a copy of this
//   software and associated documentation files (the "Software"), to deal in the Software
//   without restriction, including without limitation the rights to use, copy, modify, merge,
//   publish, distribute, sublicense, and/or sell copies of the Software, and to permit persons
//   to whom the Software is furnished to do so, subject to the following conditions:
//
//   The above copyright notice and this permission notice (including the next paragraph) shall
//   be included in all copies or substantial portions of the Software.
//
//   THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED,
//   INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR
//   PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE
//   FOR ANY CLAIM, DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR
//   OTHERWISE, ARISING FROM, OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER
//   DEALINGS IN THE SOFTWARE.
constexpr std::int64_t kEx2Table[64][3] = {
    {0x2000000, 0x58b9, 0x1ee}, {0x2059347, 0x59b0, 0x1f5}, {0x20b361b, 0x5aaa, 0x1fa}, {0x210e8a2, 0x5ba7, 0x1ff},
    {0x216ab0f, 0x5ca6, 0x206}, {0x21c7d86, 0x5da9, 0x209}, {0x2226039, 0x5eae, 0x20f}, {0x2285356, 0x5fb6, 0x214},
    {0x22e5709, 0x60c0, 0x21d}, {0x2346b7e, 0x61ce, 0x222}, {0x23a90e5, 0x62df, 0x227}, {0x240c772, 0x63f2, 0x22f},
    {0x2470f4e, 0x6509, 0x234}, {0x24d68ad, 0x6623, 0x238}, {0x253d3c0, 0x673f, 0x241}, {0x25a50b6, 0x685f, 0x247},
    {0x260dfc2, 0x6982, 0x24d}, {0x2678117, 0x6aa8, 0x254}, {0x26e34e6, 0x6bd2, 0x258}, {0x274fb67, 0x6cfe, 0x261},
    {0x27bd4c9, 0x6e2e, 0x267}, {0x282c145, 0x6f61, 0x26e}, {0x289c10b, 0x7098, 0x273}, {0x290d456, 0x71d2, 0x279},
    {0x297fb5a, 0x730f, 0x281}, {0x29f364e, 0x7450, 0x287}, {0x2a6856a, 0x7594, 0x28f}, {0x2ade8e7, 0x76dc, 0x295},
    {0x2b560fb, 0x7827, 0x29e}, {0x2bcede2, 0x7976, 0x2a5}, {0x2c48fd7, 0x7ac8, 0x2ae}, {0x2cc4710, 0x7c1f, 0x2b3},
    {0x2d413cc, 0x7d79, 0x2bb}, {0x2dbf648, 0x7ed7, 0x2c1}, {0x2e3eebe, 0x8038, 0x2cb}, {0x2ebfd6a, 0x819e, 0x2d1},
    {0x2f4228e, 0x8307, 0x2da}, {0x2fc5e67, 0x8474, 0x2e3}, {0x304b134, 0x85e5, 0x2ec}, {0x30d1b33, 0x875b, 0x2f1},
    {0x3159ca8, 0x88d4, 0x2fb}, {0x31e35d3, 0x8a51, 0x305}, {0x326e6f7, 0x8bd3, 0x30b}, {0x32fb054, 0x8d59, 0x313},
    {0x3389230, 0x8ee3, 0x31c}, {0x3418ccf, 0x9071, 0x326}, {0x34aa076, 0x9204, 0x32d}, {0x353cd6a, 0x939b, 0x336},
    {0x35d13f4, 0x9536, 0x341}, {0x3667457, 0x96d6, 0x34a}, {0x36feede, 0x987b, 0x351}, {0x37983d3, 0x9a24, 0x35a},
    {0x383337d, 0x9bd1, 0x366}, {0x38cfe27, 0x9d84, 0x36d}, {0x396e41c, 0x9f3b, 0x377}, {0x3a0e5aa, 0xa0f7, 0x380},
    {0x3ab031d, 0xa2b7, 0x38d}, {0x3b53cc1, 0xa47d, 0x395}, {0x3bf92e7, 0xa648, 0x39d}, {0x3ca05dd, 0xa817, 0x3aa},
    {0x3d495f5, 0xa9ec, 0x3b2}, {0x3df437f, 0xabc5, 0x3bf}, {0x3ea0ecc, 0xada4, 0x3c9}, {0x3f4f831, 0xaf88, 0x3d4},
};

constexpr std::uint32_t kFraction = 0x7fffff;  // float32 fraction bits
constexpr std::uint32_t kOne = 0x800000;       // the implicit bit: 1.0 with 23 fraction bits

float from_bits(std::uint32_t b) { return std::bit_cast<float>(b); }

// kEx2Table's columns apart, as the lanes gather them.
struct Ex2Columns {
  std::uint32_t a[64], b[64], c[64];
};
constexpr Ex2Columns kEx2Columns = [] {
  Ex2Columns t{};
  for (int i = 0; i < 64; ++i) {
    t.a[i] = std::uint32_t(kEx2Table[i][0]);
    t.b[i] = std::uint32_t(kEx2Table[i][1]);
    t.c[i] = std::uint32_t(kEx2Table[i][2]);
  }
  return t;
}();

// ex2_approx_ftz's steps with every branch a select: shift counts clamped to where they are
// defined and the out-of-range cases chosen afterwards.
[[gnu::always_inline]] inline float ex2_lane(float x) {
  const std::uint32_t b = std::bit_cast<std::uint32_t>(x);
  const bool negative = b >> 31;
  const int exponent = int(b >> 23 & 0xff), shift = exponent - 127;
  const std::uint32_t m = (b & kFraction) | kOne;
  std::uint32_t fixed = shift >= 0 ? m << (shift < 6 ? shift : 6) : m >> (-shift < 31 ? -shift : 31);
  fixed = -shift > 31 ? 0 : fixed;  // zeros and subnormals (and what shifts out) are 0
  std::uint32_t f = fixed & kFraction;
  const int whole = int(fixed >> 23);
  const int n = negative ? -whole - (f != 0) : whole;
  f = negative && f != 0 ? ~f & kFraction : f;
  const std::uint32_t index = f >> 17, offset = f & 0x1ffff;
  std::uint32_t square = 0;  // sfu_square, its partial products masked instead of skipped
#pragma GCC unroll 17
  for (int i = 0; i < 17; ++i) square += (offset >> (18 - i)) & (0u - (offset >> i & 1));
  square >>= 1;
  const std::uint64_t p = (std::uint64_t(kEx2Columns.a[index]) << 13) + std::uint64_t(kEx2Columns.b[index]) * offset +
                          std::uint64_t(kEx2Columns.c[index]) * square;
  std::uint32_t mantissa = std::uint32_t((p + 0x77e2) >> 15);
  const bool carry = mantissa == 2 * kOne;
  mantissa = carry ? kOne : mantissa;
  const int e = n + 127 + carry;
  std::uint32_t bits = e <= 0 ? 0u : std::uint32_t(e) << 23 | (mantissa & kFraction);
  const std::uint32_t overflow = negative ? 0u : 0x7f800000u;  // |x| ≥ 128, or ±∞
  bits = exponent == 0xff || shift >= 7 ? overflow : bits;
  bits = exponent == 0xff && (b & kFraction) ? 0x7fc00000u : bits;  // quiet_NaN()
  return from_bits(bits);
}

[[gnu::always_inline]] inline float nv_expf_lane(float x) {
  float t = std::fma(x, from_bits(0x3bbb989d), 0.5f);
  t = t > 0.0f ? t : 0.0f;  // cvt.sat; NaN to 0
  t = t < 1.0f ? t : 1.0f;
  // ⌊t·252⌋ as nv_expf_reduce takes it: the exact product is not negative, so truncation is
  // the floor (and steps in lanes, where std::floor of a double does not).
  const float j = float(12582913 + int(double(t) * 252.0));
  const float neg_k = -(j + -12583039.0f);
  float r = std::fma(x, from_bits(0x3fb8aa3b), neg_k);
  r = std::fma(x, from_bits(0x32a57060), r);
  const int k = int(j) - 12583039;
  return ex2_lane(r) * from_bits(std::uint32_t(k + 127) << 23);
}

// Run per vector level (engine/isa_dispatch.h).
struct Ex2Lanes {
  [[gnu::always_inline]] static void run(const float* x, float* y, std::int64_t n) {
    for (std::int64_t j = 0; j < n; ++j) y[j] = ex2_lane(x[j]);
  }
};

struct NvExpfLanes {
  [[gnu::always_inline]] static void run(const float* x, float* y, std::int64_t n) {
    for (std::int64_t j = 0; j < n; ++j) y[j] = nv_expf_lane(x[j]);
  }
};

}  // namespace

void ex2_approx_ftz_lanes(const float* x, float* y, std::int64_t n) { isa_dispatch<Ex2Lanes>(x, y, n); }

void nv_expf_lanes(const float* x, float* y, std::int64_t n) { isa_dispatch<NvExpfLanes>(x, y, n); }

float ex2_approx_ftz(float x) {
  const std::uint32_t b = std::bit_cast<std::uint32_t>(x);
  const bool negative = b >> 31;
  const int exponent = int(b >> 23 & 0xff);
  if (exponent == 0xff) {
    if (b & kFraction) return std::numeric_limits<float>::quiet_NaN();
    return negative ? 0.0f : std::numeric_limits<float>::infinity();
  }
  // |x| as a fixed-point number with 23 fraction bits, truncated (the change from envytools,
  // which rounds here). Zeros and subnormals are 0: the input flush.
  std::uint32_t fixed = 0;
  if (exponent != 0) {
    const int shift = exponent - 127;
    if (shift >= 7) return negative ? 0.0f : std::numeric_limits<float>::infinity();  // |x| >= 128
    const std::uint32_t m = (b & kFraction) | kOne;
    fixed = shift >= 0 ? m << shift : (-shift > 31 ? 0 : m >> -shift);
  }
  // 2^x = 2^n · 2^(f / 2^23) with f in [0, 2^23). A negative x takes n = −(int part) − 1 and
  // the fraction's ones' complement, as the hardware does (one unit of 2^−23 below the exact
  // 1 − fraction); a negative integer keeps its fraction 0.
  int n = int(fixed >> 23);
  std::uint32_t f = fixed & kFraction;
  if (negative) {
    n = -n - 1;
    if (f != 0) f = ~f & kFraction;
    else ++n;
  }
  const std::uint32_t index = f >> 17, offset = f & 0x1ffff;
  const std::int64_t* c = kEx2Table[index];
  const std::int64_t p = (c[0] << 13) + c[1] * offset + c[2] * std::int64_t(sfu_square(offset));
  std::uint32_t mantissa = std::uint32_t((p + 0x77e2) >> 15);  // 1.0 ≤ 2^fraction ≤ 2.0, 23 bits
  int e = n + 127;
  if (mantissa == 2 * kOne) {
    mantissa = kOne;
    ++e;
  }
  if (e <= 0) return 0.0f;  // the output flush
  return from_bits(std::uint32_t(e) << 23 | (mantissa & kFraction));
}

ExpfReduction nv_expf_reduce(float x) {
  const float log2e_over_252 = from_bits(0x3bbb989d), log2e_hi = from_bits(0x3fb8aa3b),
              log2e_lo = from_bits(0x32a57060);
  float t = std::fma(x, log2e_over_252, 0.5f);
  t = std::isnan(t) ? 0.0f : std::fmin(std::fmax(t, 0.0f), 1.0f);  // cvt.sat
  // fma.rm(t, 252, 12582913): the exact t·252 (a 24-bit by 8-bit product) lies in [0, 252];
  // on the float grid of [2^23, 2^24), spaced 1, rounding down is the floor.
  const float j = float(12582913.0 + std::floor(double(t) * 252.0));
  const float neg_k = -(j + -12583039.0f);
  float r = std::fma(x, log2e_hi, neg_k);
  r = std::fma(x, log2e_lo, r);
  return {r, int(j) - 12583039};
}

float nv_expf(float x, ExpModel model) {
  if (model == ExpModel::correctly_rounded)
    // e^x in extended precision (64-bit significand on x86, more elsewhere), rounded once.
    return float(std::exp(static_cast<long double>(x)));
  const ExpfReduction red = nv_expf_reduce(x);
  // j's bits shifted left by 23: the exponent field k + 127, sign and fraction 0.
  const float scale = from_bits(std::uint32_t(red.k + 127) << 23);
  return ex2_approx_ftz(red.r) * scale;
}

}  // namespace psi::official
