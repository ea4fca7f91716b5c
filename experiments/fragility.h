#pragma once
// The fragility audit of one teacher-forced step (psi kernels fragile; issue 42): for every
// product and attention core of the forward, on psi's own inputs of the step, the output
// elements whose BF16 value the arithmetic alone does not decide: they change under some
// admissible kernel order. Products: the correctly rounded exact result, one FP32 FMA chain,
// and the tensor-core chain split 2, 4 and 8 ways, against psi's model (one tensor-core chain
// unless the configuration says otherwise). Attention cores: the score and the P·V products
// split 2, 4 and 8 ways, and psi's own float32 MATH core (its reduce.h sums and std::exp),
// against the H200 MATH core. An element's margin is its distance from the nearest BF16
// rounding boundary, as a fraction of the gap between the boundaries around it (0 … 0.5), of the
// exact value for a product and of a float64 attention for a core; the largest margin among an
// operator's fragile elements says how far from a tie the orders still disagree.
//
// Influence (optional): one fragile element of the operator — the one of smallest margin — set
// to the value the first disagreeing order gives, inside the forward, and the state elements
// (video + audio) of the step that change with it counted: how much a rounding the device might
// make differently there moves the state. One forward per fragile operator.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "experiments/kernel_search.h"

namespace psi::exp {

struct OpFragility {
  std::string site;
  bool attention = false;
  std::string shape;  // M x N x K, or "Nq x Nk keys, H heads of d"
  std::int64_t k = 0;
  std::int64_t elements = 0, fragile = 0;
  double largest_margin = 0;  // among the fragile elements; 0 when none
  std::vector<std::pair<std::string, std::int64_t>> by_order;  // elements each order changes
  std::optional<std::int64_t> influence;                      // state elements one flip moves
};

// Forward order, under the kernel choices `kernels`. `influence`: also measure each fragile
// operator's influence.
std::vector<OpFragility> audit_step(const TinyTrajectory& t, int step, bool influence, const official::KernelConfig& kernels);

nlohmann::json to_json(const std::vector<OpFragility>& ops);

}  // namespace psi::exp
