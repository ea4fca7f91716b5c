#pragma once
// An observer of a forward's products and attention cores, operator by operator: what the
// per-operator capture (psi kernels where --capture), its replay (psi probe trajectory-step)
// and the fragility audit (psi kernels fragile) see. ops::linear and ops::sdpa report each call
// after computing it, named by the ProductSite scopes (kernel_config.h) and by the transformer
// block it runs in. The observer is installed for a scope on the thread that runs the forward
// (as the sites are), not for the process: two forwards on two threads observe apart.
#include <cstdint>
#include <string>

#include "engine/epilogue.h"
#include "engine/matrix.h"
#include "engine/official/kernel_config.h"

namespace psi::official {

// y = x·Wᵀ + b as the library saw it: `shape` is M × N × K with M the rows the official model
// runs (rows_as_if: a per-token AdaLN row psi computes once stands for every token's).
struct ProductCall {
  std::string site;
  ProductShape shape;
  CBf16Mat x, W;
  const Bf16* bias = nullptr;
  BiasRule rule = BiasRule::fused_f32;
  Bf16Mat y;  // may be changed by the observer: the forward goes on with what it holds
  const KernelConfig* kernels = nullptr;  // the kernel choices it ran under (null: the recorded)
};

// out = softmax(q·kᵀ / √d)·v over `heads` heads (ops::sdpa), no mask.
struct AttentionCall {
  std::string site;
  CBf16Mat q, k, v;
  std::int64_t heads = 0;
  bool masked = false;
  Bf16Mat out;  // may be changed by the observer, as ProductCall::y
  const KernelConfig* kernels = nullptr;  // as ProductCall's
};

class OpObserver {
 public:
  virtual ~OpObserver() = default;
  virtual void product(const ProductCall& call) = 0;
  virtual void attention(const AttentionCall& call) = 0;
};

// Within this scope this thread's products and attention cores report to `observer`. Scopes
// nest: the inner one observes.
class ObserveOps {
 public:
  explicit ObserveOps(OpObserver& observer);
  ~ObserveOps();
  ObserveOps(const ObserveOps&) = delete;
  ObserveOps& operator=(const ObserveOps&) = delete;

 private:
  OpObserver* restore_;
};
// The observer of this thread, or null.
OpObserver* op_observer();

// The transformer block the operators in this scope belong to: their names start with
// "transformer_blocks.<index>." (the official model's module path), so that the two blocks'
// operators are told apart. The shape log keeps the site names without it.
class BlockScope {
 public:
  explicit BlockScope(int index);
  ~BlockScope();
  BlockScope(const BlockScope&) = delete;
  BlockScope& operator=(const BlockScope&) = delete;

 private:
  int restore_;
};
// current_product_site(), inside a block prefixed as BlockScope says.
std::string op_site();

}  // namespace psi::official
