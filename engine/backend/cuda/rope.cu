// The rope family's OpKernels (ops/rope.h): split RoPE, one thread per (row, pair), the
// element_math.h formula.
#include "engine/backend/cuda/kernel_common.cuh"

namespace psi::rt::cuda {

namespace {

// One (row, pair) per element: pair p = h·half + j of x [rows, heads·2·half].
struct Rope {
  Mat<u16> x;
  const u16* cos;
  const u16* sin;
  std::int64_t rows, half;
  __device__ void operator()(std::int64_t r, std::int64_t p) const {
    const std::int64_t h = p / half, j = p % half;
    u16* x1 = x.row(r) + h * 2 * half + j;
    u16* x2 = x1 + half;
    const std::int64_t t = (h * rows + r) * half + j;
    const em::RopePair y = em::rope_pair(*x1, *x2, cos[t], sin[t]);
    *x1 = y.y1;
    *x2 = y.y2;
  }
};

}  // namespace

void CudaKernels::rope(const KernelContext& k, const MatRef& x, const RopeRef& t) const {
  if (t.heads <= 0 || t.half <= 0 || t.rows != x.rows || x.cols != t.heads * 2 * t.half)
    fail("rope: tables [" + std::to_string(t.heads) + " heads, " + std::to_string(t.rows) + " tokens, " +
         std::to_string(t.half) + "] for an input " + dims(x));
  const std::uint64_t table_bytes = std::uint64_t(t.heads * t.rows * t.half) * 2;
  check_region(t.cos, table_bytes, "rope cos table");
  check_region(t.sin, table_bytes, "rope sin table");
  launch_each("rope", stream_of(k), x.rows, t.heads * t.half,
              Rope{mat<u16>(k, x, "rope x"), reinterpret_cast<const u16*>(k.arena_base + t.cos.offset),
                   reinterpret_cast<const u16*>(k.arena_base + t.sin.offset), t.rows, t.half});
}

}  // namespace psi::rt::cuda
