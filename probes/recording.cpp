#include "probes/recording.h"

#include <regex>

#include "engine/error.h"
#include "engine/sha256.h"
#include "engine/synthinit.h"

namespace psi::probes {

namespace {

Shape parse_shape(const nlohmann::json& j, const std::string& where) {
  if (!j.is_array()) throw Error(where + ": full_shape is not a JSON list");
  Shape s;
  for (const auto& v : j) s.push_back(v.get<std::int64_t>());
  return s;
}

}  // namespace

Recording::Recording(const std::filesystem::path& file, std::string group)
    : path_(file), group_(std::move(group)), file_(h5::File::open_read(file)) {
  if (!file_.exists("/" + group_))
    throw Error(path_.string() + ": no group '" + group_ + "' (is this the right recording?)");
  auto s = file_.attr("/", "synthinit_global_seed");
  if (!s) throw Error(path_.string() + ": root attribute synthinit_global_seed is missing");
  if (auto* i = std::get_if<std::int64_t>(&*s)) seed_ = std::uint64_t(*i);
  else if (auto* d = std::get_if<double>(&*s)) seed_ = std::uint64_t(*d);
  else seed_ = std::stoull(std::get<std::string>(*s));
}

bool Recording::has(const std::string& rel) const { return file_.exists(abs(rel)); }

std::optional<std::string> Recording::attr_text(const std::string& rel, const std::string& name) const {
  auto v = file_.attr(abs(rel), name);
  if (!v) return std::nullopt;
  if (auto* s = std::get_if<std::string>(&*v)) return *s;
  if (auto* i = std::get_if<std::int64_t>(&*v)) return std::to_string(*i);
  return std::to_string(std::get<double>(*v));
}

nlohmann::json Recording::attr_json(const std::string& rel, const std::string& name) const {
  auto t = attr_text(rel, name);
  if (!t) throw Error(path_.string() + ":" + abs(rel) + ": attribute '" + name + "' is missing");
  try {
    return nlohmann::json::parse(*t);
  } catch (const nlohmann::json::exception&) {
    throw Error(path_.string() + ":" + abs(rel) + ": attribute '" + name + "' is not JSON");
  }
}

StoredTensor Recording::stored_bf16(const std::string& rel) {
  const std::string where = path_.string() + ":" + abs(rel);
  StoredTensor st;
  st.data = file_.read_bf16(abs(rel));
  st.full_shape = attr_text(rel, "full_shape") ? parse_shape(attr_json(rel, "full_shape"), where) : st.data.shape;
  st.sha256_full = attr_text(rel, "sha256_full").value_or("");
  const std::string stored = attr_text(rel, "stored").value_or("full");
  static const std::regex rows_re("rows_([0-9]+)_to_([0-9]+)_of_axis_1");
  std::smatch m;
  if (stored == "full") {
    st.full = true;
    if (st.data.shape != st.full_shape)
      throw Error(where + ": stored in full as " + shape_str(st.data.shape) + " but full_shape is " +
                  shape_str(st.full_shape));
  } else if (stored == "none") {
    st.full = false;
  } else if (std::regex_match(stored, m, rows_re)) {
    st.full = false;
    st.first_row = std::stoll(m[1]);
    st.row_count = std::stoll(m[2]) - st.first_row + 1;
    if (st.data.shape.size() < 2 || st.data.dim(0) != 1 || st.data.dim(1) != st.row_count)
      throw Error(where + ": stored '" + stored + "' but the dataset is " + shape_str(st.data.shape));
  } else {
    throw Error(where + ": unknown stored convention '" + stored + "'");
  }
  return st;
}

Bf16Tensor Recording::input_bf16(const std::string& rel) {
  const std::string where = path_.string() + ":" + abs(rel);
  StoredTensor st = stored_bf16(rel);
  if (st.full) return std::move(st.data);
  auto name = attr_text(rel, "synthinit_name");
  if (!name) throw Error(where + ": only part of the input is stored and it has no synthinit_name");
  Bf16Tensor t = synthinit::make(*name, st.full_shape, seed_);
  if (!st.sha256_full.empty() && sha256_hex(t) != st.sha256_full)
    throw Error(where + ": SynthInit '" + *name + "' with seed " + std::to_string(seed_) +
                " does not reproduce sha256_full");
  if (st.row_count > 0) {
    const std::int64_t inner = st.full_shape.size() > 2 ? numel(Shape(st.full_shape.begin() + 2, st.full_shape.end())) : 1;
    for (std::int64_t r = 0; r < st.row_count; ++r)
      for (std::int64_t c = 0; c < inner; ++c)
        if (t.data[(st.first_row + r) * inner + c] != st.data.data[r * inner + c])
          throw Error(where + ": regenerated input differs from the stored row " + std::to_string(st.first_row + r));
  }
  return t;
}

F32Tensor Recording::input_f32(const std::string& rel) { return file_.read_f32(abs(rel)); }

}  // namespace psi::probes
