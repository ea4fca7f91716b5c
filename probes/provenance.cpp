#include "probes/provenance.h"

#include <map>

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/json_read.h"
#include "engine/sha256.h"
#include "engine/synthinit.h"
#include "hdf5/schema.h"

namespace psi::probes {

namespace {

bool is_sha256(const std::string& s) {
  return s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// One weights_json entry: {"name": string, "shape": [sizes], "sha256": 64 hex digits (optional), ...}.
ManifestTensor entry_of(const nlohmann::json& e, std::size_t i, const std::string& where) {
  const std::string at = where + " entry " + std::to_string(i);
  if (!e.is_object()) throw Error(at + " is not a JSON object");
  const auto name = e.find("name");
  if (name == e.end() || !name->is_string()) throw Error(at + " has no name (a string)");
  ManifestTensor t;
  t.name = name->get<std::string>();
  const auto shape = e.find("shape");
  if (shape == e.end() || !shape->is_array()) throw Error(at + " (" + t.name + ") has no shape (a JSON list)");
  for (const auto& d : *shape) {
    if (!d.is_number_integer() || d.get<std::int64_t>() < 0)
      throw Error(at + " (" + t.name + ") has shape " + shape->dump().substr(0, 80) + ", not a list of sizes");
    t.shape.push_back(d.get<std::int64_t>());
  }
  if (const auto sha = e.find("sha256"); sha != e.end()) {
    if (!sha->is_string() || !is_sha256(sha->get<std::string>()))
      throw Error(at + " (" + t.name + ") has sha256 " + sha->dump().substr(0, 80) + ", not 64 lowercase hex digits");
    t.sha256 = sha->get<std::string>();
  }
  return t;
}

std::string seed_words(std::uint64_t seed) {
  return "psi's SynthInit (seed " + std::to_string(seed) + ", the file's synthinit_global_seed)";
}

}  // namespace

void check_manifest(const Manifest& declared, const Manifest& used) {
  const auto stated = [](const ManifestValue& v) { return v.where.empty() ? "" : " (" + v.where + ")"; };
  for (const ManifestValue& u : used.values)
    for (const ManifestValue& d : declared.values)
      if (d.name == u.name && d.value != u.value)
        throw Error(declared.source + " declares " + d.name + " " + d.value + stated(d) + ", but " + used.source +
                    " has " + u.value + stated(u) + ": not what psi would measure against");
  std::map<std::string, const ManifestTensor*> by_name;
  for (const ManifestTensor& t : declared.tensors) by_name.emplace(t.name, &t);
  for (const ManifestTensor& t : used.tensors) {
    const auto it = by_name.find(t.name);
    if (it == by_name.end())
      throw Error(declared.source + " declares no " + t.name + " in its weights_json, which " + used.source + " uses");
    const ManifestTensor& d = *it->second;
    const std::string named = t.name + (d.input ? " (an input's synthinit_name)" : " (weights_json)");
    if (d.shape != t.shape)
      throw Error(declared.source + " declares " + named + " of shape " + shape_str(d.shape) + ", but " + used.source +
                  " uses it as " + shape_str(t.shape));
    if (!d.sha256.empty() && !t.sha256.empty() && d.sha256 != t.sha256)
      throw Error(declared.source + " declares " + named + " with SHA-256 " + d.sha256 + ", but " + used.source +
                  " gives " + t.sha256 + ": the recording was not made from these values");
  }
}

Manifest recording_manifest(const Recording& rec, bool inputs) {
  Manifest m;
  const std::string file = rec.path().string();
  m.source = file + ":/" + rec.group();
  // The seed the file states beside its check values, when it does: the seed psi uses is
  // synthinit_global_seed, and a file whose two disagree was edited.
  if (const auto check = rec.file().attr("/", "synthinit_check")) {
    const std::string where = file + ": root attribute synthinit_check";
    const std::string* text = std::get_if<std::string>(&*check);
    const auto j = text ? read_json_if_valid(*text, where) : std::nullopt;
    if (!j || !j->is_object() || !j->contains("seed") || !j->at("seed").is_number_unsigned())
      throw Error(where + " is not a JSON object with a seed (a whole number)");
    m.values.push_back({"SynthInit seed", std::to_string(j->at("seed").get<std::uint64_t>()), "root attribute synthinit_check"});
  }
  if (rec.has("weights_json")) {
    const std::string where = file + ":" + rec.abs("weights_json");
    const nlohmann::json j = read_json(rec.file().read_text(rec.abs("weights_json")), where);
    if (!j.is_array()) throw Error(where + " is not a JSON list of weights");
    for (std::size_t i = 0; i < j.size(); ++i) m.tensors.push_back(entry_of(j[i], i, where));
  }
  if (inputs && rec.has("inputs"))
    for (const auto& d : rec.file().list_datasets(rec.abs("inputs"))) {
      const std::string rel = d.path.substr(rec.abs("").size());
      const auto name = rec.attr_text(rel, hdf5::attr::synthinit_name);
      const hdf5::Integrity integrity = hdf5::read_integrity(rec.file(), d.path);
      if (!name || integrity.sha256_full.empty()) continue;
      const auto full = rec.attr_text(rel, hdf5::attr::full_shape);
      const Shape shape = full ? hdf5::parse_shape_json(*full, file + ":" + d.path + " attribute full_shape") : d.shape;
      m.tensors.push_back({*name, shape, integrity.sha256_full, true});
    }
  return m;
}

void check_recorded_inputs(const Recording& rec, const Manifest& declared) {
  Manifest used{seed_words(rec.seed()), {{"SynthInit seed", std::to_string(rec.seed()), ""}}, {}};
  for (const ManifestTensor& t : declared.tensors)
    if (t.input) used.tensors.push_back({t.name, t.shape, sha256_hex(synthinit::make(t.name, t.shape, rec.seed())), true});
  check_manifest(declared, used);
}

ManifestSource::ManifestSource(Manifest declared, std::uint64_t seed)
    : declared_(std::move(declared)), seed_(seed), inner_(seed) {
  check_manifest(declared_, {seed_words(seed_), {{"SynthInit seed", std::to_string(seed_), ""}}, {}});
}

Bf16Tensor ManifestSource::load(const std::string& name, const Shape& shape) {
  Bf16Tensor t = inner_.load(name, shape);
  // Hashed only where the manifest records a hash (the tiny trajectory's lists names and shapes).
  bool hashed = false;
  for (const ManifestTensor& d : declared_.tensors) hashed = hashed || (d.name == name && !d.sha256.empty());
  check_manifest(declared_, {seed_words(seed_), {}, {{name, shape, hashed ? sha256_hex(t) : "", false}}});
  ++checked_;
  return t;
}

}  // namespace psi::probes
