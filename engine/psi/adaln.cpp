// Row norms, AdaLN modulation values, modulation and residual adds as arena kernels (on token
// row tiles: every one of them is per token).
#include <cstring>

#include "engine/ops/adaln.h"
#include "engine/ops/norm.h"
#include "engine/psi/operators.h"

namespace psi::exec {

void rms_norm(Driver& d, const std::string& op, const ArenaMat& x, const std::string& weight, float eps,
              const ArenaMat& y) {
  if (weight.empty()) {
    d.launch(op, {rt::reads(x.region), rt::writes(y.region)}, [=](const rt::KernelContext& k) {
      ops::rms_norm(view<const Bf16>(k, x), nullptr, eps, view<Bf16>(k, y));
    });
    return;
  }
  const std::int64_t n = x.cols;
  const int p = d.weight({weight, {0, n, 0, 1}, op, -1});
  const rt::DeviceRegion page = d.page(p);
  d.launch(op, {rt::reads(page), rt::reads(x.region), rt::writes(y.region)}, [=](const rt::KernelContext& k) {
    ops::rms_norm(view<const Bf16>(k, x), view<const Bf16>(k, page, 1, n, n).data, eps, view<Bf16>(k, y));
  });
  d.release(p);
}

void ada_value(Driver& d, const std::string& op, const std::string& table, int row, const rt::JournalKey& ts,
               const ArenaMat& dst) {
  const std::int64_t D = dst.cols;
  d.reload(ts, dst.region);
  const int p = d.weight({table, {row, row + 1, 0, D}, op, row});
  const rt::DeviceRegion page = d.page(p);
  d.launch(op + " row " + std::to_string(row), {rt::reads(page), rt::reads(dst.region), rt::writes(dst.region)},
           [=](const rt::KernelContext& k) {
             const Bf16Tensor t = load(k, page, {1, D});
             store(k, ops::ada_value(t, 0, load(k, dst.region, dst.shape()), 0), dst.region);
           });
  d.release(p);
}

void table_row(Driver& d, const std::string& op, const std::string& table, int row, const ArenaMat& dst) {
  const std::int64_t D = dst.cols;
  const int p = d.weight({table, {row, row + 1, 0, D}, op, row});
  const rt::DeviceRegion page = d.page(p);
  d.launch(op + " row " + std::to_string(row), {rt::reads(page), rt::writes(dst.region)},
           [=](const rt::KernelContext& k) {
             std::memcpy(view<Bf16>(k, dst).data, view<const Bf16>(k, page, 1, D, D).data, std::size_t(D) * 2);
           });
  d.release(p);
}

void modulate(Driver& d, const std::string& op, const ArenaMat& x, const ArenaMat& scale, const ArenaMat& shift,
              const ArenaMat& y) {
  d.launch(op, {rt::reads(x.region), rt::reads(scale.region), rt::reads(shift.region), rt::writes(y.region)},
           [=](const rt::KernelContext& k) {
             const Bf16Tensor factor = ops::one_plus(load(k, scale.region, scale.shape()));
             ops::modulate(view<const Bf16>(k, x), ops::as_matrix(factor), view<const Bf16>(k, shift),
                           view<Bf16>(k, y));
           });
}

void ada_zero(Driver& d, const std::string& op, const ArenaMat& x, const ArenaMat& scale, const ArenaMat& shift,
              float eps, const ArenaMat& y) {
  rms_norm(d, op + " norm", x, "", eps, y);
  modulate(d, op + " modulate", y, scale, shift, y);
}

void gated_residual(Driver& d, const std::string& op, const ArenaMat& x, const ArenaMat& y, const ArenaMat& g) {
  d.launch(op, {rt::reads(x.region), rt::reads(y.region), rt::reads(g.region), rt::writes(x.region)},
           [=](const rt::KernelContext& k) {
             store(k,
                   ops::gated_residual(load(k, x.region, x.shape()), load(k, y.region, y.shape()),
                                       load(k, g.region, g.shape())),
                   x.region);
           });
}

void residual(Driver& d, const std::string& op, const ArenaMat& x, const ArenaMat& y) {
  d.launch(op, {rt::reads(x.region), rt::reads(y.region), rt::writes(x.region)}, [=](const rt::KernelContext& k) {
    store(k, ops::residual(load(k, x.region, x.shape()), load(k, y.region, y.shape())), x.region);
  });
}

}  // namespace psi::exec
