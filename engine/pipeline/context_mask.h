#pragma once
// The FLASH mask-elision check of the paper: FlashAttention kernels take no additive mask, so a
// text-context mask may be dropped only after it is verified to change nothing — every element
// finite and exactly zero (adding ±0 leaves every score as it is).
#include <string>

#include "engine/tensor.h"

namespace psi::pipeline {

struct MaskCheck {
  bool elidable = false;
  std::string reason;  // why (not), naming the first offending element
};

MaskCheck check_zero_mask(const F32Tensor& additive_mask);

}  // namespace psi::pipeline
