#include "probes/recording.h"

#include <cmath>
#include <limits>
#include <string_view>
#include <utility>

#include "engine/error.h"
#include "engine/json_read.h"
#include "engine/sha256.h"
#include "engine/synthinit.h"
#include "engine/whole_number.h"
#include "hdf5/schema.h"
#include "hdf5/unverified.h"

namespace psi::probes {

namespace {

// 2^29 BF16 elements (1 GiB): 25 times the largest tensor a recording of the model describes
// (the full-size video activations, 1 x 4,928 x 4,096).
constexpr std::int64_t kMaxElements = std::int64_t(1) << 29;

// The two digit runs of "rows_<first>_to_<last>_of_axis_1", or nothing when `stored` is not of
// that form (hand-written: std::regex cost this file most of its compile time).
std::optional<std::pair<std::string, std::string>> row_range_digits(std::string_view stored) {
  constexpr std::string_view head = "rows_", mid = "_to_", tail = "_of_axis_1";
  if (!stored.starts_with(head) || !stored.ends_with(tail)) return std::nullopt;
  const std::string_view range = stored.substr(head.size(), stored.size() - head.size() - tail.size());
  const std::size_t at = range.find(mid);
  if (at == std::string_view::npos) return std::nullopt;
  const std::string_view first = range.substr(0, at), last = range.substr(at + mid.size());
  const auto digits = [](std::string_view d) {
    return !d.empty() && d.find_first_not_of("0123456789") == std::string_view::npos;
  };
  if (!digits(first) || !digits(last)) return std::nullopt;
  return std::pair{std::string(first), std::string(last)};
}

Shape parse_shape(const nlohmann::json& j, const std::string& where) {
  if (!j.is_array()) throw Error(where + ": full_shape is not a JSON list");
  Shape s;
  std::int64_t elements = 1;
  for (const auto& v : j) {
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0)
      throw Error(where + ": full_shape " + j.dump() + " holds " + v.dump() + ", not a size");
    const std::int64_t d = v.get<std::int64_t>();
    // The whole tensor may be regenerated in memory (input_bf16): its BF16 bytes must fit.
    if (d != 0 && elements > kMaxElements / d)
      throw Error(where + ": full_shape " + j.dump() + " has more elements than psi holds in memory (" +
                  std::to_string(kMaxElements) + " at most)");
    elements *= d;
    s.push_back(d);
  }
  return s;
}

}  // namespace

Recording::Recording(const std::filesystem::path& file, std::string group)
    : path_(file), group_(std::move(group)), file_(hdf5::File::open_read(file)) {
  if (!file_.exists("/" + group_))
    throw Error(path_.string() + ": no group '" + group_ + "' (is this the right recording?)");
  auto s = file_.attr("/", "synthinit_global_seed");
  if (!s) throw Error(path_.string() + ": root attribute synthinit_global_seed is missing");
  const auto bad_seed = [&](const std::string& v) {
    return Error(path_.string() + ": root attribute synthinit_global_seed is " + v + ", not a seed (a whole number)");
  };
  if (auto* i = std::get_if<std::int64_t>(&*s)) {
    if (*i < 0) throw bad_seed(std::to_string(*i));
    seed_ = std::uint64_t(*i);
  } else if (auto* d = std::get_if<double>(&*s)) {
    // Integers written as floating point are exact below 2^53; anything else is no seed.
    if (!(*d >= 0 && *d < 9007199254740992.0) || *d != std::floor(*d)) throw bad_seed(std::to_string(*d));
    seed_ = std::uint64_t(*d);
  } else {
    const std::string& t = std::get<std::string>(*s);
    const auto v = parse_whole(t, 0, std::numeric_limits<std::uint64_t>::max());
    if (!v) throw bad_seed("'" + t + "'");
    seed_ = *v;
  }
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
  auto j = read_json_if_valid(*t, path_.string() + ":" + abs(rel) + ": attribute '" + name + "'");
  if (!j) throw Error(path_.string() + ":" + abs(rel) + ": attribute '" + name + "' is not JSON");
  return std::move(*j);
}

StoredTensor Recording::stored_bf16(const std::string& rel) {
  const std::string where = path_.string() + ":" + abs(rel);
  StoredTensor st;
  st.data = file_.read_bf16(abs(rel));
  st.full_shape = attr_text(rel, "full_shape") ? parse_shape(attr_json(rel, "full_shape"), where) : st.data.shape;
  const hdf5::Integrity integrity = hdf5::read_integrity(file_, abs(rel));
  st.sha256_full = integrity.sha256_full;
  const std::string& stored = integrity.stored;
  if (stored == "full") {
    st.full = true;
    if (st.data.shape != st.full_shape)
      throw Error(where + ": stored in full as " + shape_str(st.data.shape) + " but full_shape is " +
                  shape_str(st.full_shape));
    if (!hdf5::verify_sha256_full(file_, abs(rel), st.data)) st.unverified = hdf5::unverifiable_reason(integrity);
  } else if (stored == "none") {
    st.full = false;
  } else if (const auto range = row_range_digits(stored)) {
    st.full = false;
    // The rows must lie inside full_shape's axis 1: the regenerated input is read at them.
    const auto row = [&](const std::string& digits) -> std::int64_t {
      const bool fits = digits.size() <= 18;
      const std::int64_t v = fits ? std::stoll(digits) : 0;
      if (!fits || st.full_shape.size() < 2 || v >= st.full_shape[1])
        throw Error(where + ": stored '" + stored + "' names rows outside full_shape " + shape_str(st.full_shape));
      return v;
    };
    st.first_row = row(range->first);
    const std::int64_t last = row(range->second);
    if (last < st.first_row) throw Error(where + ": stored '" + stored + "' ends before it starts");
    st.row_count = last - st.first_row + 1;
    if (st.data.shape.size() < 2 || st.data.dim(0) != 1 || st.data.dim(1) != st.row_count)
      throw Error(where + ": stored '" + stored + "' but the dataset is " + shape_str(st.data.shape));
  } else {
    throw Error(where + ": unknown stored convention '" + stored + "'");
  }
  // Stored whole, the data was checked above; in part or not at all, only a sha256_full can be.
  if (!st.full && st.sha256_full.empty()) {
    st.unverified = hdf5::unverifiable_reason(integrity);
    hdf5::unverifiable(where, st.unverified);
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

F32Tensor Recording::input_f32(const std::string& rel) {
  F32Tensor t = file_.read_f32(abs(rel));
  hdf5::verify_sha256_full(file_, abs(rel), t);
  return t;
}

}  // namespace psi::probes
