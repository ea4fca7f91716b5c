#include "oracle/tc_trace.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "engine/error.h"
#include "oracle/exact_gmp.h"
#include "oracle/rounding.h"

namespace psi::oracle {

namespace {

constexpr int kUnitExp = 25;  // T counts units of 2^(E-25)

std::string f32_hex(float v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", std::bit_cast<std::uint32_t>(v));
  return buf;
}

std::string f32_value(float v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.9g", double(v));
  return buf;
}

// 7 significant digits, for the table only (the JSON has the exact fractions).
std::string short_decimal(const mpq_class& v) {
  if (sgn(v) == 0) return "0";
  mpf_class f(v, 256);
  char buf[64];
  gmp_snprintf(buf, sizeof buf, "%.6Fe", f.get_mpf_t());
  return buf;
}

nlohmann::json exact_json(const mpq_class& v) {
  return {{"fraction", dyadic_fraction(v)}, {"decimal", decimal25(v)}};
}

nlohmann::json f32_json(float v) { return {{"bits", f32_hex(v)}, {"value", v}}; }

mpq_class f32_mpq(float v) { return mpq_class(double(v)); }  // exact: a float is dyadic

// T * 2^(E-25).
mpq_class aligned_value(std::int64_t T, int E) {
  mpq_class v(mpz_class(static_cast<long>(T)));
  const int s = E - kUnitExp;
  if (s >= 0) mpq_mul_2exp(v.get_mpq_t(), v.get_mpq_t(), mp_bitcnt_t(s));
  else mpq_div_2exp(v.get_mpq_t(), v.get_mpq_t(), mp_bitcnt_t(-s));
  return v;
}

// The first index from which `holds` is true for every later step; steps.size() if it fails
// at the last one.
template <class Pred>
std::int64_t first_for_good(const std::vector<TcTrace::Step>& steps, Pred holds) {
  std::size_t s = steps.size();
  while (s > 0 && holds(steps[s - 1].if_exact)) --s;
  return std::int64_t(s);
}

std::string block_range(const TcTrace::Step& s) {
  return std::to_string(s.block.k0) + ".." + std::to_string(s.k_end - 1);
}

std::string where(const TcTrace& t, std::int64_t s) {
  if (s == std::int64_t(t.steps.size())) return "the epilogue";
  return "block " + std::to_string(s) + " (k " + block_range(t.steps[std::size_t(s)]) + ")";
}

nlohmann::json where_json(const TcTrace& t, const std::optional<std::int64_t>& s) {
  if (!s) return nullptr;
  if (*s == std::int64_t(t.steps.size())) return "epilogue";
  return *s;
}

}  // namespace

const std::vector<std::string>& traceable_orders() {
  static const std::vector<std::string> names{"h200-tensor-core"};
  return names;
}

TcTrace trace_tensor_core(const LinearProblem& p, const Explanation& e) {
  const auto xr = p.x_row(e.row), wc = p.w_row(e.col);
  std::vector<official::tc::BlockStep> blocks;
  TcTrace t;
  t.acc = official::tc::dot(xr, wc, 0.0f, &blocks);
  t.bias = e.bias;
  t.exact_products = exact_dot_gmp(xr, wc, std::nullopt);
  t.correct = e.correct;
  const mpq_class b = e.bias ? to_mpq(*e.bias) : mpq_class(0);

  const std::string at = "oracle explain --trace h200-tensor-core: element (" + std::to_string(e.row) + ", " +
                         std::to_string(e.col) + ")";
  mpq_class prefix = 0;
  float prev = 0.0f;
  for (const auto& blk : blocks) {
    TcTrace::Step s;
    s.block = blk;
    s.k_end = std::min<std::int64_t>(blk.k0 + official::tc::kBlock, std::int64_t(xr.size()));
    if (!std::isfinite(blk.acc_out))
      throw Error(at + ": the accumulator overflows to " + f32_value(blk.acc_out) + " at block " +
                  std::to_string(t.steps.size()) + " (k " + block_range(s) + "): no exact losses");
    // The losses add up to the deviation only along an unbroken chain from +0.
    if (std::bit_cast<std::uint32_t>(blk.acc_in) != std::bit_cast<std::uint32_t>(prev))
      throw Error(at + ": internal error: block " + std::to_string(t.steps.size()) + " starts from " +
                      f32_hex(blk.acc_in) + ", the previous block left " + f32_hex(prev),
                  Exit::run_failed);
    const auto n = std::size_t(s.k_end - blk.k0);
    const mpq_class products = exact_dot_gmp(xr.subspan(std::size_t(blk.k0), n), wc.subspan(std::size_t(blk.k0), n),
                                             std::nullopt);
    const mpq_class aligned = aligned_value(blk.sum, blk.align_exp);
    const mpq_class out = f32_mpq(blk.acc_out);
    s.exact_in = f32_mpq(blk.acc_in) + products;
    s.loss_align = s.exact_in - aligned;
    s.loss_norm = aligned - out;
    prefix += products;
    s.deviation = prefix - out;
    s.if_exact = round_to_bf16(out + (t.exact_products - prefix) + b);
    if (!t.first_inexact && (sgn(s.loss_align) != 0 || sgn(s.loss_norm) != 0))
      t.first_inexact = std::int64_t(t.steps.size());
    prev = blk.acc_out;
    t.steps.push_back(std::move(s));
  }
  if (std::bit_cast<std::uint32_t>(prev) != std::bit_cast<std::uint32_t>(t.acc))
    throw Error(at + ": internal error: the trace ends at " + f32_hex(prev) + ", the result is " + f32_hex(t.acc),
                Exit::run_failed);

  t.with_bias = e.bias ? t.acc + e.bias->to_float() : t.acc;
  if (std::isfinite(t.with_bias)) t.loss_bias = f32_mpq(t.acc) + b - f32_mpq(t.with_bias);
  t.result = bf16_rne(t.with_bias);

  if (bf16_ulp_distance(t.result, t.correct) != 0)
    t.departs = first_for_good(t.steps, [&](Bf16 v) { return bf16_ulp_distance(v, t.correct) != 0; });
  for (const auto& c : e.candidates) {
    TcTrace::Target g{c.name, c.value, t.result == c.value, std::nullopt};
    if (g.reproduced) g.decided = first_for_good(t.steps, [&](Bf16 v) { return v == c.value; });
    t.targets.push_back(g);
  }
  return t;
}

std::string to_text(const TcTrace& t) {
  std::ostringstream o;
  o << "h200-tensor-core trace (engine/official/tensor_core.h): " << t.steps.size()
    << " block FMAs of up to 16 products, K ascending, from +0\n";
  o << "  E alignment exponent; T the block's integer sum, in units of 2^(E-25)\n";
  o << "  lost (align) = acc in + the block's products - T*2^(E-25); lost (fp32) = T*2^(E-25) - acc out\n";
  o << "  deviation = exact sum of the products so far - acc out (the losses so far)\n";
  o << "  if exact after = the correctly rounded BF16 of acc out + the later products + b (every later step exact)\n";
  o << "  (exact rationals, shown to 7 digits; --json gives the fractions)\n";
  char line[400];
  std::snprintf(line, sizeof line, "  %-5s %-13s %-4s %-5s %-12s %-26s %-26s %-14s %-14s %-14s %s\n", "block", "k",
                "prod", "E", "T", "acc in", "acc out", "lost (align)", "lost (fp32)", "deviation", "if exact after");
  o << line;
  for (std::size_t i = 0; i < t.steps.size(); ++i) {
    const auto& s = t.steps[i];
    const std::string in = f32_hex(s.block.acc_in) + " " + f32_value(s.block.acc_in);
    const std::string out = f32_hex(s.block.acc_out) + " " + f32_value(s.block.acc_out);
    std::snprintf(line, sizeof line, "  %-5zu %-13s %-4d %-5d %-12lld %-26s %-26s %-14s %-14s %-14s %s\n", i,
                  block_range(s).c_str(), s.block.products, s.block.align_exp, static_cast<long long>(s.block.sum),
                  in.c_str(), out.c_str(), short_decimal(s.loss_align).c_str(), short_decimal(s.loss_norm).c_str(),
                  short_decimal(s.deviation).c_str(), bf16_hex(s.if_exact).c_str());
    o << line;
  }
  o << "final accumulator  " << f32_hex(t.acc) << " (" << f32_value(t.acc) << ")\n";
  o << "exact products     " << decimal25(t.exact_products) << " = acc + the losses ("
    << short_decimal(t.exact_products - f32_mpq(t.acc)) << ")\n";
  if (t.bias)
    o << "epilogue           fp32(acc + b) = " << f32_hex(t.with_bias) << " (" << f32_value(t.with_bias)
      << "), lost " << (std::isfinite(t.with_bias) ? short_decimal(t.loss_bias) : "-") << "; BF16 "
      << bf16_hex(t.result) << " (" << bf16_value(t.result) << ")\n";
  else
    o << "epilogue           no bias; BF16 " << bf16_hex(t.result) << " (" << bf16_value(t.result) << ")\n";
  o << "correctly rounded  " << bf16_hex(t.correct) << " (" << bf16_value(t.correct) << ")\n";
  o << "first inexact      "
    << (t.first_inexact ? where(t, *t.first_inexact) + ": the accumulator leaves the exact sum there"
                        : std::string("none: every block is exact"))
    << "\n";
  o << "departs            ";
  if (!t.departs)
    o << "never: the result is the correctly rounded value\n";
  else
    o << where(t, *t.departs) << ": from there on the result is not the correctly rounded "
      << bf16_hex(t.correct) << ", even were every later step exact\n";
  for (const auto& g : t.targets) {
    o << "candidate " << g.name << " " << bf16_hex(g.value) << ": ";
    if (!g.reproduced)
      o << "not reproduced (the order gives " << bf16_hex(t.result) << ")\n";
    else
      o << "reproduced, decided at " << where(t, *g.decided) << ": from there on the result is "
        << bf16_hex(g.value) << ", even were every later step exact\n";
  }
  return o.str();
}

void add_json(const TcTrace& t, nlohmann::json& j) {
  using nlohmann::json;
  json steps = json::array();
  for (std::size_t i = 0; i < t.steps.size(); ++i) {
    const auto& s = t.steps[i];
    steps.push_back({{"block", i},
                     {"k0", s.block.k0},
                     {"k_end", s.k_end},
                     {"products", s.block.products},
                     {"align_exp", s.block.align_exp},
                     {"sum", s.block.sum},
                     {"truncated_terms", s.block.truncated_terms},
                     {"normalize_dropped", s.block.normalize_dropped},
                     {"acc_in", f32_json(s.block.acc_in)},
                     {"acc_out", f32_json(s.block.acc_out)},
                     {"exact_in", exact_json(s.exact_in)},
                     {"loss_align", exact_json(s.loss_align)},
                     {"loss_norm", exact_json(s.loss_norm)},
                     {"deviation", exact_json(s.deviation)},
                     {"if_exact", bf16_hex(s.if_exact)}});
  }
  j["trace"] = steps;
  json targets = json::array();
  for (const auto& g : t.targets)
    targets.push_back({{"name", g.name}, {"bits", bf16_hex(g.value)}, {"reproduced", g.reproduced},
                       {"decided", where_json(t, g.decided)}});
  j["trace_summary"] = {
      {"order", "h200-tensor-core"},
      {"blocks", t.steps.size()},
      {"acc_final", f32_json(t.acc)},
      {"exact_products", exact_json(t.exact_products)},
      {"bias", t.bias ? json(bf16_hex(*t.bias)) : json(nullptr)},
      {"acc_plus_bias_fp32", f32_json(t.with_bias)},
      {"loss_bias", std::isfinite(t.with_bias) ? exact_json(t.loss_bias) : json(nullptr)},
      {"result", bf16_hex(t.result)},
      {"correctly_rounded", bf16_hex(t.correct)},
      {"first_inexact", where_json(t, t.first_inexact)},
      {"departs", where_json(t, t.departs)},
      {"targets", targets},
      {"definitions",
       {{"loss_align", "acc_in + the block's products - sum * 2^(align_exp-25)"},
        {"loss_norm", "sum * 2^(align_exp-25) - acc_out"},
        {"deviation", "exact sum of the products up to the block - acc_out"},
        {"if_exact", "correctly rounded BF16 of acc_out + the later products + b"},
        {"departs", "first block from which if_exact is not the correctly rounded value for good, the result "
                    "included ('epilogue': only the epilogue's roundings; null: the result is correctly rounded)"},
        {"decided", "first block from which if_exact is the target for good ('epilogue': only the epilogue's "
                    "roundings give it; null: not reproduced)"}}}};
}

}  // namespace psi::oracle
