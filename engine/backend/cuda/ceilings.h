#pragma once
// The ceilings of a CUDA device (device.h's Ceilings): copies timed with CUDA events, the
// product rate measured with cuBLAS. Needs a CUDA device.
#include "engine/backend/device.h"

namespace psi::rt {

// Times each measurement as the median of `repeats` runs after warm-ups (CUDA events).
Ceilings measure_cuda_ceilings(int device, int repeats);

}  // namespace psi::rt
