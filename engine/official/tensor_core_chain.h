#pragma once
// Internal to engine/official/tensor_core*.cpp: the pieces of one block FMA (tensor_core.h's
// model) that the defining chain, dot(), and the lane kernels' block finish share, so that
// both are the same arithmetic by construction.
#include <algorithm>
#include <bit>
#include <cstdint>

#include "engine/bf16.h"

namespace psi::official::tc {
// A zero operand's exponent: far enough below every real one that a product holding it never
// sets E, and its shift saturates (its significand is 0 anyway).
constexpr int kZeroExp = -20000;
constexpr int kExtraBits = 2;      // alignment bits below the FP32 fraction
constexpr int kProductShift = 11;  // M_x M_w < 2^16 sits at 2^(e_x+e_w-14); 25 - 14 = 11
constexpr int kUnitExp = 25;       // T counts units of 2^(E-25): 23 fraction bits + 2 extra

struct Decoded {
  int sig;  // signed significand, 0 for a zero
  int exp;  // kZeroExp for a zero
};

// Finite BF16 only.
inline Decoded decode(Bf16 v) {
  const int field = (v.bits >> 7) & 0xff, mant = v.bits & 0x7f;
  const int m = field ? (0x80 | mant) : mant;
  if (m == 0) return {0, kZeroExp};
  return {v.sign() ? -m : m, field ? field - 127 : -126};
}

// The accumulator's magnitude A, exponent a and sign; a finite float.
struct Acc {
  std::int64_t mag;
  int exp;
  bool neg;
};

inline Acc decode_acc(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const int field = int((u >> 23) & 0xff);
  const std::int64_t m = u & 0x7fffff;
  return {field ? (m | 0x800000) : m, field ? field - 127 : -126, (u >> 31) != 0};
}

// T * 2^(E-25) truncated toward zero to FP32 (the block's normalisation); `dropped` receives
// the count of low bits of |T| that did not fit. The float is assembled from its fields.
inline float normalize(std::int64_t T, int E, int* dropped) {
  if (dropped) *dropped = 0;
  if (T == 0) return 0.0f;
  const std::uint32_t sign = T < 0 ? 0x80000000u : 0u;
  const std::uint64_t mag = T < 0 ? std::uint64_t(-T) : std::uint64_t(T);
  const int unit = E - kUnitExp;
  const int width = int(std::bit_width(mag));
  const int lead = unit + width - 1;
  if (lead >= 128) return std::bit_cast<float>(sign | 0x7f800000u);
  std::uint32_t bits;
  if (lead >= -126) {
    // 24 significant bits; the implicit one is masked off by the exponent field's addition.
    const std::uint64_t sig = width > 24 ? mag >> (width - 24) : mag << (24 - width);
    if (dropped) *dropped = std::max(0, width - 24);
    bits = (std::uint32_t(lead + 127) << 23) + (std::uint32_t(sig) & 0x7fffffu);
  } else {
    // Subnormal: the grid is 2^-149.
    const int s = unit + 149;
    if (s >= 0) {
      bits = std::uint32_t(mag << s);
    } else {
      if (dropped) *dropped = std::min(-s, width);
      bits = -s >= 64 ? 0u : std::uint32_t(mag >> -s);
    }
  }
  return std::bit_cast<float>(sign | bits);
}

inline std::int64_t shifted(std::int64_t mag, int shift) { return shift >= 63 ? 0 : mag >> shift; }

// The accumulator's term in a block aligned to E: its magnitude with the extra bits, shifted
// right (truncated) by E - a.exp, signed. `truncated` counts it when bits were lost (a trace).
inline std::int64_t acc_term(const Acc& a, int E, int* truncated) {
  const std::int64_t mag = a.mag << kExtraBits;
  const int shift = E - a.exp;
  const std::int64_t t = shifted(mag, shift);
  if (truncated) *truncated += (t << std::min(shift, 62)) != mag;
  return a.neg ? -t : t;
}

}  // namespace psi::official::tc
