// projection-oracle (eq. 6): the first element where baseline PSI's video Q projection and the
// official recording disagree, explained exactly by the oracle (exact value, conditioning,
// correctly rounded BF16, which float32 orders give each candidate).
#include "experiments/drivers.h"

#include "engine/ops/gemm.h"
#include "oracle/explain.h"
#include "oracle/operands.h"
#include "reports/h5.h"

namespace psi::exp {

void run_projection_oracle(const Options& o, Report& report) {
  const auto file = reference_dir(o) / "probes_linear.h5";
  auto f = h5::File::open_read(file);
  const oracle::LinearProblem p = oracle::load_probe(f, "probe_video_q_proj");
  const oracle::OutputChoice out = oracle::choose_probe_output(f, p, "");
  const Bf16Tensor official = oracle::load_output(f, out.dataset, p);
  // Baseline PSI computes the projection with float32 accumulation and the bias fused before
  // the single BF16 write (psi's CPU GEMM order, engine/ops/reduce.h).
  Bf16Tensor x = p.x;
  x.shape = {p.rows, p.K};
  const Bf16Tensor ours = ops::linear(x, p.w, p.b ? &*p.b : nullptr, ops::BiasRule::fused_f32);
  std::int64_t first = -1, differing = 0;
  for (std::int64_t i = 0; i < ours.numel(); ++i)
    if (!(ours.data[i] == official.data[i])) {
      if (first < 0) first = i;
      ++differing;
    }
  nlohmann::json rec{{"file", file.filename().string()},
                     {"probe", "probe_video_q_proj"},
                     {"output", out.dataset},
                     {"elements", ours.numel()},
                     {"differing", differing}};
  if (first >= 0) {
    const std::int64_t row = first / p.N, col = first % p.N;
    const oracle::Explanation e = oracle::explain(
        p, row, col, {{"psi-baseline", ours.data[first]}, {"official", official.data[first]}});
    rec["row"] = row;
    rec["col"] = col;
    rec["explanation"] = oracle::to_json(e);
    rec["explanation_text"] = oracle::to_text(e);
  }
  report.writer().write("/projection/psi_baseline_q", ours,
                        reports::TensorMeta{"baseline", "[256, 4096] video Q projection, psi CPU", "", {}});
  report.add_case(0, std::move(rec));
}

namespace {
// The oracle's 25-digit decimal ("-1.234...e-04") cut to `digits` significant digits for a
// table cell: the mantissa is cut, never the exponent, and "~" says it was cut.
std::string short_decimal(const std::string& d, std::size_t digits) {
  const auto e = d.find_first_of("eE");
  const std::string mant = d.substr(0, e), exp = e == std::string::npos ? "" : d.substr(e);
  const std::size_t lead = mant.starts_with("-") ? 2 : 1;  // sign and first digit before the point
  if (mant.size() <= lead + digits) return d;
  return "~" + mant.substr(0, lead + digits) + exp;
}
}  // namespace

std::vector<Table> tabulate_projection_oracle(const nlohmann::json& cases, const nlohmann::json&) {
  Table t;
  t.title = "first disagreement of baseline PSI and the official video Q projection (eq. 6)";
  t.columns = {"elements", "differing", "first (row, col)", "exact value", "correctly rounded", "psi-baseline",
               "official", "condition"};
  for (auto& c : cases) {
    if (!c.contains("explanation")) {
      t.add_row({fmt_count(c["elements"]), "0", "-", "-", "-", "-", "-", "-"});
      continue;
    }
    const auto& e = c["explanation"];
    auto cand = [&](const std::string& name) {
      for (auto& k : e["candidates"])
        if (k["name"] == name)
          return k["bits"].get<std::string>() + " (" + std::to_string(k["ulp_distance"].get<long long>()) + " ULP)";
      return std::string("?");
    };
    const std::string cond = e["condition"].is_string() ? "inf" : fmt_sci(e["condition"].get<double>());
    t.add_row({fmt_count(c["elements"]), fmt_count(c["differing"]),
               "(" + std::to_string(c["row"].get<long long>()) + ", " + std::to_string(c["col"].get<long long>()) + ")",
               short_decimal(e["exact"]["decimal"].get<std::string>(), 12), e["correctly_rounded"]["bits"].get<std::string>(),
               cand("psi-baseline"), cand("official"), cond});
    t.notes.push_back(c["explanation_text"].get<std::string>());
  }
  return {t};
}

}  // namespace psi::exp
