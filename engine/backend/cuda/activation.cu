// The activation family's OpKernels (ops/activation.h): one thread per element, the
// element_math.h formula.
#include "engine/backend/cuda/kernel_common.cuh"

namespace psi::rt::cuda {

namespace {

struct Gelu {
  Mat<u16> x;
  __device__ void operator()(std::int64_t r, std::int64_t c) const { x.at(r, c) = em::gelu_tanh(x.at(r, c)); }
};

}  // namespace

void CudaKernels::gelu_tanh(const KernelContext& k, const MatRef& x) const {
  launch_each("gelu_tanh", stream_of(k), x.rows, x.cols, Gelu{mat<u16>(k, x, "gelu_tanh")});
}

}  // namespace psi::rt::cuda
