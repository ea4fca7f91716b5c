#include "experiments/trajectory_ops.h"

#include <cstdio>
#include <optional>
#include <set>

#include "engine/error.h"
#include "engine/model/variant.h"
#include "engine/ops/attention.h"
#include "engine/ops/gemm.h"
#include "hdf5/schema.h"
#include "hdf5/state_file.h"
#include "probes/probe_cases.h"
#include "probes/provenance.h"

namespace psi::exp {

namespace {

Bf16Tensor copy_of(CBf16Mat m) {
  Bf16Tensor t({m.rows, m.cols});
  for (std::int64_t r = 0; r < m.rows; ++r)
    for (std::int64_t c = 0; c < m.cols; ++c) t.data[std::size_t(r * m.cols + c)] = m.at(r, c);
  return t;
}

std::string slices_text(const official::KernelConfig* kernels, official::ChainKind kind, const official::ProductShape& s) {
  const official::KernelChoice c = official::kernel_choice(kernels, kind, s);
  const std::size_t n = official::k_slices(s.depth, c).size();
  if (c.fma_chain) return std::to_string(n) + " FP32 FMA chain(s)";
  return n == 1 ? "one chain" : std::to_string(n) + " K slices";
}

}  // namespace

void OpCapture::add(CapturedOp op) {
  for (const CapturedOp& o : ops_)
    if (o.site == op.site) throw Error("operator capture: site " + op.site + " met twice in one forward");
  ops_.push_back(std::move(op));
}

void OpCapture::product(const official::ProductCall& call) {
  CapturedOp op;
  op.site = call.site;
  op.shape = {call.shape.rows, call.shape.cols, call.shape.depth};
  op.kernel = "psi official-h200 model: tensor-core, " + slices_text(call.kernels, official::ChainKind::tensor_core, call.shape);
  op.in = copy_of(call.x);
  op.out = copy_of(call.y);
  op.weight = copy_of(call.W);
  if (call.bias) op.bias = copy_of(CBf16Mat{call.bias, 1, call.W.rows, call.W.rows});
  op.rule = call.rule;
  add(std::move(op));
}

void OpCapture::attention(const official::AttentionCall& call) {
  if (call.masked) throw Error("operator capture: " + call.site + " is a masked attention (the capture stores no mask)");
  CapturedOp op;
  op.site = call.site;
  op.attention = true;
  const std::int64_t d = call.q.cols / call.heads;
  op.shape = {call.q.rows, call.k.rows, call.heads, d};
  op.kernel = "psi official-h200 model: SDPA MATH, scores " +
              slices_text(call.kernels, official::ChainKind::f32_scores, {call.q.rows, call.k.rows, d}) + ", P·V " +
              slices_text(call.kernels, official::ChainKind::f32_values, {call.q.rows, d, call.k.rows});
  op.q = copy_of(call.q);
  op.k = copy_of(call.k);
  op.v = copy_of(call.v);
  op.out = copy_of(call.out);
  add(std::move(op));
}

std::string ops_group(const std::string& trajectory_group, int step) {
  char n[16];
  std::snprintf(n, sizeof n, "%02d", step);
  return "/" + trajectory_group + "_ops/step_" + n;
}

std::pair<pipeline::SavedState, pipeline::SavedState> observed_step(const TinyTrajectory& t, int step,
                                                                    const official::KernelConfig& kernels,
                                                                    official::OpObserver& observer) {
  const official::ObserveOps scope(observer);
  return t.forced_state(step, kernels);
}

void write_capture(const std::filesystem::path& out, const std::string& trajectory_group, int step,
                   const std::string& state_name, std::uint64_t seed, const std::vector<CapturedOp>& ops) {
  hdf5::RunInfo run;
  run.experiment = "trajectory_ops";
  run.model_config = "tiny";
  run.backend = "cpu";
  run.seed = seed;
  hdf5::StateWriter w(out, run);
  const std::string g = ops_group(trajectory_group, step);
  w.set_attrs(g, {{"state", state_name}});
  const auto meta = [](const char* what) { return hdf5::TensorMeta{"official-h200", what, "", {}}; };
  for (const CapturedOp& op : ops) {
    const std::string s = g + "/" + op.site;
    if (op.attention) {
      w.write(s + "/q", op.q, meta("[Nq, heads x d] queries after norm and RoPE"));
      w.write(s + "/k", op.k, meta("[Nk, heads x d] keys after norm and RoPE"));
      w.write(s + "/v", op.v, meta("[Nk, heads x d] values"));
      w.write(s + "/out", op.out, meta("[Nq, heads x d] attention core output, heads merged"));
    } else {
      w.write(s + "/in", op.in, meta("[rows, K] product input x"));
      w.write(s + "/out", op.out, meta("[rows, N] product output x W^T + b"));
    }
    w.set_attrs(s, {{"shape", hdf5::shape_json(op.shape)}, {"k", op.depth()}, {"kernel", op.kernel}});
  }
  w.commit();
}

namespace {

// A capture's dataset, whole and checked against its sha256_full, which it must carry.
Bf16Tensor read_checked(const hdf5::StateReader& r, const std::string& dataset) {
  const std::string where = r.path().string() + ":" + dataset;
  if (!r.file().exists(dataset)) throw Error(where + ": missing (every operator of psi's forward is replayed)");
  const Bf16Tensor t = r.read_bf16(dataset);
  switch (hdf5::check_sha256_full(r.file(), dataset, t.ptr(), t.bytes())) {
    case hdf5::Sha256Check::match: return t;
    case hdf5::Sha256Check::mismatch: throw Error(hdf5::sha256_mismatch_message(r.file(), dataset));
    case hdf5::Sha256Check::not_recorded:
      throw Error(where + ": no sha256_full (every dataset of a per-operator capture carries one)");
    case hdf5::Sha256Check::not_whole: break;
  }
  throw Error(where + ": stores part of the tensor only (a per-operator capture stores every element)");
}

// `t` as a [rows, cols] matrix, refused unless its last axis is `cols`.
CBf16Mat matrix_of(const Bf16Tensor& t, std::int64_t cols, const std::string& where) {
  if (t.shape.empty() || t.shape.back() != cols)
    throw Error(where + ": shape " + shape_str(t.shape) + ", psi's operator has " + std::to_string(cols) +
                " columns");
  return as_matrix(t);
}

void need_rows(CBf16Mat m, std::int64_t rows, const std::string& where) {
  if (m.rows != rows)
    throw Error(where + ": " + std::to_string(m.rows) + " rows, psi's operator has " + std::to_string(rows));
}

// Differing elements of `ours` against `rec` (same shape), binned by BF16 ulps.
void count_into(CBf16Mat ours, CBf16Mat rec, OpReplay& r) {
  static constexpr std::int64_t bounds[] = {1, 2, 3, 4, 8};
  for (std::int64_t i = 0; i < rec.rows; ++i)
    for (std::int64_t c = 0; c < rec.cols; ++c) {
      ++r.elements;
      const Bf16 a = ours.at(i, c), b = rec.at(i, c);
      if (a.bits == b.bits) continue;
      ++r.differing;
      const std::int64_t u = bf16_ulp_distance(a, b);
      std::size_t bin = 0;
      while (bin < 5 && u > bounds[bin]) ++bin;
      ++r.ulps[bin];
    }
}

// Elements of the recorded input `rec` that differ from psi's `own`; one row of psi's stands for
// every recorded row (a per-token AdaLN row psi computes once).
std::int64_t input_differences(CBf16Mat own, CBf16Mat rec, OpReplay& r) {
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < rec.rows; ++i)
    for (std::int64_t c = 0; c < rec.cols; ++c) n += own.at(own.rows == 1 ? 0 : i, c).bits != rec.at(i, c).bits;
  r.inputs += rec.rows * rec.cols;
  r.inputs_differing += n;
  return n;
}

std::string shape_words(const CapturedOp& op) {
  if (!op.attention)
    return official::shape_text({op.shape[0], op.shape[1], op.shape[2]});
  return std::to_string(op.shape[0]) + "x" + std::to_string(op.shape[1]) + " keys, " + std::to_string(op.shape[2]) +
         " heads of " + std::to_string(op.shape[3]);
}

// What a capture declares of how it was made (the seed, the model configuration, the state of
// its step), for check_manifest against the recording it is replayed on: a step of another seed
// would otherwise be reported as departing operators.
probes::Manifest capture_manifest(const hdf5::StateReader& r, const std::string& group) {
  const hdf5::File& f = r.file();
  probes::Manifest m{r.path().string(), {}, {}};
  const bool psi_file = r.kind() == hdf5::FileKind::psi;
  const char* seed_attr = psi_file ? "seed" : "synthinit_global_seed";
  const auto seed = f.attr("/", seed_attr);
  if (!seed || !std::holds_alternative<std::int64_t>(*seed) || std::get<std::int64_t>(*seed) < 0)
    throw Error(r.path().string() + ": root attribute " + seed_attr +
                " is missing or not a seed (a capture declares the SynthInit seed of its step)");
  m.values.push_back({"SynthInit seed", std::to_string(std::get<std::int64_t>(*seed)), std::string("root attribute ") + seed_attr});
  const auto text = [&](const std::string& object, const char* name) -> std::optional<std::string> {
    const auto v = f.attr(object, name);
    if (!v) return std::nullopt;
    if (const auto* s = std::get_if<std::string>(&*v)) return *s;
    throw Error(r.path().string() + ":" + object + ": attribute " + name + " is not a string");
  };
  if (psi_file) {
    const auto config = text("/", "model_config");
    if (!config) throw Error(r.path().string() + ": root attribute model_config is missing (a capture declares its model)");
    m.values.push_back({"model configuration", *config, "root attribute model_config"});
  }
  if (const auto state = text(group, "state")) m.values.push_back({"state", *state, "attribute state of " + group});
  return m;
}

OpReplay replay_op(const hdf5::StateReader& r, const std::string& group, const CapturedOp& own,
                   const model::NumericsVariant& variant) {
  const std::string s = group + "/" + own.site;
  const std::string where = r.path().string() + ":" + s;
  OpReplay out;
  out.site = own.site;
  out.attention = own.attention;
  out.shape = shape_words(own);
  out.k = own.depth();
  const hdf5::File& f = r.file();
  const auto shape_attr = f.attr(s, "shape");
  if (!shape_attr || !std::holds_alternative<std::string>(*shape_attr))
    throw Error(where + ": no shape attribute (a JSON list, " + hdf5::shape_json(own.shape) + " for psi's operator)");
  const Shape shape = hdf5::parse_shape_json(std::get<std::string>(*shape_attr), where + " attribute shape");
  if (shape != own.shape)
    throw Error(where + ": shape " + hdf5::shape_json(shape) + ", psi's operator is " + hdf5::shape_json(own.shape));
  const auto k_attr = f.attr(s, "k");
  if (!k_attr || !std::holds_alternative<std::int64_t>(*k_attr) || std::get<std::int64_t>(*k_attr) != own.depth())
    throw Error(where + ": attribute k is not the integer " + std::to_string(own.depth()) + " (psi's operator's K)");
  if (const auto kernel = f.attr(s, "kernel")) {
    if (!std::holds_alternative<std::string>(*kernel)) throw Error(where + ": attribute kernel is not a string");
    out.kernel = std::get<std::string>(*kernel);
  }

  if (own.attention) {
    const std::int64_t heads = own.shape[2], d = own.shape[3], width = heads * d;
    const Bf16Tensor q = read_checked(r, s + "/q"), k = read_checked(r, s + "/k"), v = read_checked(r, s + "/v"),
                     o = read_checked(r, s + "/out");
    const CBf16Mat Q = matrix_of(q, width, where + "/q"), K = matrix_of(k, width, where + "/k"),
                   V = matrix_of(v, width, where + "/v"), O = matrix_of(o, width, where + "/out");
    need_rows(Q, own.shape[0], where + "/q");
    need_rows(K, own.shape[1], where + "/k");
    need_rows(V, own.shape[1], where + "/v");
    need_rows(O, own.shape[0], where + "/out");
    Bf16Tensor y({Q.rows, width});
    ops::sdpa(Q, K, V, heads, variant.sdpa(d), as_matrix(y));
    count_into(as_matrix(y), O, out);
    input_differences(as_matrix(own.q), Q, out);
    input_differences(as_matrix(own.k), K, out);
    input_differences(as_matrix(own.v), V, out);
    return out;
  }
  const std::int64_t M = own.shape[0], N = own.shape[1], K = own.shape[2];
  const Bf16Tensor x = read_checked(r, s + "/in"), o = read_checked(r, s + "/out");
  const CBf16Mat X = matrix_of(x, K, where + "/in"), O = matrix_of(o, N, where + "/out");
  // The official model runs M rows; psi's capture holds the one row it computes for them.
  if (X.rows != M && X.rows != own.in.dim(0))
    throw Error(where + "/in: " + std::to_string(X.rows) + " rows, psi's operator has " + std::to_string(M));
  need_rows(O, X.rows, where + "/out");
  Bf16Tensor y({X.rows, N});
  {
    const official::RowsAsIf as_if(M);
    ops::linear(X, as_matrix(own.weight), own.bias.numel() ? own.bias.ptr() : nullptr, own.rule, as_matrix(y),
                variant.product);
  }
  count_into(as_matrix(y), O, out);
  input_differences(as_matrix(own.in), X, out);
  return out;
}

}  // namespace

