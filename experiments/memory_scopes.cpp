// memory-scopes (Fig. 2, §IV-A): what each memory scope holds at the first invocation of each
// stage, all blocks through the PSI executor in the default arena: the managed arena and its
// pages, the scratch and workspace high-water marks, the measured managed peak against its
// declared bound, and the process peak. On CUDA the process peak is the GPU memory NVML lists
// for the psi process, sampled through the stage (RunReport::gpu_memory); on the CPU backend
// only the arena accounting is meaningful, so the host process's own peak resident set (VmHWM,
// which includes the host journal and every weight generated) is shown beside it, marked as such.
#include "experiments/experiment.h"
#include "experiments/report.h"

#include <chrono>

#include "engine/exec/executor.h"
#include "engine/interrupt.h"
#include "engine/measure/resident_peak.h"
#include "engine/model/variant.h"
#include "engine/pipeline/trajectory.h"
#include "engine/progress.h"
#include "engine/runtime/run_report.h"
#include "experiments/block_support.h"
#include "experiments/gpu_memory_cells.h"
#include "experiments/paper_line.h"

namespace psi::exp {

// One stage through every block.
struct MemoryScopesCase {
  int stage = 0;
  struct Result {
    std::string outcome;
    std::optional<std::string> failure;  // the table notes a failed stage's
    static auto fields() {
      using R = Result;
      return std::tuple{field("outcome", &R::outcome),
                        field_optional("failure", &R::failure).when(+[](const R& r) { return r.outcome != "complete"; })};
    }
  } result;
  std::int64_t video_tokens = 0, audio_tokens = 0, blocks = 0;
  std::string arena, backend;
  double wall_s = 0;
  nlohmann::json run;
  std::string process_peak_kind;
  std::optional<std::uint64_t> process_peak_bytes;  // null: NVML did not list the process
  static auto fields() {
    using R = MemoryScopesCase;
    return std::tuple{field("stage", &R::stage),
                      field("result", &R::result),
                      field("video_tokens", &R::video_tokens),
                      field("audio_tokens", &R::audio_tokens),
                      field_if_present("blocks", &R::blocks),
                      field_if_present("arena", &R::arena),
                      field_if_present("backend", &R::backend),
                      field("wall_s", &R::wall_s).measures_time(),
                      field("run", &R::run),
                      field("process_peak_kind", &R::process_peak_kind),
                      field_nullable("process_peak_bytes", &R::process_peak_bytes)};
  }
};

void run_memory_scopes(const Options& o, Report& report) {
  const model::ModelConfig c = model::model_config(o.model, o.profile);
  const model::NumericsVariant variant = variant_of(o, kRuntimeVariant);
  const exec::ArenaSettings arena = exec::default_arena(c);
  auto weights = block_weight_source(o, c, o.seed);
  model::SynthInitSource host(o.seed);
  exec::ExecOptions eo;
  eo.backend = rt::backend_name(o.backend);
  if (o.chaos_seed) eo.chaos_seed = o.chaos_seed;
  pipeline::TrajectoryCase tc{"first_block", "first_block", 1, o.seed, o.seed};
  Progress progress("memory-scopes", long(2 * c.layers));
  for (int stage = 1; stage <= 2; ++stage) {
    model::BlockInputs in = pipeline::first_block_inputs(c, host, tc, stage);
    exec::PsiExecutor ex(c, *weights, variant, exec::schedule("reuse+prefetch"), arena, eo);
    const auto t0 = std::chrono::steady_clock::now();
    MemoryScopesCase rec;
    rec.result.outcome = "complete";
    rt::RunReport r;
    try {
      for (int b = 0; b < int(c.layers); ++b) {
        check_interrupt("memory-scopes stage " + std::to_string(stage) + " block " + std::to_string(b + 1));
        model::BlockTaps p = ex.run_block(b, in);
        in.video.x = p.video_out;
        in.audio.x = p.audio_out;
        progress.step("stage " + std::to_string(stage) + " block " + std::to_string(b + 1) + "/" + std::to_string(c.layers));
      }
      r = ex.finish();
    } catch (const rt::RunFailure& f) {
      // A stage that does not fit the arena is a result of this table, not a crash.
      rec.result.outcome = rt::outcome_name(f.outcome());
      rec.result.failure = f.what();
      if (ex.has_runtime()) r = ex.report();
    }
    const bool on_gpu = r.gpu_memory.applicable;
    rec.stage = stage;
    rec.video_tokens = in.video.x.dim(1);
    rec.audio_tokens = in.audio.x.dim(1);
    rec.blocks = c.layers;
    rec.arena = arena.label;
    rec.backend = rt::backend_name(o.backend);
    rec.wall_s = seconds_since(t0);
    rec.run = rt::to_json(r);
    rec.process_peak_kind = on_gpu ? "GPU, NVML" : "host VmHWM (CPU backend)";
    // None when NVML did not list the process: the reason is in run.gpu_memory.
    if (!on_gpu) rec.process_peak_bytes = rt::resident_peak_bytes();
    else if (const auto& peak = rec.run.at("gpu_memory").at("process_peak_bytes"); !peak.is_null())
      rec.process_peak_bytes = peak.get<std::uint64_t>();
    report.add_case(stage - 1, rec);
  }
}

std::vector<Table> tabulate_memory_scopes(const nlohmann::json& case_records, const nlohmann::json& options) {
  const auto cases = case_records.get<std::vector<MemoryScopesCase>>();
  Table t;
  t.title = "memory scopes per stage (Fig. 2, §IV-A) — model " + recorded_model(options);
  t.columns = {"stage", "outcome", "tokens (video / audio)", "arena", "pages (2P)", "workspace high-water", "scratch high-water",
               "managed peak", "declared bound", "process peak", "wall (s)"};
  t.time_columns = {"wall (s)"};
  for (const MemoryScopesCase& c : cases) {
    const auto& r = c.run;
    if (c.result.outcome != "complete") t.notes.push_back("stage " + std::to_string(c.stage) + ": " + *c.result.failure);
    t.add_row({std::to_string(c.stage), c.result.outcome,
               std::to_string(c.video_tokens) + " / " + std::to_string(c.audio_tokens),
               fmt_mib(r["arena_bytes"]), fmt_mib(2.0 * r["page_bytes"].get<double>()),
               fmt_mib(r["workspace_high_water_bytes"]), fmt_mib(r["scratch_high_water_bytes"]),
               fmt_mib(r["managed_peak_bytes"]), fmt_mib(r["bound_bytes"]),
               (c.process_peak_bytes ? fmt_mib(double(*c.process_peak_bytes)) : gpu_process_peak_cell(r)) + " (" +
                   c.process_peak_kind + ")",
               fmt_fixed(c.wall_s, 2)});
  }
  bool gpu = false;
  for (const MemoryScopesCase& c : cases)
    if (c.run.contains("gpu_memory") && c.run["gpu_memory"].value("applicable", false)) {
      gpu = true;
      t.notes.push_back("stage " + std::to_string(c.stage) + ": " + gpu_memory_note(c.run));
    }
  t.notes.push_back("variant " + std::string(kRuntimeVariant) + ", schedule reuse+prefetch; " +
                    (gpu ? "the process peak is the GPU memory NVML lists for the psi process (CUDA context and "
                           "cuBLAS included), sampled through the stage."
                         : "the CPU backend has no device, so the process peak is the host process's resident peak, "
                           "not a GPU number."));
  t.notes.push_back(paper_note("Fig. 2 and §IV-A, LTX-2 22B on an H200: the managed arena's scopes and the process "
                               "peak per stage; psi's rows correspond stage by stage, and the values are in the paper's "
                               "Fig. 2",
                               options));
  return {t};
}

std::vector<Figure> figures_memory_scopes(const nlohmann::json& case_records) {
  BarChart b;
  b.title = "Managed memory scopes per stage, and the process peak (MiB)";
  b.y_label = "MiB";
  for (const auto& c : case_records.get<std::vector<MemoryScopesCase>>()) {
    const auto& r = c.run;
    const std::string stage = "stage " + std::to_string(c.stage);
    auto mib = [](const nlohmann::json& v) { return v.get<double>() / (1024.0 * 1024.0); };
    b.bars.push_back({stage, "pages (2P)", 2 * mib(r["page_bytes"])});
    b.bars.push_back({stage, "workspace high-water", mib(r["workspace_high_water_bytes"])});
    b.bars.push_back({stage, "scratch high-water", mib(r["scratch_high_water_bytes"])});
    b.bars.push_back({stage, "managed peak", mib(r["managed_peak_bytes"])});
    // The whole process beside what psi manages (the table's process peak; none when NVML did
    // not list the process).
    if (c.process_peak_bytes)
      b.bars.push_back({stage, "process peak (" + c.process_peak_kind + ")", double(*c.process_peak_bytes) / (1024.0 * 1024.0)});
    b.bars.push_back({stage, "declared bound", mib(r["bound_bytes"])});
    b.bars.push_back({stage, "arena", mib(r["arena_bytes"])});
  }
  return {{"memory_scopes", render_svg(b)}};
}

const Registration memory_scopes_registration{1, {
    .name = "memory-scopes",
    .reproduces = "Fig. 2, §IV-A",
    .summary = "managed arena, pages, scratch and workspace high-water, managed peak vs bound and process peak per stage",
    .run = run_memory_scopes,
    .tabulate = tabulate_memory_scopes,
    .figures = figures_memory_scopes,
    .reread = reread_as<MemoryScopesCase>,
    .time_fields = time_keys_of<MemoryScopesCase>,
    .provenance_fields = provenance_keys_of<MemoryScopesCase>}};

}  // namespace psi::exp
