#pragma once
// Certification of a recorded projection output: for every element, is the recorded BF16 the
// correctly rounded value of the exact sum_k x_k w_k + b? Exact for every element (the fast
// exact path, oracle/fixed_dot.h); for the elements that are not, which float32 orders
// (oracle/f32_orders.h) reproduce the recorded value.
#include <gmpxx.h>

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "engine/tensor.h"
#include "oracle/operands.h"

namespace psi::oracle {

struct CertifyOptions {
  std::int64_t row_begin = 0;
  std::int64_t row_end = -1;  // -1: all rows
  int threads = 1;
};

struct CertifyReport {
  std::int64_t row_begin = 0, row_end = 0, N = 0, K = 0;
  std::int64_t checked = 0;
  std::int64_t not_correctly_rounded = 0;
  std::map<std::int64_t, std::int64_t> ulp_histogram;  // ULP distance -> count (distance >= 1)

  struct Worst {
    std::int64_t row = 0, col = 0;
    Bf16 recorded, correct;
    std::int64_t ulps = 0;
    double signed_ulps = 0;
    mpq_class exact;
  };
  std::optional<Worst> worst;  // largest ULP distance, then largest |signed error|, then first

  // For the not correctly rounded elements: how many each float32 order reproduces bitwise
  // (index-aligned with f32_orders()), and how many no order reproduces.
  std::vector<std::int64_t> reproduced_by_order;
  std::int64_t reproduced_by_none = 0;

  // exact path; comparison incl. float32 orders and exact values of the worst candidates; all
  double seconds_exact = 0, seconds_compare = 0, seconds_total = 0;
};

// `y` is the recorded output viewed as [p.rows, p.N].
CertifyReport certify(const LinearProblem& p, const Bf16Tensor& y, const CertifyOptions& opt);

}  // namespace psi::oracle
