#include "engine/bf16_f64.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace psi {

Bf16 bf16_of_f64(double v) {
  // float(v) is nearest; it can only misplace the BF16 rounding when it lands exactly on a BF16
  // midpoint that v itself is not on: one float step toward v puts it on v's side.
  float f = float(v);
  if ((std::bit_cast<std::uint32_t>(f) & 0xffffu) == 0x8000u && double(f) != v && std::isfinite(f))
    f = std::nextafter(f, double(f) < v ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity());
  return bf16_rne(f);
}

}  // namespace psi
