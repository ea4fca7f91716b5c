// Split RoPE (ops/rope.h's apply_split_rope) as an arena kernel on one token row tile, its
// tables reloaded from the journal.
#include "engine/exec/operators.h"

namespace psi::exec {

void rope(Driver& d, const std::string& op, const ArenaMat& x, const RopeKeys& keys, int tile) {
  Frame f(d);
  const std::uint64_t bytes = std::uint64_t(numel(keys.shape)) * 2;
  const rt::DeviceRegion cos = f.alloc(Pool::scratch, bytes, op, tile, "rope cos");
  const rt::DeviceRegion sin = f.alloc(Pool::scratch, bytes, op, tile, "rope sin");
  d.reload(keys.cos, cos);
  d.reload(keys.sin, sin);
  if (keys.shape.size() != 4 || keys.shape[0] != 1 || keys.shape[2] != x.rows)
    throw Error(op + ": RoPE tables " + shape_str(keys.shape) + " for a " + std::to_string(x.rows) + "-row tile",
                Exit::run_failed);
  const rt::RopeRef t{cos, sin, keys.shape[1], keys.shape[2], keys.shape[3]};
  d.launch(op, {rt::reads(cos), rt::reads(sin), rt::reads(x.region), rt::writes(x.region)},
           [=](const rt::KernelContext& k) { k.ops->rope(k, ref(x), t); });
}

}  // namespace psi::exec
