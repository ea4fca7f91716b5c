// AdaLN modulation values, modulation and residual adds (ops/adaln.h) as arena kernels, on
// token row tiles: every one of them is per token.
#include "engine/exec/operators.h"

namespace psi::exec {

void ada_value(Driver& d, const std::string& op, const std::string& table, int row, const rt::JournalKey& ts,
               const ArenaMat& dst) {
  const std::int64_t D = dst.cols;
  d.reload(ts, dst.region);
  const int p = d.weight({table, {row, row + 1, 0, D}, op, row});
  const rt::DeviceRegion page = d.page(p);
  d.launch(op + " row " + std::to_string(row), {rt::reads(page), rt::reads(dst.region), rt::writes(dst.region)},
           [=](const rt::KernelContext& k) { k.ops->ada_value(k, ref(page, 1, D), ref(dst)); });
  d.release(p);
}

void table_row(Driver& d, const std::string& op, const std::string& table, int row, const ArenaMat& dst) {
  const std::int64_t D = dst.cols;
  const int p = d.weight({table, {row, row + 1, 0, D}, op, row});
  const rt::DeviceRegion page = d.page(p);
  d.launch(op + " row " + std::to_string(row), {rt::reads(page), rt::writes(dst.region)},
           [=](const rt::KernelContext& k) { k.ops->copy(k, dst.region, page, std::uint64_t(D) * 2); });
  d.release(p);
}

void modulate(Driver& d, const std::string& op, const ArenaMat& x, const ArenaMat& scale, const ArenaMat& shift,
              const ArenaMat& y) {
  d.launch(op, {rt::reads(x.region), rt::reads(scale.region), rt::reads(shift.region), rt::writes(y.region)},
           [=](const rt::KernelContext& k) { k.ops->modulate(k, ref(x), ref(scale), ref(shift), ref(y)); });
}

void ada_zero(Driver& d, const std::string& op, const ArenaMat& x, const ArenaMat& scale, const ArenaMat& shift,
              float eps, const ArenaMat& y, ops::NormKernel norm) {
  rms_norm(d, op + " norm", x, "", eps, y, norm);
  modulate(d, op + " modulate", y, scale, shift, y);
}

void gated_residual(Driver& d, const std::string& op, const ArenaMat& x, const ArenaMat& y, const ArenaMat& g) {
  d.launch(op, {rt::reads(x.region), rt::reads(y.region), rt::reads(g.region), rt::writes(x.region)},
           [=](const rt::KernelContext& k) { k.ops->gated_residual(k, ref(x), ref(y), ref(g)); });
}

void residual(Driver& d, const std::string& op, const ArenaMat& x, const ArenaMat& y) {
  d.launch(op, {rt::reads(x.region), rt::reads(y.region), rt::writes(x.region)},
           [=](const rt::KernelContext& k) { k.ops->residual(k, ref(x), ref(y)); });
}

}  // namespace psi::exec
