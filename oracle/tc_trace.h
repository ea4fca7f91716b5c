#pragma once
// The h200-tensor-core order of one output element, block FMA by block FMA, against the exact
// sum (`psi oracle explain --trace h200-tensor-core`). Everything here is exact: each block's
// losses are rationals computed with GMP from the BF16 operands and the traced integers.
//
// Per block s (16 products, K ascending; engine/official/tensor_core.h):
//   exact input   acc_in + the block's products
//   aligned       T * 2^(E-25), the block's integer sum
//   loss_align    exact input - aligned   (bits truncated when aligning to E)
//   loss_norm     aligned - acc_out       (bits truncated to the FP32 significand)
//   deviation     exact prefix sum of the products up to the block's end - acc_out
//                 (= the losses so far; the exact final sum = acc_final + all losses)
//   if_exact      the correctly rounded BF16 of acc_out + the later products + b: the element's
//                 value were every step after this block exact
// and the epilogue: fp32(acc_final + b) (loss_bias = acc_final + b - it), then BF16.
//
// Where the chain departs, for a target value v (the correctly rounded one, or a candidate):
// the first block from which if_exact stays v through the last block and the epilogue gives v
// (`decided`); "the epilogue" when only the epilogue's roundings give v, empty when the chain's
// result is not v at all. For the correctly rounded value the departure is the first block from
// which if_exact differs from it for good (and the result does too).
#include <gmpxx.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/official/tensor_core.h"
#include "oracle/explain.h"
#include "oracle/operands.h"

namespace psi::oracle {

// The orders --trace accepts.
const std::vector<std::string>& traceable_orders();

struct TcTrace {
  struct Step {
    official::tc::BlockStep block;
    std::int64_t k_end = 0;  // one past the block's last k
    mpq_class exact_in, loss_align, loss_norm, deviation;
    Bf16 if_exact;
  };
  std::vector<Step> steps;
  float acc = 0.0f;            // the final accumulator
  std::optional<Bf16> bias;
  mpq_class exact_products;    // sum_k x_k w_k, exact
  float with_bias = 0.0f;      // fp32(acc + b); acc without a bias
  mpq_class loss_bias;         // acc + b - with_bias
  Bf16 result;                 // bf16(with_bias), the order's value
  Bf16 correct;
  std::optional<std::int64_t> first_inexact;  // the first block with a loss (acc leaves the exact prefix)
  // The departure from the correctly rounded value: a block index, steps.size() for the
  // epilogue, empty when the result is correctly rounded.
  std::optional<std::int64_t> departs;
  struct Target {
    std::string name;
    Bf16 value;
    bool reproduced = false;
    std::optional<std::int64_t> decided;  // block index, steps.size() for the epilogue
  };
  std::vector<Target> targets;  // one per candidate of the explanation
};

// `e` is explain()'s result for the same element (operands checked finite there). An
// accumulator that overflows to Inf has no exact losses: psi::Error naming the block.
TcTrace trace_tensor_core(const LinearProblem& p, const Explanation& e);

std::string to_text(const TcTrace& t);
// Sets j["trace"] (the steps, an array) and j["trace_summary"] (the rest) in explain's object.
void add_json(const TcTrace& t, nlohmann::json& j);

}  // namespace psi::oracle
