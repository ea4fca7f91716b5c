#pragma once
// The arithmetic of a PSI block's arena kernels, one implementation per backend (the backends
// apart from the ops): the partitioned operators (engine/exec) decide WHAT runs on which arena
// regions and in which order; an OpKernels implementation decides HOW. The CPU one
// (cpu_kernels.cpp) calls engine/ops on host views of the arena and is the reference every
// bitwise test pins; the CUDA one (cuda/) enqueues device kernels and cuBLASLt products on
// the kernel context's stream.
//
// Every method is called from inside a Backend kernel (Backend::launch), with that kernel's
// context. Operands are arena matrices (MatRef); an implementation checks that each lies inside
// its region and throws psi::Error otherwise. The semantics of each method are those of the
// engine/ops function it names, on the matrices given. "y may be x" means the very same MatRef;
// any other overlap of an output with an input is not allowed (a race on a device).
//
// Self-contained (types only, no out-of-line definitions used) so that the CUDA library can
// implement it without linking back to psi_engine.
#include <cstdint>

#include "engine/backend/region.h"
#include "engine/ops/attention.h"
#include "engine/ops/gemm.h"
#include "engine/ops/norm.h"

namespace psi::rt {

struct KernelContext;

// A row-major [rows, cols] matrix in an arena region: element (r, c) is element
// start + r·ld + c of the region, counted in elements of the method's element type (BF16
// unless the method says float32).
struct MatRef {
  DeviceRegion region;
  std::int64_t rows = 0, cols = 0, ld = 0;
  std::int64_t start = 0;

  // The whole region read as a dense [rows, cols] matrix.
  static MatRef dense(const DeviceRegion& r, std::int64_t rows, std::int64_t cols) { return {r, rows, cols, cols, 0}; }
  // Rows [r0, r0 + nr) and columns [c0, c0 + nc) of this matrix.
  MatRef block(std::int64_t r0, std::int64_t nr, std::int64_t c0, std::int64_t nc) const {
    return {region, nr, nc, ld, start + r0 * ld + c0};
  }
  // Elements this matrix spans in its region, from element 0 (its bound check).
  std::uint64_t extent() const { return rows == 0 ? std::uint64_t(start) : std::uint64_t(start + (rows - 1) * ld + cols); }
};

// One row tile's split-RoPE tables, [1, heads, rows, half] BF16 each, dense.
struct RopeRef {
  DeviceRegion cos, sin;
  std::int64_t heads = 0, rows = 0, half = 0;
};

// The online softmax's running state (ops::OnlineState) in float32 arena matrices.
struct OnlineRef {
  MatRef m, l, o;
};

class OpKernels {
 public:
  virtual ~OpKernels() = default;

  virtual const char* name() const = 0;

  // dst[0, bytes) = src[0, bytes).
  virtual void copy(const KernelContext& k, const DeviceRegion& dst, const DeviceRegion& src,
                    std::uint64_t bytes) const = 0;
  // a = 0 (float32).
  virtual void zero_f32(const KernelContext& k, const MatRef& a) const = 0;

  // ops::linear: y = x·wᵀ (+ bias, a [1, y.cols] row; null: none) under `rule`, the accumulator
  // in `product`'s arithmetic. A device backend's products are its hardware's own (cuBLASLt):
  // on an H200 that is what Product::h200_tensor_core models, whichever is asked for.
  virtual void linear(const KernelContext& k, const MatRef& x, const MatRef& w, const MatRef* bias, psi::BiasRule rule,
                      const MatRef& y, ops::Product product) const = 0;
  // ops::gelu_tanh on x in place.
  virtual void gelu_tanh(const KernelContext& k, const MatRef& x) const = 0;
  // ops::gemm_accumulate: acc (float32) += a·wᵀ in `product`'s arithmetic (as linear).
  virtual void gemm_accumulate(const KernelContext& k, const MatRef& a, const MatRef& w, const MatRef& acc,
                               ops::Product product) const = 0;
  // psi::finish_linear per row with BiasRule::fused_f32: y = bf(acc + bias) (acc float32).
  virtual void finish_linear(const KernelContext& k, const MatRef& acc, const MatRef* bias, const MatRef& y) const = 0;

  // ops::rms_norm over full rows in `norm`'s arithmetic; weight a [1, cols] row or null. y may
  // be x. A device backend's norm is its own kernel, whichever is asked for.
  virtual void rms_norm(const KernelContext& k, const MatRef& x, const MatRef* weight, float eps,
                        const MatRef& y, ops::NormKernel norm) const = 0;
  // ops::ada_value: dst = bf(table_row + dst), table_row [1, dst.cols].
  virtual void ada_value(const KernelContext& k, const MatRef& table_row, const MatRef& dst) const = 0;
  // ops::modulate with ops::one_plus(scale): y = bf(bf(x · bf(1 + scale)) + shift); scale and
  // shift are [1, cols] (broadcast) or [rows, cols]. y may be x.
  virtual void modulate(const KernelContext& k, const MatRef& x, const MatRef& scale, const MatRef& shift,
                        const MatRef& y) const = 0;
  // ops::gated_residual in place: x = bf(x + bf(y · g)), g [1, cols] or [rows, cols].
  virtual void gated_residual(const KernelContext& k, const MatRef& x, const MatRef& y, const MatRef& g) const = 0;
  // ops::residual in place: x = bf(x + y).
  virtual void residual(const KernelContext& k, const MatRef& x, const MatRef& y) const = 0;
  // The attention module's per-head gate: z = bf(sigmoid(z)) in place ([rows, heads]), then
  // a[r, head h] = bf(a · bf(2 · z[r, h])).
  virtual void attention_gate(const KernelContext& k, const MatRef& z, const MatRef& a, std::int64_t heads,
                              std::int64_t head_dim) const = 0;
  // ops::apply_split_rope on x [rows, heads·2·half] in place.
  virtual void rope(const KernelContext& k, const MatRef& x, const RopeRef& t) const = 0;

  // ops::sdpa_online_begin / _update / _end (opt.mask must be null).
  virtual void sdpa_online_begin(const KernelContext& k, const OnlineRef& s) const = 0;
  virtual void sdpa_online_update(const KernelContext& k, const MatRef& q, const MatRef& kk, const MatRef& v,
                                  std::int64_t heads, const ops::SdpaOptions& opt, const OnlineRef& s) const = 0;
  virtual void sdpa_online_end(const KernelContext& k, const OnlineRef& s, const MatRef& out) const = 0;
  // ops::sdpa (opt.mask must be null).
  virtual void sdpa(const KernelContext& k, const MatRef& q, const MatRef& kk, const MatRef& v, std::int64_t heads,
                    const ops::SdpaOptions& opt, const MatRef& out) const = 0;
};

}  // namespace psi::rt
