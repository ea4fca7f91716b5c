#include "oracle/explain.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "engine/error.h"
#include "oracle/exact_gmp.h"
#include "oracle/f32_orders.h"
#include "oracle/fixed_dot.h"
#include "oracle/rounding.h"

namespace psi::oracle {

namespace {

std::string fmt_signed(double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%+.4f", v);
  return buf;
}

std::string fmt_condition(const std::optional<double>& c) {
  if (!c) return "inf";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.6g", *c);
  return buf;
}

std::vector<std::string> orders_giving(const Explanation& e, Bf16 v) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < e.order_values.size(); ++i)
    if (e.order_values[i] == v) out.push_back(f32_orders()[i].name);
  return out;
}

std::string join(const std::vector<std::string>& v) {
  if (v.empty()) return "none";
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

std::string operand_line(const std::string& label, const std::string& name, bool synthinit,
                         std::int64_t seed, const std::string& index) {
  std::string s = "  " + label + "  " + (synthinit ? "SynthInit " : "") + name + index;
  if (synthinit) s += " (seed " + std::to_string(seed) + ", SHA-256 matches weights_json)";
  return s;
}

}  // namespace

std::string bf16_hex(Bf16 v) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%04x", v.bits);
  return buf;
}

std::string bf16_value(Bf16 v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.9g", double(v.to_float()));
  return buf;
}

std::string dyadic_fraction(const mpq_class& v) {
  const mpz_class& den = v.get_den();
  const std::size_t bits = mpz_sizeinbase(den.get_mpz_t(), 2);
  if (mpz_scan1(den.get_mpz_t(), 0) == bits - 1)
    return v.get_num().get_str() + "/2^" + std::to_string(bits - 1);
  return v.get_num().get_str() + "/" + den.get_str();
}

std::string decimal25(const mpq_class& v) {
  // 1024 bits of mantissa hold far more than 25 digits of any value the oracle produces.
  mpf_class f(v, 1024);
  char* s = nullptr;
  gmp_asprintf(&s, "%.24Fe", f.get_mpf_t());
  std::string out(s);
  void (*free_fn)(void*, std::size_t);
  mp_get_memory_functions(nullptr, nullptr, &free_fn);
  free_fn(s, out.size() + 1);
  return out;
}

Explanation explain(const LinearProblem& p, std::int64_t row, std::int64_t col,
                    const std::vector<Candidate>& candidates) {
  if (row < 0 || row >= p.rows)
    throw Error("oracle explain: --row " + std::to_string(row) + " outside 0.." + std::to_string(p.rows - 1) +
                " (x " + p.source.x + " " + shape_str(p.x_shape) + " has " + std::to_string(p.rows) + " rows)");
  if (col < 0 || col >= p.N)
    throw Error("oracle explain: --col " + std::to_string(col) + " outside 0.." + std::to_string(p.N - 1) +
                " (W has " + std::to_string(p.N) + " output columns)");
  Explanation e;
  e.source = p.source;
  e.row = row;
  e.col = col;
  e.K = p.K;
  e.bias = p.bias(col);
  const auto xr = p.x_row(row), wc = p.w_row(col);
  // A NaN or Inf operand has no exact value: name it (file, operand, index) instead of failing
  // deep inside the rational arithmetic.
  auto check = [&](std::span<const Bf16> v, const std::string& what, std::int64_t r) {
    for (std::size_t k = 0; k < v.size(); ++k)
      if (!v[k].is_finite())
        throw Error("oracle explain: " + (p.source.file.empty() ? "" : p.source.file + ": ") + "operand " + what + " row " + std::to_string(r) + " [" +
                    std::to_string(k) + "] is " + (v[k].is_nan() ? "NaN" : "Inf") + " (" + bf16_hex(v[k]) +
                    "): no exact value");
  };
  check(xr, p.source.x.empty() ? "x" : p.source.x, row);
  check(wc, p.source.w.empty() ? "w" : p.source.w, col);
  if (e.bias) check(std::span<const Bf16>(&*e.bias, 1), p.source.b.empty() ? "b" : p.source.b, col);
  e.exact = exact_dot_gmp(xr, wc, e.bias);
  if (exact_dot_fixed(xr, wc, e.bias).to_mpq() != e.exact)
    throw Error("oracle explain: internal error: the fast exact path disagrees with GMP at (" +
                    std::to_string(row) + ", " + std::to_string(col) + ")",
                Exit::run_failed);
  e.fraction = dyadic_fraction(e.exact);
  e.decimal = decimal25(e.exact);
  if (sgn(e.exact) != 0) e.condition = mpq_class(exact_abs_dot_gmp(xr, wc) / abs(e.exact)).get_d();
  e.correct = round_to_bf16(e.exact);
  e.order_values = f32_eval_all(xr, wc, e.bias);
  for (const auto& c : candidates) {
    Judgement j = judge(c.value, e.exact);
    e.candidates.push_back({c.name, c.value, j.ulp_distance, j.signed_ulps, orders_giving(e, c.value)});
  }
  return e;
}

