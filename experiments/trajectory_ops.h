#pragma once
// The tiny trajectory operator by operator (issue 42): one teacher-forced step's products and
// attention cores with their inputs and outputs, written as a per-operator capture, and a
// capture (psi's own, or the H200's when it is recorded) replayed by official-h200 on its
// recorded inputs. The layout (docs/official-kernels.md, "The per-operator capture"):
//
//   /<trajectory group>_ops/step_NN/<site>/{in,out}        a product: y = x·Wᵀ + b
//   /<trajectory group>_ops/step_NN/<site>/{q,k,v,out}     an attention core (<site> ends in .sdpa)
//
// <site> is the name `psi kernels shapes` prints, prefixed "transformer_blocks.<i>." inside
// block i (official::op_site). BF16 as uint16 with dtype='bfloat16' and sha256_full on every
// dataset; a product's in is [rows, K] and out [rows, N] (leading axes may be kept: they are
// flattened into rows), an attention's q and out [Nq, H·d], k and v [Nk, H·d] (heads merged).
// Attributes of each <site> group: shape (JSON: a product's [M, N, K] with M the rows the
// official model runs, an attention's [Nq, Nk, H, d]), k (K, or d), kernel (the library
// kernel's name; may be empty). The weights are not stored: the replay takes them, site by
// site, from psi's own forward of the step, as it takes the order of the operators.
#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/official/op_observer.h"
#include "engine/tensor.h"
#include "experiments/kernel_search.h"

namespace psi::exp {

// One operator of a forward as psi ran it.
struct CapturedOp {
  std::string site;
  bool attention = false;
  std::vector<std::int64_t> shape;  // a product's [M, N, K]; an attention's [Nq, Nk, H, d]
  std::string kernel;               // psi's model of the kernel, in words
  Bf16Tensor in, out;               // a product's x and y; an attention's out (in unused)
  Bf16Tensor weight, bias;          // a product's W and b (bias empty when none)
  BiasRule rule = BiasRule::fused_f32;
  Bf16Tensor q, k, v;               // an attention's
  std::int64_t depth() const { return attention ? shape.at(3) : shape.at(2); }
};

// Collects every product and attention core of the forward it observes, in call order. A site
// met twice or a masked attention (the layout has no mask) is a psi::Error.
class OpCapture : public official::OpObserver {
 public:
  void product(const official::ProductCall& call) override;
  void attention(const official::AttentionCall& call) override;
  const std::vector<CapturedOp>& ops() const { return ops_; }

 private:
  void add(CapturedOp op);
  std::vector<CapturedOp> ops_;
};

// "/trajectory_tiny_ops/step_01" for the one-token trajectory's step 1.
std::string ops_group(const std::string& trajectory_group, int step);

// The teacher-forced step `step` of `t` under the kernel choices `kernels`, with every
// operator captured by `observer` (an OpCapture, or one that wraps it).
std::pair<pipeline::SavedState, pipeline::SavedState> observed_step(const TinyTrajectory& t, int step,
                                                                    const official::KernelConfig& kernels,
                                                                    official::OpObserver& observer);

// Writes `ops` as step `step` of trajectory group `trajectory_group` (the layout above) to
// `out`, a psi-h5/1 file made visible only when complete.
void write_capture(const std::filesystem::path& out, const std::string& trajectory_group, int step,
                   const std::string& state_name, std::uint64_t seed, const std::vector<CapturedOp>& ops);

// One operator of a replay: official-h200 on the recorded inputs against the recorded output,
// and the recorded inputs against psi's own forward of the step.
struct OpReplay {
  std::string site;
  bool attention = false;
  std::string shape;   // "72x256x256", or for attention "Nq x Nk, H heads of d"
  std::int64_t k = 0;
  std::string kernel;  // the recording's kernel attribute
  std::int64_t elements = 0, differing = 0;
  std::array<std::int64_t, 6> ulps{};  // differing elements 1, 2, 3, 4, 5-8, 9+ BF16 ulps apart
  std::int64_t inputs = 0, inputs_differing = 0;
  bool departs() const { return differing > 0; }
  bool inherited() const { return !departs() && inputs_differing > 0; }
};

struct StepReplay {
  std::filesystem::path file;
  std::string group;  // "/trajectory_tiny_ops/step_01"
  std::string state_name, context;
  std::vector<OpReplay> ops;  // psi's forward order
  // The first operator that departs on its own recorded inputs, and the first whose recorded
  // inputs differ from psi's forward; -1 for none.
  int first_departing = -1, first_inputs_differing = -1;
  // An operator outside the recorded ones departs first: the first recorded operator whose
  // inputs differ comes before (or is) the first that departs.
  bool unrecorded_first() const {
    return first_inputs_differing >= 0 && (first_departing < 0 || first_inputs_differing <= first_departing);
  }
  bool any_departs() const { return first_departing >= 0 || first_inputs_differing >= 0; }
};

// Replays step `step` of the capture `file` (either recorded trajectory's group) on the weights
// and recorded states in `reference_dir`, under the recorded kernel choices. A missing or unknown site, a shape that is not psi's,
// a dataset that is not BF16, lacks its sha256_full or does not match it: psi::Error (bad input).
StepReplay replay_step(const std::filesystem::path& file, int step, const std::filesystem::path& reference_dir);

}  // namespace psi::exp
