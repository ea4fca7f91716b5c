#pragma once
// A finite BF16 value as an integer significand times a power of two. The exact oracle works
// on these integers: products of two BF16 values are then exact integer products, and a sum of
// them is an exact integer sum at a common scale.
#include <cstdint>

#include "engine/bf16.h"

namespace psi::oracle {

// value = m * 2^e with |m| <= 255 and e in [kMinExp, kMaxExp]. Subnormals use e = kMinExp
// (they are multiples of 2^-133); zeros have m = 0.
struct Dyadic {
  std::int32_t m = 0;
  std::int32_t e = 0;
};

inline constexpr int kMinExp = -133;  // 2^-133: the smallest BF16 subnormal step
inline constexpr int kMaxExp = 120;   // 255 * 2^120: the largest finite BF16

// Throws psi::Error for Inf and NaN, which have no exact value; `what` names the operand in
// that message.
Dyadic to_dyadic(Bf16 v, const char* what = "operand");

}  // namespace psi::oracle