std::string to_text(const Explanation& e) {
  std::ostringstream o;
  const auto& s = e.source;
  o << "operands   " << source_heading(s) << "\n";
  o << operand_line("x", s.x, false, s.seed, " row " + std::to_string(e.row)) << "\n";
  o << operand_line("W", s.w, s.w_synthinit, s.seed,
                    " row " + std::to_string(e.col) + (s.w_transposed ? " (stored [in, out]: column " +
                                                                           std::to_string(e.col) + " as stored)"
                                                                     : " (stored [out, in])"))
    << "\n";
  if (e.bias) {
    std::ostringstream idx;
    idx << "[" << e.col << "] = " << bf16_hex(*e.bias) << " (" << bf16_value(*e.bias) << ")";
    o << operand_line("b", s.b, s.b_synthinit, s.seed, idx.str()) << "\n";
  } else
    o << "  b  none\n";
  o << read_lines(s);
  o << "element    (row " << e.row << ", col " << e.col << "), K = " << e.K << "\n";
  o << "exact      " << e.fraction << "\n";
  o << "           = " << e.decimal << "\n";
  o << "condition  sum|x_k w_k| / |y| = " << fmt_condition(e.condition) << "\n";
  o << "correctly rounded BF16  " << bf16_hex(e.correct) << " (" << bf16_value(e.correct) << ")\n";
  o << "orders giving it: " << join(orders_giving(e, e.correct)) << "\n";
  o << "orders (oracle/f32_orders.h: IEEE float32 sums, the H200 tensor core): result, ULP distance from the "
       "correctly rounded value\n";
  for (std::size_t i = 0; i < e.order_values.size(); ++i) {
    char line[160];
    std::snprintf(line, sizeof line, "  %-28s %s %-16s %" PRId64 "\n", f32_orders()[i].name.c_str(),
                  bf16_hex(e.order_values[i]).c_str(), bf16_value(e.order_values[i]).c_str(),
                  bf16_ulp_distance(e.order_values[i], e.correct));
    o << line;
  }
  if (!e.candidates.empty()) {
    o << "candidates\n";
    char line[256];
    std::snprintf(line, sizeof line, "  %-12s %-7s %-16s %-10s %-18s %s\n", "name", "bits", "value",
                  "ULP dist", "signed error (ULP)", "orders giving it");
    o << line;
    for (const auto& c : e.candidates) {
      std::snprintf(line, sizeof line, "  %-12s %-7s %-16s %-10" PRId64 " %-18s ", c.name.c_str(),
                    bf16_hex(c.value).c_str(), bf16_value(c.value).c_str(), c.ulps, fmt_signed(c.signed_ulps).c_str());
      o << line << join(c.orders) << "\n";
    }
  }
  return o.str();
}

nlohmann::json to_json(const Explanation& e) {
  using nlohmann::json;
  const json src = to_json(e.source);
  json j = {{"source", src}, {"row", e.row}, {"col", e.col}, {"K", e.K}};
  j["bias"] = e.bias ? json{{"bits", bf16_hex(*e.bias)}, {"value", e.bias->to_float()}} : json(nullptr);
  j["exact"] = {{"fraction", e.fraction}, {"decimal", e.decimal}};
  j["condition"] = e.condition ? json(*e.condition) : json("inf");
  j["correctly_rounded"] = {{"bits", bf16_hex(e.correct)}, {"value", e.correct.to_float()},
                            {"orders", orders_giving(e, e.correct)}};
  json cands = json::array();
  for (const auto& c : e.candidates) {
    json signed_ulps = std::isfinite(c.signed_ulps) ? json(c.signed_ulps) : json(fmt_signed(c.signed_ulps));
    cands.push_back({{"name", c.name}, {"bits", bf16_hex(c.value)}, {"value", c.value.to_float()},
                     {"ulp_distance", c.ulps}, {"signed_ulps", signed_ulps}, {"orders", c.orders}});
  }
  j["candidates"] = cands;
  json orders = json::object();
  for (std::size_t i = 0; i < e.order_values.size(); ++i) orders[f32_orders()[i].name] = bf16_hex(e.order_values[i]);
  j["float32_orders"] = orders;
  return j;
}

std::string source_heading(const OperandSource& s) {
  if (!s.probe.empty()) return "probe " + one_line(s.probe) + " of " + one_line(s.file);
  return s.file.empty() ? "tensors of several files" : "tensors of " + one_line(s.file);
}

std::string read_lines(const OperandSource& s) {
  std::string out;
  for (const OperandRecord& r : s.read)
    out += "  read " + r.role + "  " + one_line(r.file + ":" + r.dataset) + ", " + r.stored + ", SHA-256 " + r.sha256 +
           (r.hash_checked ? " (matches its sha256_full)" : "") + "\n";
  return out;
}

nlohmann::json to_json(const OperandSource& s) {
  using nlohmann::json;
  json src = {{"file", s.file.empty() ? json(nullptr) : json(s.file)}, {"x", s.x}, {"w", s.w},
              {"b", s.b.empty() ? json(nullptr) : json(s.b)}};
  if (!s.probe.empty()) {
    src["probe"] = s.probe;
    src["synthinit_seed"] = s.seed;
  }
  src["w_layout"] = s.w_transposed ? "in,out" : "out,in";
  json read = json::array();
  for (const OperandRecord& r : s.read)
    read.push_back({{"role", r.role}, {"file", r.file}, {"dataset", r.dataset}, {"stored", r.stored},
                    {"sha256", r.sha256}, {"sha256_checked", r.hash_checked}});
  src["read"] = read;
  return src;
}

}  // namespace psi::oracle
