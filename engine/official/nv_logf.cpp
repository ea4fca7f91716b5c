#include "engine/official/nv_logf.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>

#include "engine/official/sfu.h"

namespace psi::official {

namespace {

// The lg2 coefficient table of the NVIDIA SFU as recovered by envytools
// (github.com/envytools/envytools, nvhw/sfu_tab.c, sfu_lg2_tab): per 1/64 of [1, 2),
// A ≈ log2(x) (26 fraction bits), B ≈ log2(e)/x/2, C ≈ −log2(e)/x² (negative), tuned by the
// hardware's designers for the fixed-point evaluation below. The values are envytools', under
// its licence:
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
constexpr std::int64_t kLg2Table[64][3] = {
    {0x0000004, 0xb8a8, -0x2d7}, {0x016e797, 0xb5d1, -0x2c1}, {0x02d75ad, 0xb310, -0x2ad}, {0x043ace7, 0xb064, -0x299},
    {0x0598fe2, 0xadcc, -0x286}, {0x06f210f, 0xab47, -0x273}, {0x08462c9, 0xa8d5, -0x262}, {0x0995750, 0xa674, -0x250},
    {0x0ae00d8, 0xa424, -0x240}, {0x0c26162, 0xa1e4, -0x22f}, {0x0d67af5, 0x9fb4, -0x220}, {0x0ea4f76, 0x9d93, -0x212},
    {0x0fde0b9, 0x9b81, -0x206}, {0x111307c, 0x997c, -0x1f8}, {0x124407c, 0x9784, -0x1eb}, {0x1371251, 0x9599, -0x1df},
    {0x149a786, 0x93ba, -0x1d2}, {0x15c01a8, 0x91e7, -0x1c7}, {0x16e2222, 0x9020, -0x1bd}, {0x1800a59, 0x8e63, -0x1b1},
    {0x191bbac, 0x8cb2, -0x1a9}, {0x1a33760, 0x8b0a, -0x19e}, {0x1b47ebe, 0x896c, -0x194}, {0x1c592fb, 0x87d8, -0x18c},
    {0x1d6753f, 0x864c, -0x181}, {0x1e726aa, 0x84ca, -0x179}, {0x1f7a857, 0x8350, -0x170}, {0x207fb52, 0x81df, -0x169},
    {0x218209f, 0x8076, -0x162}, {0x2281942, 0x7f14, -0x15a}, {0x237e627, 0x7dba, -0x153}, {0x247883b, 0x7c67, -0x14b},
    {0x257006a, 0x7b1c, -0x146}, {0x2664f8d, 0x79d7, -0x13f}, {0x2757682, 0x7898, -0x137}, {0x2847614, 0x7761, -0x133},
    {0x2934f0d, 0x762f, -0x12c}, {0x2a20233, 0x7503, -0x125}, {0x2b0904a, 0x73de, -0x121}, {0x2befa00, 0x72be, -0x11b},
    {0x2cd4011, 0x71a3, -0x114}, {0x2db632e, 0x708e, -0x10f}, {0x2e963fd, 0x6f7e, -0x10a}, {0x2f7431d, 0x6e74, -0x106},
    {0x305013a, 0x6d6e, -0x101}, {0x3129eee, 0x6c6d, -0x0fd}, {0x3201cc6, 0x6b71, -0x0f9}, {0x32d7b5d, 0x6a79, -0x0f4},
    {0x33abb41, 0x6985, -0x0ee}, {0x347dd00, 0x6896, -0x0ea}, {0x354e121, 0x67ac, -0x0e8}, {0x361c823, 0x66c5, -0x0e3},
    {0x36e9293, 0x65e2, -0x0df}, {0x37b40e4, 0x6503, -0x0db}, {0x387d398, 0x6428, -0x0d8}, {0x3944b1e, 0x6350, -0x0d3},
    {0x3a0a7ec, 0x627d, -0x0d1}, {0x3acea7a, 0x61ac, -0x0cc}, {0x3b91337, 0x60df, -0x0c9}, {0x3c52285, 0x6016, -0x0c7},
    {0x3d118da, 0x5f4f, -0x0c3}, {0x3dcf690, 0x5e8c, -0x0c0}, {0x3e8bc12, 0x5dcc, -0x0bd}, {0x3f469c1, 0x5d0f, -0x0ba},
};

constexpr std::uint32_t kFraction = 0x7fffff;
constexpr std::uint32_t kOne = 0x800000;
constexpr float kInf = std::numeric_limits<float>::infinity();

float from_bits(std::uint32_t b) { return std::bit_cast<float>(b); }
std::uint32_t to_bits(float f) { return std::bit_cast<std::uint32_t>(f); }

}  // namespace

float lg2_approx(float x) {
  const std::uint32_t b = to_bits(x);
  const int exponent = int(b >> 23 & 0xff);
  const std::uint32_t fraction = b & kFraction;
  if (exponent == 0) return -kInf;  // zeros, and subnormals as the model flushes them
  if (b >> 31) return std::numeric_limits<float>::quiet_NaN();
  if (exponent == 0xff) return fraction ? std::numeric_limits<float>::quiet_NaN() : kInf;
  // log2 of the significand in fixed point with 36 fraction bits, then the exponent as the
  // integer part: the result is res / 2^36.
  std::int64_t res = 0;
  if (fraction != 0 || exponent != 127) {
    const std::uint32_t index = fraction >> 17, offset = fraction & 0x1ffff;
    const std::int64_t* c = kLg2Table[index];
    res = ((c[0] << 12) + c[1] * offset + c[2] * std::int64_t(sfu_square(offset)) * 2 + 0x3345) >> 2;
  }
  res += std::int64_t(exponent - 127) * (std::int64_t(1) << 36);
  std::uint32_t sign = 0;
  if (res < 0) {
    sign = 1;
    res = ~res;  // the ones' complement: the magnitude one unit of 2^−36 short, as the hardware
  }
  if (res == 0) return 0.0f;
  // Normalised by truncation: the leading bit to position 42 (2^6 · 2^36), 23 bits kept below it.
  int e = 127 + 6;
  while (!(res & (std::int64_t(1) << 42))) {
    res <<= 1;
    --e;
  }
  const std::uint32_t mantissa = std::uint32_t(res >> 19) - kOne;
  return from_bits(sign << 31 | std::uint32_t(e) << 23 | mantissa);
}

float nv_logf(float x) {
  float xs = x, i = 0.0f;
  if (x < from_bits(0x00800000)) {  // below the smallest normal (negatives too): scale by 2^23
    xs = x * from_bits(0x4b000000);
    i = -23.0f;
  }
  const std::uint32_t b = to_bits(xs);
  const std::uint32_t e = (b - 0x3f2aaaabu) & 0xff800000u;
  const float m = from_bits(b - e);
  const float n = std::fma(float(std::int32_t(e)), from_bits(0x34000000), i);
  const float f = m - 1.0f;
  float p = std::fma(from_bits(0xbe055027), f, from_bits(0x3e1039f6));
  for (const std::uint32_t c : {0xbdf8cdccu, 0x3e0f2955u, 0xbe2ad8b9u, 0x3e4ced0bu, 0xbe7fff22u, 0x3eaaaa78u})
    p = std::fma(p, f, from_bits(c));
  p = std::fma(p, f, -0.5f);
  const float pf = p * f;
  float r = std::fma(pf, f, f);
  r = std::fma(n, from_bits(0x3f317218), r);
  if (b >= 0x7f800000u) r = std::fma(xs, kInf, kInf);  // +∞ stays, NaN and negatives give NaN
  if (xs == 0.0f) r = -kInf;
  return r;
}

}  // namespace psi::official
