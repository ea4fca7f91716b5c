// Full-row RMS norms (ops/norm.h) as arena kernels, on token row tiles (a row's norm depends
// only on its own row).
#include "engine/exec/operators.h"

namespace psi::exec {

void rms_norm(Driver& d, const std::string& op, const ArenaMat& x, const std::string& weight, float eps,
              const ArenaMat& y, ops::NormKernel norm) {
  if (weight.empty()) {
    d.launch(op, {rt::reads(x.region), rt::writes(y.region)},
             [=](const rt::KernelContext& k) { k.ops->rms_norm(k, ref(x), nullptr, eps, ref(y), norm); });
    return;
  }
  const std::int64_t n = x.cols;
  const int p = d.weight({weight, {0, n, 0, 1}, op, -1});
  const rt::DeviceRegion page = d.page(p);
  d.launch(op, {rt::reads(page), rt::reads(x.region), rt::writes(y.region)}, [=](const rt::KernelContext& k) {
    const rt::MatRef w = ref(page, 1, n);
    k.ops->rms_norm(k, ref(x), &w, eps, ref(y), norm);
  });
  d.release(p);
}

}  // namespace psi::exec
