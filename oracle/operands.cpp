#include "oracle/operands.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/json_read.h"
#include "engine/sha256.h"
#include "engine/synthinit.h"
#include "hdf5/provenance.h"
#include "hdf5/schema.h"
#include "hdf5/tensor_file.h"
#include "oracle/fixed_dot.h"

namespace psi::oracle {

namespace {

std::string where(const hdf5::File& f, const std::string& object) { return f.path().string() + ":" + object; }

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Shape leading(const Shape& s) { return Shape(s.begin(), s.end() - 1); }

// An operand or output as stored, refused if it no longer matches its sha256_full: the oracle
// must not certify data that was corrupted after it was written.
Bf16Tensor read_verified(const hdf5::File& f, const std::string& path) {
  Bf16Tensor t = f.read_bf16(path);
  // Its sha256_full is the whole tensor's, so rows of it cannot be checked; nor are they an operand.
  if (hdf5::check_sha256_full(f, path, t.ptr(), t.bytes()) == hdf5::Sha256Check::not_whole)
    throw Error(where(f, path) + ": stores part of the tensor (stored='" + hdf5::read_integrity(f, path).stored.substr(0, 80) +
                "'); the oracle reads whole tensors, checked against their sha256_full");
  hdf5::verify_sha256_full(f, path, t);
  return t;
}

// x [..., K] with K >= 1.
void set_x(const hdf5::File& f, const std::string& path, LinearProblem& p) {
  p.x = read_verified(f, path);
  if (p.x.shape.empty() || p.x.shape.back() <= 0)
    throw Error(where(f, path) + ": x must be [..., K] with K >= 1, found " + shape_str(p.x.shape));
  p.x_shape = p.x.shape;
  p.K = p.x.shape.back();
  p.rows = p.x.numel() / p.K;
  p.x.shape = {p.rows, p.K};
}

void check_w(const std::string& what, const Shape& ws, const LinearProblem& p) {
  if (ws.size() != 2 || ws[1] != p.K)
    throw Error(what + ": W " + shape_str(ws) + " does not fit x " + shape_str(p.x_shape) +
                ": W must be stored [out, in] with in = K = " + std::to_string(p.K));
}

void check_b(const std::string& what, const Shape& bs, const LinearProblem& p) {
  if (bs.size() != 1 || bs[0] != p.N)
    throw Error(what + ": bias " + shape_str(bs) + " does not fit W's out dimension " + std::to_string(p.N));
}

Bf16Tensor regenerate(const hdf5::File& f, const std::string& json_path, const nlohmann::json& entry,
                      std::int64_t seed) {
  const std::string name = entry.at("name").get<std::string>();
  const Shape shape = entry.at("shape").get<Shape>();
  Bf16Tensor t;
  try {
    t = synthinit::make(name, shape, std::uint64_t(seed));
  } catch (const Error& e) {
    throw Error(where(f, json_path) + ": " + e.what(), e.code());  // a shape too large or negative
  }
  // Checked against the group's declarations as every reader of a recording checks them
  // (hdf5/provenance.h); the SHA-256 is what this probe rests on, so it must be recorded.
  if (!entry.at("sha256").is_string()) throw Error(where(f, json_path) + ": " + name + " records no sha256");
  hdf5::Manifest used = hdf5::synthinit_manifest(std::uint64_t(seed));
  used.tensors.push_back({name, shape, sha256_hex(t), false});
  hdf5::check_manifest(hdf5::declared_manifest(f, json_path.substr(1, json_path.rfind('/') - 1)), used);
  return t;
}

OperandRecord record(const std::string& role, const hdf5::File& f, const ReadOperand& r) {
  return {role, f.path().string(), r.dataset, r.stored, r.sha256, r.hash_checked};
}

Bf16Tensor transposed(const Bf16Tensor& t) {
  const std::int64_t rows = t.shape[0], cols = t.shape[1];
  Bf16Tensor out({cols, rows}, std::vector<Bf16>(t.data.size()));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) out.data[std::size_t(c * rows + r)] = t.data[std::size_t(r * cols + c)];
  return out;
}

}  // namespace

