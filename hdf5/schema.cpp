#include "hdf5/schema.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <ctime>
#include <fstream>
#include <iterator>
#include <variant>

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/json_read.h"
#include "engine/sha256.h"
#include "hdf5/unverified.h"

namespace psi::hdf5 {

namespace {

double as_double(Bf16 v) { return double(v.to_float()); }
double as_double(float v) { return double(v); }
double as_double(double v) { return v; }

template <class T>
TensorStats stats_of(const Tensor<T>& t) {
  TensorStats s;
  s.sha256_full = sha256_hex(t);
  for (const T& e : t.data) {
    double x = as_double(e);
    if (!std::isfinite(x)) {
      ++s.nonfinite_count;
      continue;
    }
    s.sum_f64 += x;
    s.sumsq_f64 += x * x;
    s.absmax = std::max(s.absmax, std::fabs(x));
  }
  return s;
}

// Parses a decimal integer that must fill `text` exactly.
std::optional<std::int64_t> parse_int(std::string_view text) {
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

// Quotes an argument for a POSIX shell when it holds anything but plain characters.
std::string shell_quote(const std::string& a) {
  bool plain = !a.empty();
  for (char c : a)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || std::string_view("-_./=:,+@%").find(c) != std::string_view::npos))
      plain = false;
  if (plain) return a;
  std::string out = "'";
  for (char c : a) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

TensorStats tensor_stats(const Bf16Tensor& t) { return stats_of(t); }
TensorStats tensor_stats(const F32Tensor& t) { return stats_of(t); }
TensorStats tensor_stats(const F64Tensor& t) { return stats_of(t); }

Integrity read_integrity(const hdf5::File& f, const std::string& dataset) {
  const std::string where = f.path().string() + ":" + dataset;
  auto describe = [](const std::optional<hdf5::AttrValue>& v) -> std::string {
    if (!v) return "not a scalar string";
    if (std::holds_alternative<std::int64_t>(*v)) return "an integer";
    if (std::holds_alternative<double>(*v)) return "a float";
    return "'" + std::get<std::string>(*v).substr(0, 80) + "'";
  };
  Integrity in;
  in.stored = "full";
  if (f.has_attr(dataset, attr::sha256_full)) {
    const auto v = f.attr(dataset, attr::sha256_full);
    const auto* s = v ? std::get_if<std::string>(&*v) : nullptr;
    const bool hex = s && s->size() == 64 && s->find_first_not_of("0123456789abcdefABCDEF") == std::string::npos;
    if (!hex)
      throw Error(where + ": its sha256_full attribute is " + describe(v) +
                  ", not a SHA-256 (64 hexadecimal digits); the data cannot be checked, so it is not read");
    in.sha256_full = *s;
    std::transform(in.sha256_full.begin(), in.sha256_full.end(), in.sha256_full.begin(),
                   [](unsigned char c) { return char(std::tolower(c)); });
  }
  if (f.has_attr(dataset, attr::stored)) {
    const auto v = f.attr(dataset, attr::stored);
    const auto* s = v ? std::get_if<std::string>(&*v) : nullptr;
    if (!s) throw Error(where + ": its stored attribute is " + describe(v) + ", not a string");
    in.stored = s->empty() ? "full" : *s;
  }
  // Only a tensor stored whole is hashed: data under stored='none' would go unchecked (integrity
  // by omission). A row range is checked against the data by each reader of partial tensors.
  if (in.stored == "none") {
    const Shape shape = f.info(dataset).shape;
    if (numel(shape) != 0)
      throw Error(where + ": its stored attribute says 'none' but it holds " + std::to_string(numel(shape)) +
                  " elements " + shape_str(shape) + "; data it claims not to hold would go unchecked, so it is not read");
  }
  return in;
}

Sha256Check check_sha256_full(const hdf5::File& f, const std::string& dataset, const void* data, std::size_t bytes) {
  const Integrity in = read_integrity(f, dataset);
  if (in.sha256_full.empty()) return Sha256Check::not_recorded;
  if (in.stored != "full") return Sha256Check::not_whole;
  return sha256_hex(data, bytes) == in.sha256_full ? Sha256Check::match : Sha256Check::mismatch;
}

std::string sha256_mismatch_message(const hdf5::File& f, const std::string& dataset) {
  return f.path().string() + ":" + dataset +
         ": data does not match its sha256_full attribute (the file is corrupt or was changed after it was written)";
}

std::string unverifiable_reason(const Integrity& in) {
  if (!in.sha256_full.empty()) return "";
  if (in.stored == "full") return "no sha256_full: nothing to check its data against";
  if (in.stored == "none") return "stored='none' and no sha256_full: nothing to check the tensor against";
  return "stores part of the tensor (stored='" + in.stored.substr(0, 80) +
         "') and no sha256_full: nothing to check the rows against";
}

bool hashes_every_tensor(const hdf5::File& f) {
  if (f.has_attr("/", "schema")) return true;
  const auto format = f.attr("/", "format");
  const auto* s = format ? std::get_if<std::string>(&*format) : nullptr;
  return s && *s == kRecordingFormat;
}

bool is_text_dataset(const hdf5::File& f, const hdf5::DatasetInfo& di) {
  return di.kind == hdf5::ElemKind::u8 &&
         (di.dtype_attr == "utf8" || f.has_attr(di.path, "encoding") || f.has_attr(di.path, attr::content));
}

bool is_json_text(const hdf5::File& f, const hdf5::DatasetInfo& di) {
  if (!is_text_dataset(f, di) || di.shape.size() != 1) return false;
  const auto text = [&](const std::string& object, const char* name) {
    const auto v = f.attr(object, name);
    const std::string* s = v ? std::get_if<std::string>(&*v) : nullptr;
    return s ? *s : std::string();
  };
  if (f.has_attr(di.path, attr::content)) return text(di.path, attr::content) == kJsonContent;
  if (text("/", "format") == kRecordingFormat) return text(di.path, "encoding").find("JSON") != std::string::npos;
  return f.has_attr("/", "schema") && text("/", "schema") == kSchema &&
         (di.path == "/report/cases" || di.path == "/report/tables" || di.path == "/report/options");
}

std::string dtype_label_problem(const hdf5::DatasetInfo& di) {
  if (di.dtype_attr.empty()) return "";
  struct Label {
    const char* name;
    hdf5::ElemKind kind;
  };
  static constexpr Label kLabels[] = {{"bfloat16", hdf5::ElemKind::bf16}, {"float32", hdf5::ElemKind::f32},
                                      {"float64", hdf5::ElemKind::f64},   {"uint8", hdf5::ElemKind::u8},
                                      {"utf8", hdf5::ElemKind::u8},       {"uint16", hdf5::ElemKind::u16},
                                      {"int64", hdf5::ElemKind::i64}};
  for (const Label& l : kLabels)
    if (di.dtype_attr == l.name) {
      if (di.kind == l.kind) return "";
      // A bfloat16 label is read as BF16 only on uint16 storage.
      const std::string stored = di.kind == hdf5::ElemKind::bf16 ? "uint16" : std::string(hdf5::kind_name(di.kind));
      return "its dtype attribute says '" + di.dtype_attr + "' but the data is stored as " + stored +
             (l.kind == hdf5::ElemKind::bf16 ? " (bfloat16 is stored as uint16)" : "");
    }
  return "its dtype attribute '" + di.dtype_attr.substr(0, 80) +
         "' names no element type psi knows (bfloat16, float32, float64, uint8, utf8, uint16, int64)";
}

bool verify_sha256_full(const hdf5::File& f, const std::string& dataset, const void* data, std::size_t bytes) {
  const Sha256Check c = check_sha256_full(f, dataset, data, bytes);
  if (c == Sha256Check::mismatch) throw Error(sha256_mismatch_message(f, dataset));
  if (c != Sha256Check::not_recorded) return true;
  unverifiable(f.path().string() + ":" + dataset, unverifiable_reason(read_integrity(f, dataset)));
  return false;
}

StoredRegion parse_stored(std::string_view stored, const std::string& where) {
  StoredRegion r;
  if (stored.empty() || stored == "full") return r;
  if (stored == "none") {
    r.kind = StoredRegion::Kind::none;
    return r;
  }
  // rows_<first>_to_<last>_of_axis_<k>
  auto bad = [&] {
    return Error(where + ": unknown stored='" + std::string(stored) +
                 "' (expected full, none or rows_<first>_to_<last>_of_axis_<k>)");
  };
  constexpr std::string_view p0 = "rows_", p1 = "_to_", p2 = "_of_axis_";
  if (!stored.starts_with(p0)) throw bad();
  std::string_view rest = stored.substr(p0.size());
  auto i1 = rest.find(p1);
  if (i1 == std::string_view::npos) throw bad();
  auto i2 = rest.find(p2, i1 + p1.size());
  if (i2 == std::string_view::npos) throw bad();
  auto first = parse_int(rest.substr(0, i1));
  auto last = parse_int(rest.substr(i1 + p1.size(), i2 - i1 - p1.size()));
  auto axis = parse_int(rest.substr(i2 + p2.size()));
  if (!first || !last || !axis || *first < 0 || *last < *first || *axis < 0 || *axis > 32) throw bad();
  r.kind = StoredRegion::Kind::rows;
  r.first = *first;
  r.last = *last;
  r.axis = int(*axis);
  return r;
}

std::string stored_name(const StoredRegion& r) {
  switch (r.kind) {
    case StoredRegion::Kind::full: return "full";
    case StoredRegion::Kind::none: return "none";
    case StoredRegion::Kind::rows:
      return "rows_" + std::to_string(r.first) + "_to_" + std::to_string(r.last) + "_of_axis_" +
             std::to_string(r.axis);
  }
  return "full";
}

Shape stored_shape(const Shape& full, const StoredRegion& r) {
  switch (r.kind) {
    case StoredRegion::Kind::full: return full;
    case StoredRegion::Kind::none: return Shape{0};
    case StoredRegion::Kind::rows: {
      Shape s = full;
      if (r.axis < int(s.size())) s[r.axis] = r.last - r.first + 1;
      return s;
    }
  }
  return full;
}

std::string shape_json(const Shape& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

Shape parse_shape_json(std::string_view json, const std::string& where) {
  const auto j = read_json_if_valid(json, where).value_or(nullptr);
  Shape s;
  bool ok = j.is_array();
  if (ok)
    for (auto& e : j) {
      if (!e.is_number_integer() || e.get<std::int64_t>() < 0) {
        ok = false;
        break;
      }
      s.push_back(e.get<std::int64_t>());
    }
  if (!ok) throw Error(where + ": full_shape '" + std::string(json) + "' is not a JSON list of sizes");
  return s;
}

std::string utc_now_iso8601() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string current_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string out;
  std::size_t start = 0;
  while (start < raw.size()) {
    std::size_t end = raw.find('\0', start);
    if (end == std::string::npos) end = raw.size();
    if (!out.empty()) out += ' ';
    out += shell_quote(raw.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace psi::hdf5
