#pragma once
// Float32-accumulator evaluations of y = sum_k x_k * w_k + b in fixed, documented orders, to
// see which order a recorded BF16 result is consistent with. In the IEEE orders each product
// x_k * w_k is formed in float32 (exact unless it underflows: two 8-bit significands give at
// most 16 bits) and every addition is one float32 round-to-nearest-even addition (the build has
// -ffp-contract=off).
//
// Orders (stable names):
//   seq         acc = ((p_0 + p_1) + p_2) + ...  left to right from 0
//   pairwise    recursive halving: sum(p[0..n)) = sum(first floor(n/2)) + sum(the rest)
//   blockN      N in {16, 32, 64, 128, 256}: each run of N consecutive k summed like seq, then
//               the block sums summed like seq
// and how the bias enters:
//   <order>                    y = bf16(acc + b)          (bias added in float32 at the end)
//   <order>+bf16-before-bias   y = bf16(bf16(acc) + b)    (the matrix product written as BF16
//                                                          first, then the bias added)
// Without a bias both give bf16(acc). Last, not an IEEE order:
//   h200-tensor-core           acc = the H200 tensor core's chain of 16-product block FMAs
//                              (psi::official::tc::dot, engine/official/tensor_core.h), y = bf16(acc + b)
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/bf16.h"

namespace psi::oracle {

struct F32Order {
  enum class Sum { seq, pairwise, blocked, tensor_core };
  std::string name;
  Sum sum = Sum::seq;
  int block = 0;  // for Sum::blocked
  bool bf16_before_bias = false;
};

// All orders in the fixed order of the table above (the bias-at-end ones first, h200-tensor-core
// last).
const std::vector<F32Order>& f32_orders();

// The float32 accumulator value (before the bias).
float f32_sum(const F32Order& order, std::span<const Bf16> x, std::span<const Bf16> w);

Bf16 f32_eval(const F32Order& order, std::span<const Bf16> x, std::span<const Bf16> w,
              std::optional<Bf16> b);

// Every order's result, index-aligned with f32_orders().
std::vector<Bf16> f32_eval_all(std::span<const Bf16> x, std::span<const Bf16> w, std::optional<Bf16> b);

}  // namespace psi::oracle
