#pragma once
// One Linear over whole tensors on a backend: y = x·Wᵀ (+ b) as ONE product, the way the
// official nn.Linear runs it (no weight tiles, no row tiles). The operands are copied into a
// runtime's arena (pinned host buffers, the runtime's copy and compute streams), the backend's
// OpKernels::linear runs once, and y is copied back. On the CPU backend this is ops::linear;
// on CUDA it is the cuBLASLt product set up as PyTorch sets up nn.Linear, which is what the
// projection probes compare element for element with the recorded official outputs.
#include <string>

#include "engine/ops/gemm.h"
#include "engine/tensor.h"

namespace psi::rt {

struct WholeLinear {
  Bf16Tensor y;
  std::string backend;  // the backend that ran it ("cpu" or "cuda")
};

// x [..., K], W [N, K], b [N] or null -> y [..., N]. psi::Error on shapes that do not fit.
WholeLinear whole_linear(const std::string& backend, const Bf16Tensor& x, const Bf16Tensor& W, const Bf16Tensor* b,
                         psi::BiasRule rule, ops::Product product = ops::Product::psi_f32);

}  // namespace psi::rt
