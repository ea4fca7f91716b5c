// The allocation and staging helpers every partitioned operator uses (operators.h).
#include "engine/exec/operators.h"

namespace psi::exec {

ArenaMat alloc_mat(Frame& f, Pool pool, std::int64_t rows, std::int64_t cols, const std::string& op,
                   const std::string& name, int tile) {
  ArenaMat m{{}, rows, cols};
  m.region = f.alloc(pool, m.bytes_bf16(), op, tile, name);
  return m;
}

ArenaMat reload_mat(Driver& d, Frame& f, const rt::JournalKey& key, std::int64_t rows, std::int64_t cols,
                    const std::string& op, const std::string& name, int tile) {
  ArenaMat m = alloc_mat(f, Pool::scratch, rows, cols, op, name, tile);
  d.reload(key, m.region);
  return m;
}

void stage_vector(Driver& d, const std::string& op, const std::string& tensor, std::int64_t n,
                  const rt::DeviceRegion& dst) {
  const int p = d.weight({tensor, {0, n, 0, 1}, op, -1});
  const rt::DeviceRegion page = d.page(p);
  const std::uint64_t bytes = std::uint64_t(n) * 2;
  d.launch(op + " stage " + tensor, {rt::reads(page), rt::writes(dst)},
           [=](const rt::KernelContext& k) { k.ops->copy(k, dst, page, bytes); });
  d.release(p);
}

}  // namespace psi::exec
