// The adaln family's OpKernels (ops/adaln.h): modulation values, modulation, gated and plain
// residual adds; one thread per element, the element_math.h formula.
#include "engine/backend/cuda/kernel_common.cuh"

namespace psi::rt::cuda {

namespace {

struct AdaValue {
  Mat<const u16> table;
  Mat<u16> dst;
  __device__ void operator()(std::int64_t r, std::int64_t c) const {
    dst.at(r, c) = em::ada_value(table.at(0, c), dst.at(r, c));
  }
};

struct Modulate {
  Mat<const u16> x, scale, shift;
  Mat<u16> y;
  __device__ void operator()(std::int64_t r, std::int64_t c) const {
    y.at(r, c) = em::modulate(x.at(r, c), scale.at(scale.rows == 1 ? 0 : r, c), shift.at(shift.rows == 1 ? 0 : r, c));
  }
};

struct GatedResidual {
  Mat<u16> x;
  Mat<const u16> y, g;
  __device__ void operator()(std::int64_t r, std::int64_t c) const {
    x.at(r, c) = em::gated_residual(x.at(r, c), y.at(r, c), g.at(g.rows == 1 ? 0 : r, c));
  }
};

struct Residual {
  Mat<u16> x;
  Mat<const u16> y;
  __device__ void operator()(std::int64_t r, std::int64_t c) const { x.at(r, c) = em::residual(x.at(r, c), y.at(r, c)); }
};

// A modulation (scale, shift, gate): [1, cols] (broadcast) or [rows, cols] of the input.
void check_mod(const MatRef& m, const MatRef& x, const char* what) {
  if (m.cols != x.cols || (m.rows != 1 && m.rows != x.rows))
    fail(std::string(what) + ": modulation " + dims(m) + " for an input " + dims(x));
}

}  // namespace

void CudaKernels::ada_value(const KernelContext& k, const MatRef& table_row, const MatRef& dst) const {
  if (table_row.rows < 1 || table_row.cols != dst.cols)
    fail("ada_value: table row " + dims(table_row) + " for values " + dims(dst));
  launch_each("ada_value", stream_of(k), dst.rows, dst.cols,
              AdaValue{mat<const u16>(k, table_row, "ada_value table"), mat<u16>(k, dst, "ada_value dst")});
}

void CudaKernels::modulate(const KernelContext& k, const MatRef& x, const MatRef& scale, const MatRef& shift,
                           const MatRef& y) const {
  check_mod(scale, x, "modulate scale");
  check_mod(shift, x, "modulate shift");
  if (y.rows != x.rows || y.cols != x.cols) fail("modulate: x " + dims(x) + ", y " + dims(y));
  launch_each("modulate", stream_of(k), x.rows, x.cols,
              Modulate{mat<const u16>(k, x, "modulate x"), mat<const u16>(k, scale, "modulate scale"),
                       mat<const u16>(k, shift, "modulate shift"), mat<u16>(k, y, "modulate y")});
}

void CudaKernels::gated_residual(const KernelContext& k, const MatRef& x, const MatRef& y, const MatRef& g) const {
  if (y.rows != x.rows || y.cols != x.cols) fail("gated_residual: update " + dims(y) + " for state " + dims(x));
  check_mod(g, x, "gated_residual gate");
  launch_each("gated_residual", stream_of(k), x.rows, x.cols,
              GatedResidual{mat<u16>(k, x, "gated_residual x"), mat<const u16>(k, y, "gated_residual y"),
                            mat<const u16>(k, g, "gated_residual g")});
}

void CudaKernels::residual(const KernelContext& k, const MatRef& x, const MatRef& y) const {
  if (y.rows != x.rows || y.cols != x.cols) fail("residual: update " + dims(y) + " for state " + dims(x));
  launch_each("residual", stream_of(k), x.rows, x.cols,
              Residual{mat<u16>(k, x, "residual x"), mat<const u16>(k, y, "residual y")});
}

}  // namespace psi::rt::cuda