LoadedOperands operands_from(NamedOperand x, NamedOperand w, std::optional<NamedOperand> b,
                             std::optional<NamedOperand> y) {
  LoadedOperands out;
  LinearProblem& p = out.problem;
  if (x.t.shape.empty() || x.t.shape.back() <= 0)
    throw Error(x.name + ": x must be [..., K] with K >= 1, found " + shape_str(x.t.shape));
  p.x_shape = x.t.shape;
  p.K = x.t.shape.back();
  p.rows = x.t.numel() / p.K;
  p.x = std::move(x.t);
  p.x.shape = {p.rows, p.K};
  check_w(w.name, w.t.shape, p);
  p.N = w.t.shape[0];
  p.w = std::move(w.t);
  if (b) {
    check_b(b->name, b->t.shape, p);
    p.b = std::move(b->t);
  }
  if (y) {
    if (y->t.shape.empty() || y->t.shape.back() != p.N || y->t.numel() != p.rows * p.N)
      throw Error(y->name + ": output " + shape_str(y->t.shape) + " does not fit x " + shape_str(p.x_shape) +
                  " and W's out dimension " + std::to_string(p.N));
    y->t.shape = {p.rows, p.N};
    out.y = std::move(y->t);
  }
  return out;
}

LoadedOperands load_operands(const OperandRefs& in) {
  std::map<std::string, hdf5::File> files;
  auto file = [&](const TensorRef& ref) -> const hdf5::File& {
    auto it = files.find(ref.file);
    if (it == files.end()) it = files.emplace(ref.file, hdf5::open_tensor_file(ref.file)).first;
    return it->second;
  };
  std::vector<OperandRecord> records;
  auto read = [&](const std::string& role, const TensorRef& ref) {
    const hdf5::File& f = file(ref);
    ReadOperand r = read_operand(f, ref.name, role);
    records.push_back(record(role, f, r));
    return NamedOperand{where(f, r.dataset), std::move(r.t)};
  };
  NamedOperand x = read("x", in.x);
  NamedOperand w = read("W", in.w);
  bool transposed_w = false;
  if (in.w_layout == WLayout::in_out) {
    const std::int64_t K = x.t.shape.empty() ? 0 : x.t.shape.back();
    if (w.t.shape.size() != 2 || w.t.shape[0] != K)
      throw Error(w.name + ": W " + shape_str(w.t.shape) + " does not fit x " + shape_str(x.t.shape) +
                  ": with --w-layout in,out W must be stored [in, out] with in = K = " + std::to_string(K));
    w.t = transposed(w.t);
    transposed_w = true;
  }
  std::optional<NamedOperand> b, y;
  if (!in.b.file.empty()) b = read("b", in.b);
  if (!in.y.file.empty()) y = read("y", in.y);
  LoadedOperands out = operands_from(std::move(x), std::move(w), std::move(b), std::move(y));
  LinearProblem& p = out.problem;
  p.source.read = std::move(records);
  p.source.w_transposed = transposed_w;

  // One file for all: names as dataset paths beside it; several: each as file:path.
  const bool one = files.size() == 1;
  p.source.file = one ? files.begin()->first : "";
  for (const OperandRecord& r : p.source.read) {
    std::string& name = r.role == "x" ? p.source.x : r.role == "W" ? p.source.w : p.source.b;
    if (r.role != "y") name = one ? r.dataset : r.file + ":" + r.dataset;
  }
  return out;
}

