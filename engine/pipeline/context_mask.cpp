#include "engine/pipeline/context_mask.h"

#include <cmath>

namespace psi::pipeline {

MaskCheck check_zero_mask(const F32Tensor& m) {
  for (std::int64_t i = 0; i < m.numel(); ++i) {
    const float v = m.data[i];
    if (!std::isfinite(v))
      return {false, "element " + std::to_string(i) + " is " + (std::isnan(v) ? "NaN" : "infinite") + ": not elidable"};
    if (v != 0.0f) return {false, "element " + std::to_string(i) + " is " + std::to_string(v) + ", not zero: not elidable"};
  }
  return {true, "all " + std::to_string(m.numel()) + " elements of the additive mask " + shape_str(m.shape) +
                    " are finite and exactly zero: elided"};
}

}  // namespace psi::pipeline
