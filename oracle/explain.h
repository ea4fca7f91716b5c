#pragma once
// Everything the oracle knows about one output element: operands' source, the exact value,
// its conditioning, the correctly rounded BF16 and, for each candidate BF16, its distance
// from it and the orders (oracle/f32_orders.h) that produce it.
#include <gmpxx.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/bf16.h"
#include "oracle/operands.h"

namespace psi::oracle {

struct Candidate {
  std::string name;
  Bf16 value;
};

struct Explanation {
  OperandSource source;
  std::int64_t row = 0, col = 0, K = 0;
  std::optional<Bf16> bias;
  mpq_class exact;
  std::string fraction;  // reduced p/2^q
  std::string decimal;   // 25 significant digits
  std::optional<double> condition;  // sum|x_k w_k| / |exact|; empty = infinite (exact is 0)
  Bf16 correct;
  struct Judged {
    std::string name;
    Bf16 value;
    std::int64_t ulps = 0;
    double signed_ulps = 0;
    std::vector<std::string> orders;  // the orders whose result is this value
  };
  std::vector<Judged> candidates;
  std::vector<Bf16> order_values;  // every order's result, aligned with f32_orders()
};

// The exact value comes from the GMP path and is cross-checked against the fast exact path
// (a disagreement is an internal error, Exit::run_failed).
Explanation explain(const LinearProblem& p, std::int64_t row, std::int64_t col,
                    const std::vector<Candidate>& candidates);

std::string to_text(const Explanation& e);
nlohmann::json to_json(const Explanation& e);

// Where the operands came from, for certify's output as for explain's: the heading ("probe P of
// F", "tensors of F", "tensors of several files"), one line per operand read with its element
// type as stored and the SHA-256 the verdict rests on, and the JSON `source` object.
std::string source_heading(const OperandSource& s);
std::string read_lines(const OperandSource& s);
nlohmann::json to_json(const OperandSource& s);

std::string bf16_hex(Bf16 v);        // "0x3f80"
std::string bf16_value(Bf16 v);      // 9 significant digits: identifies any BF16, e.g. "1.0078125"
std::string dyadic_fraction(const mpq_class& v);  // "p/2^q" (or "p/d" if d is not a power of 2)
std::string decimal25(const mpq_class& v);        // "-1.234...e-02" with 25 significant digits

}  // namespace psi::oracle
