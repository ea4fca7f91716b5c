#include "hdf5/provenance.h"

#include <map>
#include <optional>

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/json_read.h"
#include "hdf5/schema.h"

namespace psi::hdf5 {

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

Manifest declared_manifest(const File& f, const std::string& group, bool inputs) {
  Manifest m;
  const std::string file = f.path().string(), g = "/" + group;
  m.source = file + ":" + g;
  // The seed the file states beside its check values, when it does: the seed psi uses is
  // synthinit_global_seed, and a file whose two disagree was edited.
  if (const auto check = f.attr("/", "synthinit_check")) {
    const std::string where = file + ": root attribute synthinit_check";
    const std::string* text = std::get_if<std::string>(&*check);
    const auto j = text ? read_json_if_valid(*text, where) : std::nullopt;
    if (!j || !j->is_object() || !j->contains("seed") || !j->at("seed").is_number_unsigned())
      throw Error(where + " is not a JSON object with a seed (a whole number)");
    m.values.push_back({"SynthInit seed", std::to_string(j->at("seed").get<std::uint64_t>()), "root attribute synthinit_check"});
  }
  if (f.exists(g + "/weights_json")) {
    const std::string where = file + ":" + g + "/weights_json";
    const nlohmann::json j = read_json(f.read_text(g + "/weights_json"), where);
    if (!j.is_array()) throw Error(where + " is not a JSON list of weights");
    for (std::size_t i = 0; i < j.size(); ++i) m.tensors.push_back(entry_of(j[i], i, where));
  }
  if (inputs && f.exists(g + "/inputs"))
    for (const auto& d : f.list_datasets(g + "/inputs")) {
      const auto text = [&](const char* name) -> std::optional<std::string> {
        const auto v = f.attr(d.path, name);
        const std::string* s = v ? std::get_if<std::string>(&*v) : nullptr;
        if (v && !s) throw Error(file + ":" + d.path + ": attribute " + name + " is not a string");
        return s ? std::optional<std::string>(*s) : std::nullopt;
      };
      const auto name = text(attr::synthinit_name);
      const Integrity integrity = read_integrity(f, d.path);
      if (!name || integrity.sha256_full.empty()) continue;
      const auto full = text(attr::full_shape);
      const Shape shape = full ? parse_shape_json(*full, file + ":" + d.path + " attribute full_shape") : d.shape;
      m.tensors.push_back({*name, shape, integrity.sha256_full, true});
    }
  return m;
}

Manifest synthinit_manifest(std::uint64_t seed) {
  return {"psi's SynthInit (seed " + std::to_string(seed) + ", the file's synthinit_global_seed)",
          {{"SynthInit seed", std::to_string(seed), ""}},
          {}};
}

}  // namespace psi::hdf5
