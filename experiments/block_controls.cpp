// block-controls (Table VI): on identical frozen block inputs, every numerics variant (today psi's
// dense path, official-h200, the H200's MATH arithmetic, official-h200-flash, its FLASH arithmetic,
// baseline PSI and modified PSI) against the recorded official MATH block (and the recorded FLASH block as the
// official implementation's own control): as the paper's Table VI, the MATH, FLASH and psi rows
// with their peak memory (the recording GPU's for the recorded blocks, the process peak of each
// psi path's own probe run here) and video and audio relative L2 to MATH.
// A second table ranks every path, the recorded official ones included, by its distance to the
// float64 block (engine/model/block_f64.h) on the same BF16 weights and inputs; a third puts
// every element where the recorded FLASH and MATH blocks differ down to a step of
// engine/official/math_to_flash.h.
#include "experiments/device_summary.h"
#include "experiments/paper_line.h"
#include "experiments/process_peak.h"
#include "experiments/experiment.h"
#include "experiments/records.h"
#include "experiments/report.h"
#include "experiments/settle.h"

#include <algorithm>
#include <optional>

#include "engine/distance.h"
#include "engine/json_read.h"
#include "engine/metric.h"
#include "engine/model/block_f64.h"
#include "engine/model/variant.h"
#include "engine/official/math_to_flash.h"
#include "experiments/probe_results.h"
#include "hdf5/h5.h"
#include "hdf5/schema.h"
#include "probes/recorded_paths.h"
#include "report/diff_figures.h"

