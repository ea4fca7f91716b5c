#pragma once
// The CPU backend's OpKernels: engine/ops on host views of the arena (the reference arithmetic).
#include "engine/backend/op_kernels.h"

namespace psi::rt {

const OpKernels& cpu_op_kernels();

}  // namespace psi::rt
