#include "experiments/experiment.h"

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <limits>

#include "engine/backend/backend_factory.h"
#include "engine/cpu_features.h"
#include "engine/error.h"
#include "engine/model/config.h"
#include "engine/official/tensor_core.h"
#include "experiments/kernel_config_file.h"
#include "probes/probe_cases.h"

namespace psi::exp {

nlohmann::json Options::to_json() const {
  nlohmann::json j = {{"model", model},
                      {"profile", profile},
                      {"backend", rt::backend_name(backend)},
                      {"seed", seed},
                      {"checkpoint", checkpoint},
                      {"shard_index", shard_index},
                      {"shard_count", shard_count},
                      {"quick", quick},
                      {"chaos_seed", chaos_seed}};
  for (const Experiment& e : experiments())
    for (const auto& [key, value] : e.own_defaults.items()) j[key] = own.value(key, value);
  // Only when given, so that the reports of runs without one stay as they were.
  if (kernels && !kernels->overrides().empty()) j["kernel_config"] = kernel_config_products(*kernels);
  return j;
}

Options Options::from_json(const nlohmann::json& j) {
  // A key psi does not write is refused: read as absent, it would leave a claimed setting at its
  // default and the merged or re-rendered run would say what was never run. What psi writes is
  // to_json's keys (kernel_config only when one was given).
  const nlohmann::json written = Options{}.to_json();
  for (const auto& [key, value] : j.items())
    if (key != "kernel_config" && !written.contains(key)) throw Error("unknown key '" + key + "' (not one psi writes)");
  Options o;
  o.model = j.at("model").get<std::string>();
  o.profile = j.at("profile").get<std::string>();
  o.backend = rt::parse_backend_kind(j.at("backend").get<std::string>());
  o.seed = unsigned_option(j, "seed");
  o.checkpoint = j.at("checkpoint").get<std::string>();
  o.shard_count = j.contains("shard_count") ? int(integer_option(j, "shard_count", 1, std::numeric_limits<int>::max())) : 1;
  o.shard_index = j.contains("shard_index") ? int(integer_option(j, "shard_index", 0, o.shard_count - 1)) : 0;
  o.quick = j.at("quick").get<bool>();
  o.chaos_seed = unsigned_option(j, "chaos_seed");
  for (const Experiment& e : experiments())
    for (const auto& [key, value] : e.own_defaults.items())
      if (const auto it = j.find(key); it != j.end()) o.own[key] = *it;
  if (const auto it = j.find("kernel_config"); it != j.end())
    o.kernels = std::make_shared<const official::KernelConfig>(parse_kernel_products(*it, "kernel_config"));
  return o;
}

namespace {

std::string option_value(const nlohmann::json& v) {
  const std::string text = v.dump();
  return text.size() > 40 ? text.substr(0, 40) + "..." : text;
}

}  // namespace

std::int64_t integer_option(const nlohmann::json& o, const char* key, std::int64_t lo, std::int64_t hi) {
  if (!o.contains(key)) throw Error(std::string(key) + " is missing");
  const nlohmann::json& v = o.at(key);
  const std::string what = std::string(key) + " " + option_value(v) + " is not what psi writes ";
  if (!v.is_number_integer()) throw Error(what + "(an integer)");
  if (v.is_number_unsigned() ? v.get<std::uint64_t>() > std::uint64_t(hi)
                             : v.get<std::int64_t>() < lo || v.get<std::int64_t>() > hi)
    throw Error(what + "(an integer from " + std::to_string(lo) + " to " + std::to_string(hi) + ")");
  return v.get<std::int64_t>();
}

std::uint64_t unsigned_option(const nlohmann::json& o, const char* key) {
  if (!o.contains(key)) throw Error(std::string(key) + " is missing");
  const nlohmann::json& v = o.at(key);
  const std::string what = std::string(key) + " " + option_value(v) + " is not what psi writes ";
  if (!v.is_number_integer()) throw Error(what + "(an integer)");
  if (!v.is_number_unsigned() && v.get<std::int64_t>() < 0) throw Error(what + "(an integer from 0 to 2^64 - 1)");
  return v.get<std::uint64_t>();
}

model::NumericsVariant variant_of(const Options& o, std::string_view name) {
  return model::numerics_variant(name).with_kernels(o.kernels);
}

std::string recorded_model(const nlohmann::json& options) { return options.value("model", std::string("?")); }

const Experiment& find_experiment(std::string_view name) {
  for (const Experiment& e : experiments())
    if (e.name == name) return e;
  std::string valid;
  for (const Experiment& e : experiments()) valid += (valid.empty() ? "" : ", ") + e.name;
  throw Error("unknown experiment '" + std::string(name) + "' (valid: " + valid + ")");
}

void settle_options(const Experiment& e, Options& o) {
  model::model_config(o.model, o.profile);  // an unknown name throws, whichever experiment
  if (e.settle) e.settle(o);
}

rt::BackendKind resolve_backend(const std::string& requested, bool chaos) {
  std::string note;
  const rt::BackendKind k = rt::resolve_backend(requested, chaos, &note);
  if (!note.empty()) std::cerr << note << "\n";
  return k;
}

std::string device_name(rt::BackendKind backend) {
  if (backend == rt::BackendKind::cuda) return "CUDA device 0";
  std::string cpu = "CPU";
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.starts_with("model name")) {
      auto colon = line.find(':');
      if (colon != std::string::npos) {
        cpu = "CPU: " + line.substr(line.find_first_not_of(' ', colon + 1));
        break;
      }
    }
  // What psi chose on it, as psi --version says: not the bits (every level gives the same), the
  // speed a report's timings were taken at.
  return cpu + " (vector level " + isa_name(active_isa()) + "; tensor-core product " +
         official::tc::lane_kernels_in_force() + ")";
}

std::filesystem::path reference_dir(const Options& o) {
  return o.reference_dir.empty() ? probes::shared_dir() / "reference" : o.reference_dir;
}

std::vector<std::filesystem::path> run_inputs(const Options& o) {
  std::vector<std::filesystem::path> in;
  if (!o.checkpoint.empty()) in.push_back(o.checkpoint);
  if (!o.kernel_config_file.empty()) in.push_back(o.kernel_config_file);
  // A missing folder has no entries; the experiments that need it say so themselves.
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(reference_dir(o), ec)) in.push_back(e.path());
  return in;
}

}  // namespace psi::exp
