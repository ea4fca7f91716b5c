#include "engine/official/op_observer.h"

namespace psi::official {

namespace {
thread_local OpObserver* t_observer = nullptr;
thread_local int t_block = -1;  // -1: outside the blocks
}  // namespace

ObserveOps::ObserveOps(OpObserver& observer) : restore_(t_observer) { t_observer = &observer; }
ObserveOps::~ObserveOps() { t_observer = restore_; }
OpObserver* op_observer() { return t_observer; }

BlockScope::BlockScope(int index) : restore_(t_block) { t_block = index; }
BlockScope::~BlockScope() { t_block = restore_; }

std::string op_site() {
  const std::string site = current_product_site();
  return t_block < 0 ? site : "transformer_blocks." + std::to_string(t_block) + "." + site;
}

}  // namespace psi::official
