#pragma once
// Certification of a recorded projection output: for every element, is the recorded BF16 the
// correctly rounded value of the exact sum_k x_k w_k + b? Exact for every element (the fast
// exact path, oracle/fixed_dot.h); for the elements that are not, which float32 orders
// (oracle/f32_orders.h) reproduce the recorded value.
#include <gmpxx.h>

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
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

  // For the not correctly rounded elements: how many each order reproduces bitwise
  // (index-aligned with f32_orders()), and how many no order reproduces.
  std::vector<std::int64_t> reproduced_by_order;
  std::int64_t reproduced_by_none = 0;

  // Every not correctly rounded element, in row order (for `certify --list`).
  struct Element {
    std::int64_t row = 0, col = 0;
    Bf16 recorded, correct;
    std::int64_t ulps = 0;
    mpq_class exact;
    std::vector<std::size_t> orders;  // indices into f32_orders() of the orders reproducing it
  };
  std::vector<Element> elements;

  // How the correctly rounded values were decided (oracle/float64_filter.h): by the float64
  // interval, or by the exact path.
  std::int64_t decided_by_filter = 0, sent_exact = 0;

  // float64 filter; exact path for what it left; comparison incl. the orders and the exact
  // values of the not correctly rounded elements; all
  double seconds_filter = 0, seconds_exact = 0, seconds_compare = 0, seconds_total = 0;
};

// `y` is the recorded output viewed as [p.rows, p.N].
CertifyReport certify(const LinearProblem& p, const Bf16Tensor& y, const CertifyOptions& opt);

// `certify --json`: the counts, `reproduced_by` (order name -> count), the worst element and
// the report's timings (seconds_load is the caller's).
nlohmann::json to_json(const CertifyReport& rep, double seconds_load);

// `certify --list`: a CSV header line, then one line per not correctly rounded element:
// row,col,recorded,correctly_rounded,ulps,exact,exact_fraction,orders (BF16 as 0xBITS, exact
// to 25 significant digits and as p/2^q, orders joined by ';', empty when none).
std::string list_csv(const CertifyReport& rep);
// The list's first line, its header: how a later --list knows the file for psi's.
inline constexpr const char* kListCsvHeader = "row,col,recorded,correctly_rounded,ulps,exact,exact_fraction,orders";

}  // namespace psi::oracle