LinearProblem load_probe(const hdf5::File& f, const std::string& probe) {
  LinearProblem p;
  const std::string group = dataset_path(probe);
  p.source.file = f.path().string();
  p.source.probe = group.substr(1);
  if (!f.exists(group)) {
    // Name the projection probes the file does hold: the groups with a weights_json.
    std::string known;
    for (const auto& d : f.list_datasets())
      if (d.path.ends_with("/weights_json") && std::count(d.path.begin(), d.path.end(), '/') == 2)
        known += (known.empty() ? "" : ", ") + d.path.substr(1, d.path.size() - 1 - std::string("/weights_json").size());
    throw Error(where(f, group) + ": no such probe group (projection probes in this file: " +
                (known.empty() ? "none" : known) + ")");
  }
  const std::string json_path = group + "/weights_json";
  if (!f.exists(json_path))
    throw Error(where(f, group) + ": not a projection probe (no weights_json dataset)");
  const nlohmann::json entries = read_json(f.read_text(json_path), where(f, json_path));
  const nlohmann::json* we = nullptr;
  const nlohmann::json* be = nullptr;
  try {
    for (const auto& e : entries) {
      const std::string name = e.at("name").get<std::string>();
      const bool is_w = ends_with(name, ".weight") && e.at("shape").size() == 2;
      const bool is_b = ends_with(name, ".bias");
      if ((is_w && we) || (is_b && be))
        throw Error(where(f, json_path) + ": more than one " + (is_w ? "2-D .weight" : ".bias") +
                    " entry; this probe is not a single projection");
      if (is_w) we = &e;
      if (is_b) be = &e;
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(where(f, json_path) + ": malformed weights_json (" + e.what() + ")");
  }
  if (!we) throw Error(where(f, json_path) + ": no 2-D .weight entry");

  auto seed = f.attr("/", "synthinit_global_seed");
  if (seed && !std::holds_alternative<std::int64_t>(*seed))
    throw Error(where(f, "/") + ": attribute synthinit_global_seed is not an integer");
  p.source.seed = seed ? std::get<std::int64_t>(*seed) : 0;

  p.source.x = group + "/x";
  if (!f.exists(p.source.x)) throw Error(where(f, group) + ": probe has no input dataset x");
  set_x(f, p.source.x, p);
  try {
    p.source.w = (*we).at("name").get<std::string>();
    p.source.w_synthinit = true;
    p.w = regenerate(f, json_path, *we, p.source.seed);
    check_w(where(f, json_path) + " " + p.source.w, p.w.shape, p);
    p.N = p.w.shape[0];
    if (be) {
      p.source.b = (*be).at("name").get<std::string>();
      p.source.b_synthinit = true;
      p.b = regenerate(f, json_path, *be, p.source.seed);
      check_b(where(f, json_path) + " " + p.source.b, p.b->shape, p);
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(where(f, json_path) + ": malformed weights_json entry (" + e.what() + ")");
  }
  return p;
}

Bf16Tensor load_output(const hdf5::File& f, const std::string& dataset, const LinearProblem& p) {
  const std::string path = dataset_path(dataset);
  Bf16Tensor y = read_verified(f, path);
  if (y.shape.empty() || y.shape.back() != p.N || y.numel() != p.rows * p.N)
    throw Error(where(f, path) + ": output " + shape_str(y.shape) + " does not fit x " +
                shape_str(p.x_shape) + " and W's out dimension " + std::to_string(p.N));
  y.shape = {p.rows, p.N};
  return y;
}

Bf16Tensor projection_row0(const LinearProblem& p) {
  return correctly_rounded_linear(p.x.data, p.w.data, p.bias_span(), p.K, 0, 1, 1);
}

Row0Match match_row0(const LinearProblem& p, const Bf16Tensor& y, const Bf16Tensor& exact_row0) {
  Row0Match m;
  for (std::int64_t j = 0; j < p.N; ++j)
    m.close += bf16_ulp_distance(y.data[std::size_t(j)], exact_row0.data[std::size_t(j)]) <= 1;
  m.is_projection = m.close * 100 >= p.N * 99;
  return m;
}

OutputChoice choose_probe_output(const hdf5::File& f, const LinearProblem& p, const std::string& requested) {
  const std::string group = "/" + p.source.probe;
  if (!requested.empty()) {
    std::string path = requested.find('/') == std::string::npos ? group + "/" + requested : dataset_path(requested);
    return {path, "given by --output"};
  }
  Shape want = leading(p.x_shape);
  want.push_back(p.N);
  std::vector<std::string> candidates;
  for (const auto& d : f.list_datasets(group)) {
    const bool direct = d.path.rfind('/') == group.size();
    if (direct && d.path != p.source.x && d.kind == hdf5::ElemKind::bf16 && d.shape == want)
      candidates.push_back(d.path);
  }
  if (candidates.empty())
    throw Error(where(f, group) + ": no BF16 dataset of shape " + shape_str(want) + " besides x to certify");
  if (candidates.size() == 1) return {candidates[0], "the only BF16 dataset of shape " + shape_str(want) + " besides x"};

  const Bf16Tensor exact_row0 = projection_row0(p);
  std::vector<std::string> qualified;
  std::string tally;
  for (const auto& c : candidates) {
    const Row0Match m = match_row0(p, load_output(f, c, p), exact_row0);
    tally += (tally.empty() ? "" : ", ") + c + " " + std::to_string(m.close) + "/" + std::to_string(p.N);
    if (m.is_projection) qualified.push_back(c);
  }
  if (qualified.size() != 1)
    throw Error(where(f, group) + ": cannot tell which dataset is the projection output (row 0 within 1 ULP: " +
                tally + "); name it with --output");
  return {qualified[0], "row 0 within 1 ULP of the exact projection: " + tally};
}

}  // namespace psi::oracle
