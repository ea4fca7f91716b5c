#include "engine/bf16.h"

#include <cmath>

namespace psi {

float bf16_ulp(Bf16 v) {
  int exp_field = (v.bits >> 7) & 0xff;
  // 7 fraction bits: the step is 2^(e - 127 - 7); subnormals share the smallest normal's step.
  int e = exp_field == 0 ? 1 : exp_field;
  return std::ldexp(1.0f, e - 127 - 7);
}

}  // namespace psi
