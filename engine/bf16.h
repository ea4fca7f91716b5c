#pragma once
// The one place that defines BF16 in psi: storage bits, exact decode, float32 -> BF16
// round-to-nearest-even, ULP distance, and the float32 helpers operators use at a BF16 write
// boundary. Every other file goes through these functions; nobody shifts bits by hand.
#include <bit>
#include <cstdint>
#include <limits>

namespace psi {

struct Bf16 {
  std::uint16_t bits = 0;

  static constexpr Bf16 from_bits(std::uint16_t b) { return Bf16{b}; }
  // Every BF16 value is exactly a float32: the top 16 bits of its float32 encoding.
  constexpr float to_float() const { return std::bit_cast<float>(std::uint32_t(bits) << 16); }
  constexpr bool is_nan() const { return (bits & 0x7f80u) == 0x7f80u && (bits & 0x007fu) != 0; }
  constexpr bool is_inf() const { return (bits & 0x7fffu) == 0x7f80u; }
  constexpr bool is_finite() const { return (bits & 0x7f80u) != 0x7f80u; }
  constexpr bool is_zero() const { return (bits & 0x7fffu) == 0; }
  constexpr bool sign() const { return (bits & 0x8000u) != 0; }
  friend constexpr bool operator==(Bf16 a, Bf16 b) { return a.bits == b.bits; }  // bitwise
};
static_assert(sizeof(Bf16) == 2);

// float32 -> BF16, round to nearest, ties to even on the 16 dropped bits. Subnormals round
// like normals (BF16 has float32's exponent range); overflow rounds to +-Inf; a NaN stays a
// NaN (quietened, sign kept).
constexpr Bf16 bf16_rne(float f) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0)
    return Bf16{std::uint16_t((u >> 16) | 0x0040u)};
  std::uint32_t lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb;
  return Bf16{std::uint16_t(u >> 16)};
}


// The BF16 write boundary: the float32 value an operator hands on after storing BF16.
constexpr float bf(float f) { return bf16_rne(f).to_float(); }

// Position on the ordered line of finite BF16 values (+0 and -0 both map to 0), so that the
// distance of two values is the count of representable steps between them.
constexpr std::int32_t bf16_ordinal(Bf16 v) {
  std::int32_t mag = v.bits & 0x7fff;
  return v.sign() ? -mag : mag;
}

// ULP distance between two BF16 values: 0 for bitwise-equal values and for +0 vs -0; a NaN on
// either side gives the largest value (never "close").
constexpr std::int64_t bf16_ulp_distance(Bf16 a, Bf16 b) {
  if (a.is_nan() || b.is_nan()) return std::numeric_limits<std::int64_t>::max();
  std::int64_t d = std::int64_t(bf16_ordinal(a)) - std::int64_t(bf16_ordinal(b));
  return d < 0 ? -d : d;
}

// Unit in the last place of a finite BF16 value's binade, as a float (2^-133 for subnormals).
float bf16_ulp(Bf16 v);

}  // namespace psi
