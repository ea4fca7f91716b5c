// psi.official: the H200's BF16 nn.Linear and SDPA cores (engine/ops over engine/official),
// under a numerics variant's arithmetic (engine/model/variant.h).
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <string>

#include "engine/epilogue.h"
#include "engine/matrix.h"
#include "engine/model/variant.h"
#include "engine/ops/attention.h"
#include "engine/ops/gemm.h"
#include "python/module/arrays.h"

namespace psi::python {

using namespace nb::literals;

namespace {

// x [..., K], w [N, K], b [N] or none -> [..., N]: PyTorch's nn.Linear, whose bias the cuBLASLt
// epilogue adds in float32 before the one BF16 rounding (BiasRule::fused_f32).
BitsOut linear(const Bits& x, const Bits& w, const std::optional<Bits>& b, const std::string& variant) {
  const char* call = "psi.official.linear";
  const model::NumericsVariant& v = model::numerics_variant(variant);
  Bf16Tensor xt = bf16_tensor(x), wt = bf16_tensor(w);
  require_rank(call, "x", xt.shape, 1, 32);
  require_rank(call, "w", wt.shape, 2, 2);
  const std::int64_t K = xt.shape.back();
  if (K < 1 || wt.shape[1] != K)
    throw Error(std::string(call) + ": w " + shape_str(wt.shape) + " does not fit x " + shape_str(xt.shape) +
                ": w is [N, K] with K = x's last dimension (>= 1)");
  std::optional<Bf16Tensor> bt;
  if (b) {
    bt = bf16_tensor(*b);
    if (bt->shape.size() != 1 || bt->shape[0] != wt.shape[0])
      throw Error(std::string(call) + ": b " + shape_str(bt->shape) + " does not fit w " + shape_str(wt.shape) +
                  ": b is [N]");
  }
  Bf16Tensor y;
  {
    nb::gil_scoped_release unlocked;
    y = ops::linear(xt, wt, bt ? &*bt : nullptr, BiasRule::fused_f32, v.product);
  }
  return bits_array(std::move(y));
}

// q [B, Nq, H·d], k and v [B, Nk, H·d] (heads merged, as the block's attention holds them) ->
// [B, Nq, H·d], every batch entry one call of the core.
BitsOut sdpa(const Bits& q, const Bits& k, const Bits& v, std::int64_t heads, const std::string& backend) {
  const char* call = "psi.official.sdpa";
  if (backend != "math" && backend != "flash")
    throw Error(std::string(call) + ": backend '" + backend + "' is not one psi models (math, flash)");
  const model::NumericsVariant& var = model::variant_claiming(backend);  // bitwise that recording
  const Bf16Tensor qt = bf16_tensor(q), kt = bf16_tensor(k), vt = bf16_tensor(v);
  require_rank(call, "q", qt.shape, 3, 3);
  require_rank(call, "k", kt.shape, 3, 3);
  require_rank(call, "v", vt.shape, 3, 3);
  const std::int64_t B = qt.shape[0], Nq = qt.shape[1], C = qt.shape[2], Nk = kt.shape[1];
  if (kt.shape[0] != B || vt.shape[0] != B || kt.shape[2] != C || vt.shape[2] != C || vt.shape[1] != Nk)
    throw Error(std::string(call) + ": q " + shape_str(qt.shape) + ", k " + shape_str(kt.shape) + " and v " +
                shape_str(vt.shape) + " do not agree: k and v have the same keys, all three the same batch, heads and "
                "head width");
  if (heads < 1 || C % heads != 0 || Nk < 1)
    throw Error(std::string(call) + ": " + std::to_string(heads) + " heads over " + std::to_string(C) +
                " channels and " + std::to_string(Nk) + " keys: the channels must split evenly into heads, with a key");
  const ops::SdpaOptions opt = var.sdpa(C / heads);
  Bf16Tensor out({B, Nq, C});
  {
    nb::gil_scoped_release unlocked;
    for (std::int64_t i = 0; i < B; ++i) {
      const auto at = [&](const Bf16Tensor& t, std::int64_t n) { return CBf16Mat{t.ptr() + i * n * C, n, C, C}; };
      ops::sdpa(at(qt, Nq), at(kt, Nk), at(vt, Nk), heads, opt, Bf16Mat{out.ptr() + i * Nq * C, Nq, C, C});
    }
  }
  return bits_array(std::move(out));
}

}  // namespace

void bind_official(nb::module_& m) {
  m.def("linear", &linear, "x"_a.noconvert(), "w"_a.noconvert(), "b"_a.noconvert().none(), "variant"_a);
  m.def("sdpa", &sdpa, "q"_a.noconvert(), "k"_a.noconvert(), "v"_a.noconvert(), "heads"_a, "backend"_a);
  m.def("variants", &model::numerics_variant_names, "the numerics variants --variant all runs");
}

}  // namespace psi::python
