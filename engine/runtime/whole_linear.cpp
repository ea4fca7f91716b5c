#include "engine/runtime/whole_linear.h"

#include <cstring>
#include <vector>

#include "engine/backend/op_kernels.h"
#include "engine/error.h"
#include "engine/measure/sizes.h"
#include "engine/runtime/runtime.h"

namespace psi::rt {

WholeLinear whole_linear(const std::string& backend, const Bf16Tensor& x, const Bf16Tensor& W, const Bf16Tensor* b,
                         psi::BiasRule rule, ops::Product product) {
  if (W.shape.size() != 2 || x.shape.empty() || x.shape.back() != W.dim(1))
    throw Error("whole linear: weight " + shape_str(W.shape) + " does not fit input " + shape_str(x.shape));
  const std::int64_t K = W.dim(1), N = W.dim(0), M = K == 0 ? 0 : x.numel() / K;
  if (b && (b->shape.size() != 1 || b->dim(0) != N))
    throw Error("whole linear: bias " + shape_str(b->shape) + " for a weight " + shape_str(W.shape));
  Shape y_shape = x.shape;
  y_shape.back() = N;

  const std::uint64_t xb = align_up(x.bytes()), wb = align_up(W.bytes()), bb = align_up(b ? b->bytes() : 0),
                      yb = align_up(std::uint64_t(M * N) * 2);
  // The arena is scratch for the four operands; the pages and workspace are unused minimums.
  const std::int64_t page = std::int64_t(kAlignment), workspace = std::int64_t(kAlignment);
  RuntimeConfig rc;
  rc.backend = backend;
  rc.page_bytes = page;
  rc.workspace_bytes = workspace;
  rc.live_bytes = std::int64_t(xb + wb + bb + yb);
  rc.arena_bytes = 2 * page + workspace + rc.live_bytes;
  Runtime rt(rc);

  // The pinned copies must outlive their asynchronous copies: held until the function returns.
  std::vector<HostBuffer> staged;
  const auto stage = [&](const Bf16Tensor& t, const std::string& name) {
    const DeviceRegion r = rt.scratch_alloc(t.bytes(), "whole linear", -1, name);
    HostBuffer h = rt.allocate_pinned(std::max<std::size_t>(t.bytes(), 1), "whole linear " + name);
    std::memcpy(h.data, t.ptr(), t.bytes());
    rt.copy_h2d(rt.compute(), r, h.data, CopyKind::other, "whole linear " + name);
    staged.push_back(std::move(h));
    return r;
  };
  const DeviceRegion xr = stage(x, "x");
  const DeviceRegion wr = stage(W, "weight");
  const DeviceRegion br = b ? stage(*b, "bias") : DeviceRegion{};
  const DeviceRegion yr = rt.scratch_alloc(std::uint64_t(M * N) * 2, "whole linear", -1, "y");

  Accesses acc = {reads(xr), reads(wr), writes(yr)};
  if (b) acc.push_back(reads(br));
  const bool has_bias = b != nullptr;
  rt.launch(rt.compute(), "whole linear", acc, [=](const KernelContext& k) {
    const MatRef bias = MatRef::dense(br, 1, N);
    k.ops->linear(k, MatRef::dense(xr, M, K), MatRef::dense(wr, N, K), has_bias ? &bias : nullptr, rule,
                  MatRef::dense(yr, M, N), product);
  });
  HostBuffer yh = rt.allocate_pinned(std::max<std::uint64_t>(yr.bytes, 1), "whole linear y");
  rt.copy_d2h(rt.compute(), yh.data, yr, CopyKind::other, "whole linear y");
  rt.host_wait(rt.compute());
  WholeLinear out{Bf16Tensor(y_shape), std::string(rt.backend().name())};
  std::memcpy(out.y.ptr(), yh.data, out.y.bytes());
  rt.finish();
  return out;
}

}  // namespace psi::rt
