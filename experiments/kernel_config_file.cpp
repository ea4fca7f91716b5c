#include "experiments/kernel_config_file.h"

#include <fstream>
#include <iterator>
#include <set>

#include "engine/error.h"
#include "engine/input_file.h"
#include "engine/json_read.h"

namespace psi::exp {

namespace {

constexpr std::uintmax_t kMaxBytes = 1u << 20;

std::string first_line() { return std::string("{\"schema\": \"") + kKernelConfigSchema + "\","; }

std::int64_t whole(const nlohmann::json& v, const std::string& where, std::int64_t lo, std::int64_t hi) {
  if (!v.is_number_integer()) throw Error(where + " is not a whole number");
  const std::int64_t x = v.is_number_unsigned() && v.get<std::uint64_t>() > std::uint64_t(hi) ? hi + 1 : v.get<std::int64_t>();
  if (x < lo || x > hi) throw Error(where + " = " + v.dump() + " is not in " + std::to_string(lo) + ".." + std::to_string(hi));
  return x;
}

// An object's keys one per line, and each element of a list value on a line of its own (the
// search's trials, shapes and states), so that the file reads and diffs line by line.
std::string one_per_line(const nlohmann::json& j) {
  if (!j.is_object()) return j.dump();
  std::string t = "{";
  bool first = true;
  for (const auto& [key, value] : j.items()) {
    t += std::string(first ? "" : ",") + "\n  " + nlohmann::json(key).dump() + ": ";
    first = false;
    if (value.is_array() && !value.empty()) {
      t += "[";
      for (std::size_t i = 0; i < value.size(); ++i) t += std::string(i ? "," : "") + "\n   " + value[i].dump();
      t += "\n  ]";
    } else {
      t += value.dump();
    }
  }
  return t + "\n }";
}

}  // namespace

official::KernelConfig read_kernel_config(const std::filesystem::path& file) {
  const std::string name = file.string();
  if (const std::string why = input_file_problem(file); !why.empty()) throw Error(name + ": " + why + " (kernel config)");
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(file, ec);
  if (ec || size > kMaxBytes) throw Error(name + ": kernel config larger than 1 MiB");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(name + ": cannot be read");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto parsed = read_json_if_valid(text, name + " (kernel config)");
  if (!parsed) throw Error(name + ": not JSON (kernel config)");
  const nlohmann::json& j = *parsed;
  if (!j.is_object() || !j.contains("schema") || j.at("schema") != kKernelConfigSchema)
    throw Error(name + ": not a kernel config (schema " + std::string(kKernelConfigSchema) + ")");
  for (const auto& [key, value] : j.items())
    if (key != "schema" && key != "products" && key != "search") throw Error(name + ": unknown key \"" + key + "\"");
  if (!j.contains("products")) return {};
  return parse_kernel_products(j.at("products"), name + ": products");
}

official::KernelConfig parse_kernel_products(const nlohmann::json& products, const std::string& name) {
  official::KernelConfig c;
  if (!products.is_array()) throw Error(name + " is not a list");
  std::set<official::ShapeKey> seen;
  std::size_t i = 0;
  for (const auto& p : products) {
    const std::string where = name + "[" + std::to_string(i++) + "]";
    if (!p.is_object()) throw Error(where + " is not an object");
    for (const auto& [key, value] : p.items())
      if (key != "chain" && key != "shape" && key != "split_k" && key != "granule" && key != "fma_chain")
        throw Error(where + ": unknown key \"" + key + "\"");
    for (const char* key : {"chain", "shape", "split_k"})
      if (!p.contains(key)) throw Error(where + ": no " + key);
    official::ShapeKey k;
    if (!p.at("chain").is_string() || !official::parse_chain_kind(p.at("chain").get<std::string>(), k.kind))
      throw Error(where + ": chain " + p.at("chain").dump() + " is not tensor-core, f32-scores or f32-values");
    const auto& s = p.at("shape");
    if (!s.is_array() || s.size() != 3) throw Error(where + ": shape is not [rows, cols, depth]");
    constexpr std::int64_t kMaxDim = std::int64_t(1) << 31;
    k.shape = {whole(s[0], where + ".shape[0]", 1, kMaxDim), whole(s[1], where + ".shape[1]", 1, kMaxDim),
               whole(s[2], where + ".shape[2]", 1, kMaxDim)};
    official::KernelChoice choice;
    choice.split_k = int(whole(p.at("split_k"), where + ".split_k", 1, official::kMaxSplitK));
    if (p.contains("granule")) choice.granule = int(whole(p.at("granule"), where + ".granule", 1, 1 << 20));
    if (p.contains("fma_chain")) {
      if (!p.at("fma_chain").is_boolean()) throw Error(where + ".fma_chain is not true or false");
      choice.fma_chain = p.at("fma_chain").get<bool>();
      if (choice.fma_chain && k.kind != official::ChainKind::tensor_core)
        throw Error(where + ": fma_chain applies to tensor-core products only");
    }
    if (!seen.insert(k).second)
      throw Error(where + ": " + std::string(official::chain_kind_name(k.kind)) + " " + official::shape_text(k.shape) +
                  " is listed twice");
    c.set(k, choice);
  }
  return c;
}

nlohmann::json kernel_config_products(const official::KernelConfig& c) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [k, choice] : c.overrides()) {
    nlohmann::json e = {{"chain", official::chain_kind_name(k.kind)},
                        {"shape", {k.shape.rows, k.shape.cols, k.shape.depth}},
                        {"split_k", choice.split_k},
                        {"granule", choice.granule}};
    if (choice.fma_chain) e["fma_chain"] = true;
    out.push_back(std::move(e));
  }
  return out;
}

std::string kernel_config_text(const official::KernelConfig& c, const nlohmann::json& search) {
  std::string t = first_line() + "\n \"products\": [";
  bool first = true;
  for (const auto& e : kernel_config_products(c)) {
    t += std::string(first ? "" : ",") + "\n  " + e.dump();
    first = false;
  }
  t += first ? "]" : "\n ]";
  if (!search.is_null()) t += ",\n \"search\": " + one_per_line(search);
  return t + "\n}\n";
}

outputs::Recognizer is_kernel_config_file() { return outputs::first_line_is(first_line()); }

}  // namespace psi::exp