namespace psi::exp {

// A difference map's numbers, flat in the figure record that draws it (probes/ keeps no JSON).
template <>
struct FieldsOf<psi::DiffMap> {
  static auto list() {
    using R = psi::DiffMap;
    return std::tuple{field("first_row", &R::first_row), field("rows", &R::rows),
                      field("cols", &R::cols),           field("row_step", &R::row_step),
                      field("col_step", &R::col_step),   field("cells", &R::cells),
                      field("histogram", &R::histogram)};
  }
};

// The recorded block through every path.
struct BlockControlsCase {
  struct FlashVsMath {  // "official_flash_vs_math": FLASH against MATH of the recordings
    std::string tensor;
    Distance distance;  // flat in the record
    static auto fields() { return std::tuple{field("tensor", &FlashVsMath::tensor), fields_flat(&FlashVsMath::distance)}; }
  };
  struct Float64Row {  // "float64_rows": a path's distance to the float64 block
    std::string path, tensor, rows;
    Distance distance;  // flat in the record
    static auto fields() {
      using R = Float64Row;
      return std::tuple{field("path", &R::path), field("tensor", &R::tensor), field("rows", &R::rows),
                        fields_flat(&R::distance)};
    }
  };
  // "flash_causes": one probe's elements where the recorded FLASH and MATH blocks differ, each
  // put down to the last step of engine/official/math_to_flash.h that changes it.
  struct FlashCause {
    std::string tensor, rows;
    std::int64_t total = 0, differing = 0;
    std::vector<std::int64_t> by_step;  // steps 1 … 7
    std::int64_t not_reproduced = 0;    // official-h200 or official-h200-flash not the recording there
    static auto fields() {
      using R = FlashCause;
      return std::tuple{field("tensor", &R::tensor),       field("rows", &R::rows),
                        field("total", &R::total),         field("differing", &R::differing),
                        field("by_step", &R::by_step),     field("not_reproduced", &R::not_reproduced)};
    }
  };
  // "ulp_figures": a differing cell of the main table (a path's video_out or audio_out against the
  // MATH recording) with the numbers its two figures draw (report/diff_figures.h).
  struct UlpFigure {
    std::string path, tensor;  // the table's row and column ("psi dense", "video_out")
    std::string figure;        // the figures' name stem: "dense.video_out.math"
    psi::DiffMap map;       // flat in the record
    static auto fields() {
      using R = UlpFigure;
      return std::tuple{field("path", &R::path), field("tensor", &R::tensor), field("figure", &R::figure),
                        fields_flat(&R::map)};
    }
    void check() const {
      if (map.histogram.size() != std::size_t(psi::kUlpClasses))
        throw Error("block-controls: ulp_figures " + figure + ": " + std::to_string(map.histogram.size()) +
                    " histogram classes, not " + std::to_string(psi::kUlpClasses));
    }
  };
  std::string case_name;
  std::string file;
  std::uint64_t seed = 0;
  std::vector<ProbeRow> rows;
  std::vector<FlashVsMath> official_flash_vs_math;
  std::optional<std::vector<Float64Row>> float64_rows;  // absent in reports before the float64 block
  std::optional<std::vector<FlashCause>> flash_causes;  // absent in reports before the FLASH core
  nlohmann::json official_timing_and_memory;            // the recording machine's, as recorded
  std::vector<std::string> notes;
  std::optional<std::vector<UlpFigure>> ulp_figures;  // absent in reports before the figures
  // The recording GPU's peak allocation while it ran the MATH and the FLASH block (torch's
  // max_memory_allocated, the recordings' timing_and_memory), and each psi path's process peak over
  // its own probe run; absent in reports before the peak column (or in a recording without it).
  std::optional<std::uint64_t> official_math_peak_bytes, official_flash_peak_bytes;
  std::optional<std::map<std::string, ProcessPeak>> process_peaks;
  static auto fields() {
    using R = BlockControlsCase;
    return std::tuple{field("case", &R::case_name),
                      field("file", &R::file).provenance(),
                      field_if_present("seed", &R::seed),
                      field("rows", &R::rows),
                      field("official_flash_vs_math", &R::official_flash_vs_math),
                      field_optional("float64_rows", &R::float64_rows),
                      field_optional("flash_causes", &R::flash_causes),
                      field("official_timing_and_memory", &R::official_timing_and_memory),
                      field_if_present("notes", &R::notes),
                      field_optional("ulp_figures", &R::ulp_figures),
                      field_optional("official_math_peak_bytes", &R::official_math_peak_bytes),
                      field_optional("official_flash_peak_bytes", &R::official_flash_peak_bytes),
                      field_optional("process_peaks", &R::process_peaks)};
  }
};

namespace {
// The recorded block that stands for a config: the small block for tiny and small, the
// full-size first block for ltx2-22b.
std::string block_case(const Options& o) {
  if (o.model == "ltx2-22b") return "block-full";
  return o.profile == "ltx2" ? "block-small-alt" : "block-small";
}

// "all", or the token rows [first, first + count) of `of`.
std::string rows_label(std::int64_t first, std::int64_t count, std::int64_t of) {
  return count == of ? "all"
                     : "rows " + std::to_string(first) + "-" + std::to_string(first + count - 1) + " of " +
                           std::to_string(of);
}

// A BF16 path's rows [first, first + count) of axis 1 against the float64 block: relative L2 in
// double against the float64 values, and the elements that differ from their BF16 rounding
// (psi probe's float64 rows measure the recordings with the same distance).
BlockControlsCase::Float64Row distance_to_f64(const std::string& path, const std::string& tensor, const Bf16* ours,
                               const F64Tensor& ref, std::int64_t first, std::int64_t count) {
  const std::int64_t inner = ref.numel() / (ref.dim(0) * ref.dim(1)), n = count * inner;
  return {path, tensor, rows_label(first, count, ref.dim(1)),
          distance(std::span<const Bf16>(ours, std::size_t(n)), std::span<const double>(ref.ptr() + first * inner, std::size_t(n)))};
}

using NamedOutputs = std::vector<std::pair<std::string, Bf16Tensor>>;

const NamedOutputs* outputs_of(const probes::ProbeReport& r, const std::string& variant) {
  for (const auto& [v, tensors] : r.outputs)
    if (v == variant) return &tensors;
  return nullptr;
}

const Bf16Tensor* tensor_of(const NamedOutputs& o, const std::string& name) {
  for (const auto& [n, t] : o)
    if (n == name) return &t;
  return nullptr;
}

const probes::RecordedPaths* recorded_of(const std::vector<probes::RecordedPaths>& recorded, const std::string& name) {
  for (const auto& p : recorded)
    if (p.tensor == name) return &p;
  return nullptr;
}

// Every element where the recorded FLASH and MATH blocks differ, on the rows both store, put down
// to a step of engine/official/math_to_flash.h: the block under official-h200 (step 0), math-to-flash-1
// … 6 (`steps`) and official-h200-flash (7), and the element to the last step whose block changes
// it. Elements where step 0 or 7 is not the recording count as not reproduced, so the columns add
// up to the recorded differing count whatever psi reproduces.
std::vector<BlockControlsCase::FlashCause> flash_causes(const probes::ProbeReport& r, const probes::ProbeReport& steps,
                                                        const std::vector<probes::RecordedPaths>& recorded) {
  std::vector<const NamedOutputs*> chain{outputs_of(r, model::variant_claiming("math").name)};
  for (int k = 1; k < official::kMathToFlashSteps; ++k) chain.push_back(outputs_of(steps, model::math_to_flash_variant(k).name));
  chain.push_back(outputs_of(r, model::variant_claiming("flash").name));
  if (std::find(chain.begin(), chain.end(), nullptr) != chain.end()) return {};
  std::vector<BlockControlsCase::FlashCause> causes;
  for (const probes::RecordedPaths& p : recorded) {
    if (!p.flash) continue;
    const std::string& name = p.tensor;
    const probes::StoredTensor &m = p.math, &f = *p.flash;
    const Bf16Tensor* t0p = tensor_of(*chain.front(), name);
    if (!t0p) continue;
    const Bf16Tensor& t0 = *t0p;
    std::vector<const Bf16*> at;
    for (const NamedOutputs* o : chain) {
      const Bf16Tensor* t = tensor_of(*o, name);
      if (!t || t->shape != t0.shape) throw Error("block-controls: a math-to-flash step has no " + name);
      at.push_back(t->ptr());
    }
    const std::int64_t first = m.full ? 0 : m.first_row, count = m.full ? t0.dim(1) : m.row_count;
    const std::int64_t inner = t0.numel() / (t0.dim(0) * t0.dim(1)), n = count * inner;
    BlockControlsCase::FlashCause c{name, rows_label(first, count, t0.dim(1)), n, 0,
                                    std::vector<std::int64_t>(official::kMathToFlashSteps, 0), 0};
    for (std::int64_t e = 0; e < n; ++e) {
      const std::uint16_t rm = m.data.data[std::size_t(e)].bits, rf = f.data.data[std::size_t(e)].bits;
      if (rm == rf) continue;
      ++c.differing;
      const std::int64_t i = first * inner + e;
      if (at.front()[i].bits != rm || at.back()[i].bits != rf) {
        ++c.not_reproduced;
        continue;
      }
      for (int k = official::kMathToFlashSteps; k >= 1; --k)
        if (at[std::size_t(k - 1)][i].bits != at[std::size_t(k)][i].bits) {
          ++c.by_step[std::size_t(k - 1)];
          break;
        }
    }
    causes.push_back(std::move(c));
  }
  return causes;
}

// The figures' numbers of every differing cell of the main table, in its order: the recorded
// FLASH block, then each psi path, video_out and audio_out against the MATH recording on the rows
// it stores. (psi probe <case> --figures draws every probe of every variant: some 80 comparisons
// of the small block, too many to put beside one report.)
std::vector<BlockControlsCase::UlpFigure> ulp_figures(const probes::ProbeReport& r,
                                                   const std::vector<probes::RecordedPaths>& recorded) {
  static const char* const kOutputs[] = {"video_out", "audio_out"};
  std::vector<BlockControlsCase::UlpFigure> figs;
  for (const std::string tensor : kOutputs) {
    const probes::RecordedPaths* p = recorded_of(recorded, tensor);
    if (!p || !p->flash) continue;
    const probes::StoredTensor &m = p->math, &f = *p->flash;
    // Tokens x channels: every axis after the token axis (axis 1) is a channel.
    const std::int64_t channels = m.data.numel() / (m.data.dim(0) * m.data.dim(1));
    psi::DiffMap d = psi::diff_map(f.data.span(), m.data.span(), m.first_row, m.data.dim(1), channels);
    if (d.differing() > 0)
      figs.push_back({"official FLASH (recorded)", tensor, "flash-recording." + tensor + ".math", std::move(d)});
  }
  for (const std::string& v : model::numerics_variant_names())
    for (const std::string tensor : kOutputs)
      for (const auto& t : r.results)
        if (t.variant == v && t.tensor == tensor && t.backend == "math" && t.diff)
          figs.push_back({"psi " + v, tensor, v + "." + tensor + ".math", *t.diff});
  return figs;
}

// The recording GPU's peak allocation for one recorded block (`path`: "math" or "flash"): the
// timing_and_memory attribute of its group in `file` (or of the case's group, where a file holds one
// path); nullopt where the recording has none.
std::optional<std::uint64_t> recorded_peak(const std::filesystem::path& file, const std::string& group,
                                           const std::string& path) {
  auto f = hdf5::File::open_read(file);
  for (const std::string object : {"/" + group + "/" + path, "/" + group}) {
    if (!f.exists(object)) continue;
    const auto tm = f.attr(object, "timing_and_memory");
    if (!tm || !std::holds_alternative<std::string>(*tm)) continue;
    const auto j = read_json_if_valid(std::get<std::string>(*tm), file.string() + ":" + object + ": attribute timing_and_memory");
    if (!j || j->value("mode", path) != path) continue;
    if (const auto it = j->find("max_memory_allocated_bytes"); it != j->end() && it->is_number_unsigned())
      return it->get<std::uint64_t>();
  }
  return std::nullopt;
}

// A psi path's peak over its own probe run: on the CPU backend the process's resident peak; the
// probe's device runtime records no GPU memory, so on CUDA there is none to give.
ProcessPeak probe_peak(rt::BackendKind backend, const rt::ResidentPeak& resident) {
  if (backend == rt::BackendKind::cpu) return process_peak(backend, nullptr, resident);
  return {kGpuPeak, std::nullopt, "not sampled (psi probe's runtime takes no NVML readings)"};
}

// Joins one path's probe run into the whole run's report.
void join(probes::ProbeReport& whole, probes::ProbeReport&& part) {
  if (whole.results.empty() && whole.float64_outputs.empty()) {
    whole = std::move(part);
    return;
  }
  for (auto& x : part.results) whole.results.push_back(std::move(x));
  for (auto& x : part.outputs) whole.outputs.push_back(std::move(x));
  for (auto& x : part.float64_outputs) whole.float64_outputs.push_back(std::move(x));
  for (auto& x : part.unverified)
    if (std::find(whole.unverified.begin(), whole.unverified.end(), x) == whole.unverified.end())
      whole.unverified.push_back(std::move(x));
  whole.seconds += part.seconds;
}

// Every path's distance to the float64 block, probe by probe, on the rows the MATH recording
// stores (all of them but for the full-size block's video probes).
std::vector<BlockControlsCase::Float64Row> float64_rows(const probes::ProbeReport& r,
                                                        const std::vector<probes::RecordedPaths>& recorded) {
  std::vector<BlockControlsCase::Float64Row> rows;
  for (const auto& [name, ref] : r.float64_outputs) {
    const probes::RecordedPaths* p = recorded_of(recorded, name);
    if (!p) continue;
    const probes::StoredTensor& m = p->math;
    const std::int64_t first = m.full ? 0 : m.first_row, count = m.full ? ref.dim(1) : m.row_count;
    const std::int64_t inner = ref.numel() / (ref.dim(0) * ref.dim(1));
    rows.push_back(distance_to_f64("official MATH (recorded)", name, m.data.ptr(), ref, first, count));
    if (p->flash)
      rows.push_back(distance_to_f64("official FLASH (recorded)", name, p->flash->data.ptr(), ref, first, count));
    for (const auto& [variant, tensors] : r.outputs)
      for (const auto& [tname, t] : tensors)
        if (tname == name)
          rows.push_back(distance_to_f64("psi " + variant, name, t.ptr() + first * inner, ref, first, count));
  }
  return rows;
}
}  // namespace

void run_block_controls(const Options& o, Report& report) {
  const std::string name = block_case(o);
  const probes::ProbeCase& pc = probes::probe_case(name);
  probes::ProbeOptions po = probe_options(o);
  po.reference = reference_dir(o) / pc.default_file;
  if (!pc.flash_default_file.empty()) po.flash_reference = reference_dir(o) / pc.flash_default_file;
  std::vector<std::string> paths = model::numerics_variant_names();
  paths.emplace_back(probes::kFloat64Variant);
  // One probe run per path, so that each path's peak is its own.
  probes::ProbeReport r;
  std::map<std::string, ProcessPeak> peaks;
  for (const std::string& path : paths) {
    po.variants = {path};
    const rt::ResidentPeak resident;
    join(r, probes::run_probe(name, po));
    if (path != probes::kFloat64Variant) peaks[path] = probe_peak(o.backend, resident);
  }
  po.variants = paths;
  save_probe_outputs(report, r);
  for (const auto& [tensor, t] : r.float64_outputs)
    report.writer().write("/probes/" + name + "/float64/" + tensor, t,
                          hdf5::TensorMeta{"float64", "float64 block probe " + tensor, "", {}});

  // The official implementation's own timing and memory on the recording machine.
  nlohmann::json official = nlohmann::json::object();
  auto f = hdf5::File::open_read(r.file);
  if (auto tm = f.attr("/" + r.group, "timing_and_memory"); tm && std::holds_alternative<std::string>(*tm))
    official = read_json_if_valid(std::get<std::string>(*tm), r.file.string() + ":/" + r.group + ": attribute timing_and_memory")
                   .value_or(nlohmann::json::object());
  // FLASH vs MATH of the recordings themselves.
  const std::vector<probes::RecordedPaths> recorded = probes::recorded_paths(r);
  std::vector<BlockControlsCase::FlashVsMath> flash_rows;
  for (const char* t : {"video_out", "audio_out"}) {
    // The main table is these two outputs: a recording without them would leave it empty.
    const probes::RecordedPaths* p = recorded_of(recorded, t);
    if (!p)
      throw Error(r.file.string() + ":/" + r.group + "/math/" + t + ": the recording has no MATH " + std::string(t) +
                  ", which block-controls' table needs");
    if (!p->flash_vs_math)
      throw Error((r.flash_file.empty() ? r.file : r.flash_file).string() + ":/" + r.group + "/flash/" + t +
                  ": the recording has no FLASH " + std::string(t) + " on MATH's rows, which block-controls' table needs");
    flash_rows.push_back({t, *p->flash_vs_math});
  }
  // The math-to-flash steps between the two official cores, on the host: what the cause table
  // is computed from (their outputs are not kept in the report).
  probes::ProbeOptions steps_po = po;
  steps_po.runtime.reset();
  steps_po.variants.clear();
  for (int k = 1; k < official::kMathToFlashSteps; ++k) steps_po.variants.push_back(model::math_to_flash_variant(k).name);
  const probes::ProbeReport steps = probes::run_probe(name, steps_po);
  BlockControlsCase rec{name, r.file.string(), r.seed, probe_rows(r), flash_rows,
                        float64_rows(r, recorded), flash_causes(r, steps, recorded), official, r.notes,
                        ulp_figures(r, recorded)};
  rec.official_math_peak_bytes = recorded_peak(r.file, r.group, "math");
  rec.official_flash_peak_bytes = recorded_peak(r.flash_file.empty() ? r.file : r.flash_file, r.group, "flash");
  rec.process_peaks = std::move(peaks);
  report.add_case(0, rec);
}

namespace {

constexpr const char* kRecordedPeak = "recording GPU, torch max_memory_allocated";

// A metric's cell in the tables that keep the paper's columns: a ratio in `digits` digits, a
// count with thousands separators.
std::string paper_cell(double v, int digits = 3) { return fmt_sci(v, digits); }
std::string paper_cell(std::int64_t v, int = 3) { return fmt_count(v); }

// The cells of the metrics those tables show (engine/metric.h's in_paper_tables), each followed
// by `sep`.
std::string paper_cells(const Distance& d, const std::string& sep, int digits = 3) {
  std::string out;
  for_each_metric([&](const auto& m) {
    if (m.in_paper_tables) out += paper_cell(d.*m.member, digits) + sep;
  });
  return out;
}

// Probes as rows, paths as columns (the two recordings, then every variant): "rel L2 /
// differing", and the path(s) closest to the float64 block by relative L2.
Table float64_table(const std::vector<BlockControlsCase>& cases) {
  std::vector<std::string> paths = {"official MATH (recorded)", "official FLASH (recorded)"};
  for (const model::NumericsVariant& v : model::numerics_variants()) paths.push_back("psi " + v.name);
  Table t;
  t.title = "distance to the float64 block (same BF16 weights and inputs, no BF16 write inside): relative L2 to its "
            "unrounded values, ||path − float64|| / ||float64|| / elements differing from its BF16 rounding (psi "
            "probe --variant float64's rel_l2_to_float64 and differing for the recorded paths)";
  t.columns = {"probe"};
  for (const auto& p : paths) t.columns.push_back(p);
  t.columns.push_back("closest");
  for (const BlockControlsCase& c : cases) {
    if (!c.float64_rows) continue;
    using Row = BlockControlsCase::Float64Row;
    std::map<std::string, std::map<std::string, const Row*>> by;  // tensor -> path -> row
    std::vector<std::string> order;
    for (const Row& r : *c.float64_rows) {
      if (!by.count(r.tensor)) order.push_back(r.tensor);
      by[r.tensor][r.path] = &r;
    }
    for (const auto& tensor : order) {
      const auto& row_of = by[tensor];
      const Row& any = *row_of.begin()->second;
      std::vector<std::string> cells{tensor + " (" + fmt_count(any.distance.total) + (any.rows == "all" ? "" : ", " + any.rows) +
                                     ")"};
      std::string closest;
      double best = INFINITY;
      for (const auto& p : paths) {
        const auto it = row_of.find(p);
        if (it == row_of.end()) {
          cells.push_back("—");
          continue;
        }
        const double l2 = it->second->distance.rel_l2;  // the ranking's
        // Paths differ in the 3rd digit: 4 of them.
        cells.push_back(paper_cells(it->second->distance, " / ", 4) + fmt_count(it->second->distance.differing));
        if (l2 < best) {
          best = l2;
          closest = p;
        } else if (l2 == best) {
          closest += " = " + p;  // bitwise-equal paths (dense and modified on 64-dim heads) tie
        }
      }
      cells.push_back(closest);
      t.add_row(std::move(cells));
    }
    t.notes.push_back("float64 block: engine/model/block_f64.h, products in float64 (Eigen), exact 1/sqrt(d), "
                      "std::exp/std::tanh in double; differing counts compare each path with the float64 value "
                      "correctly rounded to BF16.");
  }
  return t;
}

// Probes as rows, the math-to-flash steps as columns: how many of the elements where the
// recorded FLASH and MATH blocks differ each step accounts for.
Table flash_cause_table(const std::vector<BlockControlsCase>& cases) {
  Table t;
  t.title = "why the recorded FLASH and MATH blocks differ, element by element: each differing element to the last "
            "step that changes it on the way from the MATH core to the FLASH core (engine/official/math_to_flash.h)";
  t.columns = {"probe", "FLASH vs MATH differing"};
  for (int k = 1; k <= official::kMathToFlashSteps; ++k) t.columns.push_back(official::math_to_flash_step_name(k));
  t.columns.push_back("not reproduced");
  for (const BlockControlsCase& c : cases) {
    if (!c.flash_causes) continue;
    for (const auto& fc : *c.flash_causes) {
      std::vector<std::string> cells{fc.tensor + " (" + fmt_count(fc.total) + (fc.rows == "all" ? "" : ", " + fc.rows) +
                                         ")",
                                     fmt_count(fc.differing)};
      for (std::int64_t n : fc.by_step) cells.push_back(fmt_count(n));
      cells.push_back(fmt_count(fc.not_reproduced));
      t.add_row(std::move(cells));
    }
    t.notes.push_back("steps: the MATH core (official-h200) given FLASH's QK product on the tensor cores, its ex2 "
                      "exponent, its row-sum order, the reciprocal after P·V, P rounded to BF16, P·V on the tensor "
                      "cores, and last the key split (tiles, split-KV and combine), which is the FLASH core "
                      "(official-h200-flash); the blocks in between are psi run with --variant math-to-flash-K. Not "
                      "reproduced: official-h200 or official-h200-flash differs from its recording at that element.");
  }
  return t;
}

}  // namespace

std::vector<Figure> figures_block_controls(const nlohmann::json& case_records) {
  std::vector<Figure> figs;
  for (const BlockControlsCase& c : case_records.get<std::vector<BlockControlsCase>>())
    if (c.ulp_figures)
      for (const auto& u : *c.ulp_figures)
        for (Figure& f : diff_figures(u.figure, u.path + " " + u.tensor + " vs MATH", u.map))
          figs.push_back(std::move(f));
  return figs;
}

std::vector<Table> tabulate_block_controls(const nlohmann::json& case_records, const nlohmann::json& options) {
  const auto cases = case_records.get<std::vector<BlockControlsCase>>();
  Table t;
  t.title = "block controls on identical frozen inputs (Table VI): relative L2 to the official MATH block, "
            "||path − MATH|| / ||MATH|| (psi probe's rel_l2 against math)";
  // The paper's columns (peak, video and audio error: the metrics marked in_paper_tables), then
  // psi's differing counts.
  t.columns = {"path", "peak memory"};
  for_each_metric([&](const auto& m) {
    if (m.in_paper_tables)
      for (const char* output : {"video_out ", "audio_out "}) t.columns.push_back(output + std::string(m.label));
  });
  t.columns.insert(t.columns.end(), {"video differing", "audio differing"});
  t.time_columns = {"peak memory"};  // psi's process peaks differ from run to run
  const auto cells = [](const std::string& path, const std::string& peak, const Distance& video, const Distance& audio) {
    std::vector<std::string> c{path, peak};
    for_each_metric([&](const auto& m) {
      if (m.in_paper_tables)
        for (const Distance* d : {&video, &audio}) c.push_back(paper_cell((*d).*m.member));
    });
    c.push_back(fmt_count(video.differing) + " / " + fmt_count(video.total));
    c.push_back(fmt_count(audio.differing) + " / " + fmt_count(audio.total));
    return c;
  };
  // MATH against itself: 0 by definition, on the elements the others count.
  const auto none_of = [](const Distance& d) {
    Distance zero;
    zero.total = d.total;
    return zero;
  };
  const auto recorded_peak_cell = [](const std::optional<std::uint64_t>& bytes) {
    return bytes ? fmt_mib(double(*bytes)) + " (" + kRecordedPeak + ")" : std::string("not recorded");
  };
  // Every cell names its kind: the recording GPU's allocation and psi's process peak are not one.
  const ProcessPeakColumn psi_peak{"peak memory", true};
  for (const BlockControlsCase& c : cases) {
    std::map<std::string, std::map<std::string, const Distance*>> by;  // variant -> tensor -> distance
    for (const ProbeRow& r : c.rows)
      if (r.distance && (r.backend == "math" || r.backend == "official")) by[r.variant][r.tensor] = &*r.distance;
    const Distance *fv = nullptr, *fa = nullptr;
    for (const auto& r : c.official_flash_vs_math) (r.tensor == "video_out" ? fv : fa) = &r.distance;
    // MATH is the reference: its own row is 0 by definition, on the elements the others count.
    if (fv && fa)
      t.add_row(cells("official MATH (recorded)", recorded_peak_cell(c.official_math_peak_bytes), none_of(*fv),
                      none_of(*fa)));
    if (fv && fa) t.add_row(cells("official FLASH (recorded)", recorded_peak_cell(c.official_flash_peak_bytes), *fv, *fa));
    for (const std::string& v : model::numerics_variant_names()) {
      if (!by.count(v)) continue;
      const auto* vo = by[v]["video_out"];
      const auto* ao = by[v]["audio_out"];
      if (!vo || !ao) continue;
      const ProcessPeak* peak = nullptr;
      if (c.process_peaks && c.process_peaks->count(v)) peak = &c.process_peaks->at(v);
      t.add_row(cells("psi " + v, psi_peak.cell(peak), *vo, *ao));
    }
    const auto& tm = c.official_timing_and_memory;
    if (!tm.is_null() && !tm.empty()) t.notes.push_back("official timing and memory on the recording GPU: " + tm.dump());
    note_recording(t, "case " + c.case_name + " recorded in", c.file, c.seed);
    t.notes.push_back("peak memory: for the recorded blocks their recordings' timing_and_memory (" +
                      std::string(kRecordedPeak) + "); for psi's paths the process peak over each path's "
                      "own probe run (" + (c.process_peaks && !c.process_peaks->empty()
                                               ? c.process_peaks->begin()->second.kind
                                               : std::string("not recorded")) +
                      "), the whole process and not the block's allocation alone.");
    t.notes.push_back(paper_note("Table VI, RTX A6000, real weights: rows MATH, FLASH and native with peak, video "
                                 "and audio error; FLASH vs MATH video 2.246e-3, audio 3.195e-3, psi's official "
                                 "FLASH (recorded) row; the peaks and the native row's values are in the paper's "
                                 "Table VI",
                                 options));
    if (c.ulp_figures && !c.ulp_figures->empty())
      t.notes.push_back("figures beside the report, for each of the " + std::to_string(c.ulp_figures->size()) +
                        " nonzero differing cells: where the output differs from MATH over tokens x channels "
                        "(<report>.<path>.<tensor>.math.ulp-map) and its elements per BF16 ULP class "
                        "(.ulp-histogram); their numbers are the case's ulp_figures. Every probe: psi probe " +
                        c.case_name + " --figures DIR.");
  }
  std::vector<Table> tables{t};
  if (Table f = float64_table(cases); !f.rows.empty()) tables.push_back(std::move(f));  // reports before it have none
  if (Table f = flash_cause_table(cases); !f.rows.empty()) tables.push_back(std::move(f));
  return tables;
}

void settle_block_controls(Options& o) {
  // The recorded blocks: block_small (profile ltx25), block_small_alt (ltx2), the full-size first
  // block (ltx25). Without --model the small block runs.
  const std::string model = o.model_given ? o.model : "small";
  if (model == "ltx2-22b" && o.profile == "ltx25") {
    settle_on_recordings(o, "block-controls", model, o.profile,
                         {recording_of("block-full"), recording_of("block-full", true)});
  } else if (model == "small") {
    settle_on_recordings(o, "block-controls", model, o.profile,
                         {recording_of(o.profile == "ltx2" ? "block-small-alt" : "block-small")});
  } else {
    throw Error("--model " + o.model + " --profile " + o.profile +
                ": block-controls has no recorded block of that config (recorded: small with ltx25 or ltx2, "
                "ltx2-22b with ltx25)");
  }
}

namespace {

// The recorded FLASH block's cell among the variants' (no variant is named with a space).
constexpr const char* kFlashCell = "recorded flash";

// The device check's section: each path's relative L2 to the recorded MATH block, probe by probe,
// beside the recorded FLASH block's.
std::string block_controls_device_summary(const DeviceSummaryInput& in) {
  std::vector<std::string> tensors;
  std::map<std::string, std::map<std::string, std::string>> cell;  // tensor -> column -> text
  std::string case_name;
  for (const BlockControlsCase& c : in.cases.get<std::vector<BlockControlsCase>>()) {
    case_name = c.case_name;
    for (const ProbeRow& row : c.rows) {
      if (!row.distance || row.backend != "math") continue;
      if (std::find(tensors.begin(), tensors.end(), row.tensor) == tensors.end()) tensors.push_back(row.tensor);
      const Distance& d = *row.distance;
      cell[row.tensor][row.variant] = paper_cells(d, " ") + "(" + fmt_count((long long)d.differing) + " / " +
                                      fmt_count((long long)d.total) + ")";
    }
    for (const BlockControlsCase::FlashVsMath& d : c.official_flash_vs_math) {
      std::string flash = paper_cells(d.distance, " ");
      if (!flash.empty()) flash.pop_back();
      cell[d.tensor][kFlashCell] = flash;
    }
  }
  // The variants that claim no recording: the claimants' distance to it is 0 by their claim,
  // which psi probe --require-bitwise checks.
  std::vector<std::string> paths;
  for (const model::NumericsVariant& v : model::numerics_variants())
    if (v.claims.empty()) paths.push_back(v.name);
  Table t;
  t.columns = {"probe"};
  for (const std::string& p : paths) t.columns.push_back("psi " + p);
  t.columns.push_back("official FLASH (recorded)");
  for (const auto& tensor : tensors) {
    auto& c = cell[tensor];
    auto get = [&](const std::string& k) { return c.count(k) ? c[k] : std::string("-"); };
    std::vector<std::string> row{tensor};
    for (const std::string& p : paths) row.push_back(get(p));
    row.push_back(get(kFlashCell));
    t.add_row(std::move(row));
  }
  return md_table(t) + "\n- case " + case_name + "; relative L2 (differing / total BF16 elements) against the recorded " +
         "MATH tensors (video probes: the recorded rows); report backend attribute: " + in.backend +
         ", device: " + in.device_name + "\n\n";
}

}  // namespace

const Registration block_controls_registration{6, {
    .name = "block-controls",
    .reproduces = "Table VI",
    .summary = model::numerics_variant_list() + " vs the recorded official MATH and FLASH block on identical frozen "
               "inputs, and why FLASH and MATH differ, element by element",
    .run = run_block_controls,
    .tabulate = tabulate_block_controls,
    .figures = figures_block_controls,
    .settle = settle_block_controls,
    .reread = reread_as<BlockControlsCase>,
    .time_fields = time_keys_of<BlockControlsCase>,
    .provenance_fields = provenance_keys_of<BlockControlsCase>,
    .device_summary = block_controls_device_summary}};

}  // namespace psi::exp