StepReplay replay_step(const std::filesystem::path& file, int step, const std::filesystem::path& reference_dir) {
  const hdf5::StateReader r(file);
  StepReplay out;
  out.file = file;
  const probes::TrajectoryRecording* rec = nullptr;
  for (const auto& t : probes::trajectory_recordings())
    if (r.file().exists(ops_group(t.group, step))) {
      rec = &t;
      break;
    }
  if (!rec)
    throw Error(file.string() + ": no " + ops_group(probes::trajectory_recording(1).group, step) + " (nor " +
                ops_group(probes::trajectory_recording(1024).group, step) + "): not a per-operator capture of step " +
                std::to_string(step));
  out.group = ops_group(rec->group, step);
  out.context = rec->label;

  const TinyTrajectory t(reference_dir, rec->context_rows);
  out.state_name = t.state_name(step);
  probes::check_manifest(capture_manifest(r, out.group),
                         {"the recording it replays on, " + (reference_dir / rec->file).string(),
                          {{"SynthInit seed", std::to_string(t.seed()), "synthinit_global_seed"},
                           {"model configuration", "tiny", "psi's replay"},
                           {"state", out.state_name, rec->group}},
                          {}});
  OpCapture own;
  observed_step(t, step, {}, own);

  std::set<std::string> sites;
  for (const CapturedOp& op : own.ops()) sites.insert(op.site);
  for (const auto& d : r.datasets(out.group)) {
    const std::string site = d.path.substr(out.group.size() + 1, d.path.rfind('/') - out.group.size() - 1);
    if (!sites.count(site))
      throw Error(file.string() + ":" + d.path + ": " + site + " is not an operator of psi's forward (psi kernels shapes "
                  "lists the sites; inside block i they start with transformer_blocks.<i>.)");
  }
  const model::NumericsVariant& variant = model::numerics_variant("official-h200");
  for (const CapturedOp& op : own.ops()) {
    out.ops.push_back(replay_op(r, out.group, op, variant));
    const int i = int(out.ops.size()) - 1;
    if (out.first_departing < 0 && out.ops.back().departs()) out.first_departing = i;
    if (out.first_inputs_differing < 0 && out.ops.back().inputs_differing > 0) out.first_inputs_differing = i;
  }
  return out;
}

}  // namespace psi::exp
