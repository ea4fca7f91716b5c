// projection-oracle (eq. 6): the first element where baseline PSI's video Q projection and the
// official recording disagree, explained exactly by the oracle (exact value, conditioning,
// correctly rounded BF16, which float32 orders give each candidate).
#include <filesystem>
#include <sstream>

#include "experiments/experiment.h"
#include "experiments/report.h"
#include "experiments/settle.h"

#include "engine/ops/gemm.h"
#include "hdf5/h5.h"
#include "oracle/explain.h"
#include "oracle/operands.h"
#include "probes/probe_cases.h"
#include "probes/recording.h"

namespace psi::exp {

// The first disagreement, explained when there is one.
struct ProjectionOracleCase {
  std::string file, probe, output;
  std::optional<std::uint64_t> seed;  // the recording's SynthInit seed; absent in earlier reports
  std::int64_t elements = 0, differing = 0;
  struct First {
    nlohmann::json explanation;  // oracle::to_json; first: its presence marks a disagreement
    std::int64_t row = 0, col = 0;
    std::string explanation_text;
    static auto fields() {
      return std::tuple{field("explanation", &First::explanation), field("row", &First::row),
                        field("col", &First::col), field("explanation_text", &First::explanation_text)};
    }
  };
  std::optional<First> first;  // flat in the case
  static auto fields() {
    using R = ProjectionOracleCase;
    return std::tuple{field_if_present("file", &R::file).provenance(),
                      field_if_present("probe", &R::probe),
                      field_if_present("output", &R::output),
                      field_optional("seed", &R::seed),
                      field("elements", &R::elements),
                      // The table shows a disagreement's count and where it is.
                      field_if_present("differing", &R::differing).when(+[](const R& r) { return r.first.has_value(); }),
                      fields_flat(&R::first)};
  }
};

void run_projection_oracle(const Options& o, Report& report) {
  const probes::ProbeCase& recorded = probes::probe_case("video-q-proj");
  const auto file = reference_dir(o) / recorded.default_file;
  auto f = hdf5::File::open_read(file);
  const oracle::LinearProblem p = oracle::load_probe(f, recorded.group);
  const oracle::OutputChoice out = oracle::choose_probe_output(f, p, "");
  const Bf16Tensor official = oracle::load_output(f, out.dataset, p);
  // Baseline PSI computes the projection with float32 accumulation and the bias fused before
  // the single BF16 write (psi's CPU GEMM order, engine/ops/reduce.h).
  Bf16Tensor x = p.x;
  x.shape = {p.rows, p.K};
  const Bf16Tensor ours = ops::linear(x, p.w, p.b ? &*p.b : nullptr, psi::BiasRule::fused_f32);
  std::int64_t first = -1, differing = 0;
  for (std::int64_t i = 0; i < ours.numel(); ++i)
    if (!(ours.data[i] == official.data[i])) {
      if (first < 0) first = i;
      ++differing;
    }
  ProjectionOracleCase rec;
  rec.file = file.string();
  rec.seed = probes::Recording(file, recorded.group).seed();
  rec.probe = recorded.group;
  rec.output = out.dataset;
  rec.elements = ours.numel();
  rec.differing = differing;
  if (first >= 0) {
    const std::int64_t row = first / p.N, col = first % p.N;
    const oracle::Explanation e = oracle::explain(
        p, row, col, {{"psi-baseline", ours.data[first]}, {"official", official.data[first]}});
    // The text names the recording by its file name; its path stays in the JSON's source.file,
    // which psi compare treats as provenance (two paths to the same recording give equal reports).
    oracle::Explanation named = e;
    named.source.file = std::filesystem::path(e.source.file).filename().string();
    rec.first = ProjectionOracleCase::First{oracle::to_json(e), row, col, oracle::to_text(named)};
  }
  report.writer().write("/projection/psi_baseline_q", ours,
                        hdf5::TensorMeta{"baseline", "[256, 4096] video Q projection, psi CPU", "", {}});
  report.add_case(0, rec);
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

std::vector<Table> tabulate_projection_oracle(const nlohmann::json& case_records, const nlohmann::json&) {
  Table t;
  t.title = "first disagreement of baseline PSI and the official video Q projection (eq. 6)";
  t.columns = {"elements", "differing", "first (row, col)", "exact value", "correctly rounded", "psi-baseline",
               "official", "condition"};
  for (const auto& c : case_records.get<std::vector<ProjectionOracleCase>>()) {
    if (!c.file.empty()) note_recording(t, c.probe + " recorded in", c.file, c.seed);
    if (!c.first) {
      t.add_row({fmt_count(c.elements), "0", "-", "-", "-", "-", "-", "-"});
      continue;
    }
    // The oracle's explanation, read as oracle/explain.cpp writes it.
    const auto& e = c.first->explanation;
    auto cand = [&](const std::string& name) {
      for (auto& k : e["candidates"])
        if (k["name"] == name)
          return k["bits"].get<std::string>() + " (" + std::to_string(k["ulp_distance"].get<long long>()) + " ULP)";
      return std::string("?");
    };
    const std::string cond = e["condition"].is_string() ? "inf" : fmt_sci(e["condition"].get<double>());
    t.add_row({fmt_count(c.elements), fmt_count(c.differing),
               "(" + std::to_string(c.first->row) + ", " + std::to_string(c.first->col) + ")",
               short_decimal(e["exact"]["decimal"].get<std::string>(), 12), e["correctly_rounded"]["bits"].get<std::string>(),
               cand("psi-baseline"), cand("official"), cond});
    // The explanation is several lines; a note is one (a newline in it would print as \n).
    std::istringstream lines(c.first->explanation_text);
    for (std::string line; std::getline(lines, line);)
      if (!line.empty()) t.notes.push_back(line);
  }
  return {t};
}

void settle_projection_oracle(Options& o) {
  settle_on_recordings(o, "projection-oracle", "ltx2-22b", "ltx25", {recording_of("video-q-proj")});
}

const Registration projection_oracle_registration{10, {
    .name = "projection-oracle",
    .reproduces = "eq. (6)",
    .summary = "first element where baseline PSI and the official video Q projection disagree, explained exactly",
    .run = run_projection_oracle,
    .tabulate = tabulate_projection_oracle,
    .settle = settle_projection_oracle,
    .reread = reread_as<ProjectionOracleCase>,
    .time_fields = time_keys_of<ProjectionOracleCase>,
    .provenance_fields = provenance_keys_of<ProjectionOracleCase>}};

}  // namespace psi::exp
