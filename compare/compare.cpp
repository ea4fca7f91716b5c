#include "compare/compare.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <set>

#include <memory>

#include <nlohmann/json.hpp>
#include <re2/re2.h>

#include "engine/bf16.h"
#include "engine/error.h"
#include "engine/json_read.h"
#include "engine/distance.h"
#include "hdf5/schema.h"
#include "hdf5/state_file.h"
#include "hdf5/unverified.h"

namespace psi::hdf5 {

bool maps_path(const PathMap& m, std::string_view path) {
  if (!path.starts_with(m.from)) return false;
  // Whole components: /official-h200 names /official-h200/x, never /official-h200-flash/x.
  return path.size() == m.from.size() || m.from.empty() || m.from.back() == '/' || path[m.from.size()] == '/';
}

namespace {

// ---- element types -------------------------------------------------------------------------
// What the comparison needs of an element type beside the distance (engine/distance.h, floating
// types): its bits (equality is bitwise) and how a value is shown.

template <class T>
struct Elem;

template <>
struct Elem<Bf16> {
  static constexpr bool floating = true;
  static std::uint64_t bits(Bf16 v) { return v.bits; }
  static std::string format(Bf16 v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g (0x%04x)", double(v.to_float()), unsigned(v.bits));
    return buf;
  }
};

template <>
struct Elem<float> {
  static constexpr bool floating = true;
  static std::uint64_t bits(float v) { return std::bit_cast<std::uint32_t>(v); }
  static std::string format(float v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g (0x%08" PRIx32 ")", double(v), std::bit_cast<std::uint32_t>(v));
    return buf;
  }
};

template <>
struct Elem<double> {
  static constexpr bool floating = true;
  static std::uint64_t bits(double v) { return std::bit_cast<std::uint64_t>(v); }
  static std::string format(double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g (0x%016" PRIx64 ")", v, std::bit_cast<std::uint64_t>(v));
    return buf;
  }
};

template <class I>
struct IntElem {
  static constexpr bool floating = false;
  static std::uint64_t bits(I v) { return std::uint64_t(v); }
  static std::string format(I v) { return std::to_string(v); }
};
template <>
struct Elem<std::uint8_t> : IntElem<std::uint8_t> {};
template <>
struct Elem<std::uint16_t> : IntElem<std::uint16_t> {};
template <>
struct Elem<std::int64_t> : IntElem<std::int64_t> {};

// ---- loading -------------------------------------------------------------------------------

// Integer datasets h5::File has no typed reader for (uint16 without dtype='bfloat16', int64).
template <class T>
std::vector<T> read_native(const h5::File& f, const std::string& path, hid_t mem_type, std::int64_t n) {
  std::vector<T> out(static_cast<std::size_t>(n));
  if (n == 0) return out;
  h5::Handle d(H5Dopen2(f.id(), path.c_str(), H5P_DEFAULT), H5Dclose);
  if (!d || H5Dread(d.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) < 0)
    throw Error(f.path().string() + ":" + path + ": read failed (truncated or corrupt file?)");
  return out;
}

template <class T>
std::vector<T> load(const h5::File& f, const h5::DatasetInfo& di) {
  if constexpr (std::is_same_v<T, Bf16>) return f.read_bf16(di.path).data;
  else if constexpr (std::is_same_v<T, float>) return f.read_f32(di.path).data;
  else if constexpr (std::is_same_v<T, double>) return f.read_f64(di.path).data;
  else if constexpr (std::is_same_v<T, std::uint8_t>) return f.read_u8(di.path);
  else if constexpr (std::is_same_v<T, std::uint16_t>) return read_native<T>(f, di.path, H5T_NATIVE_UINT16, numel(di.shape));
  else return read_native<T>(f, di.path, H5T_NATIVE_INT64, numel(di.shape));
}

std::string string_attr(const h5::File& f, const std::string& ds, const char* name) {
  auto v = f.attr(ds, name);
  return v && std::holds_alternative<std::string>(*v) ? std::get<std::string>(*v) : std::string();
}

std::string file_format(const h5::File& f) {
  for (const char* name : {"schema", "format"}) {
    std::string v = string_attr(f, "/", name);
    if (!v.empty()) return v;
  }
  return "plain HDF5";
}

// psi files and the recordings hash every tensor they hold: one without sha256_full was edited
// (hdf5/unverified.h refuses it, or records it under --allow-unverified); a plain HDF5 file
// records no hashes, and its data is compared as it is. Returns why, or empty.
std::string unverified_tensor(const h5::File& f, const h5::DatasetInfo& di, const char* side) {
  const std::string format = file_format(f);
  if ((format != kSchema && format != kRecordingFormat) || is_text_dataset(f, di)) return "";
  const std::string why = unverifiable_reason(read_integrity(f, di.path));
  if (why.empty()) return "";
  unverifiable(f.path().string() + ":" + di.path, why);
  return std::string(side) + ": " + why;
}

// ---- stored regions ------------------------------------------------------------------------

// One side of a comparison: where its stored elements sit in the full tensor.
struct Side {
  h5::DatasetInfo info;
  Shape full;
  StoredRegion region;
  Shape lo, hi;  // the stored box [lo, hi) in full-tensor coordinates
};

Side describe(const h5::File& f, const h5::DatasetInfo& di) {
  const std::string where = f.path().string() + ":" + di.path;
  Side s;
  s.info = di;
  std::string fs = string_attr(f, di.path, attr::full_shape);
  s.full = fs.empty() ? di.shape : parse_shape_json(fs, where);
  s.region = parse_stored(read_integrity(f, di.path).stored, where);
  if (s.region.kind == StoredRegion::Kind::none) return s;
  if (s.region.kind == StoredRegion::Kind::rows &&
      (s.region.axis >= int(s.full.size()) || s.region.last >= s.full[s.region.axis]))
    throw Error(where + ": stored='" + stored_name(s.region) + "' lies outside full_shape " + shape_str(s.full));
  if (stored_shape(s.full, s.region) != di.shape)
    throw Error(where + ": stored shape " + shape_str(di.shape) + " does not match stored='" +
                stored_name(s.region) + "' of full_shape " + shape_str(s.full));
  s.lo.assign(s.full.size(), 0);
  s.hi = s.full;
  if (s.region.kind == StoredRegion::Kind::rows) {
    s.lo[s.region.axis] = s.region.first;
    s.hi[s.region.axis] = s.region.last + 1;
  }
  return s;
}

std::string kind_label(const h5::DatasetInfo& di) {
  std::string k(h5::kind_name(di.kind));
  if (di.kind == h5::ElemKind::u16) k += " (no dtype='bfloat16' attribute)";
  return k;
}

// "rows 0..255 of axis 1" when the box cuts one axis, else the box in slice notation.
std::string describe_box(const Shape& lo, const Shape& hi, const Shape& full) {
  std::vector<std::size_t> cut;
  for (std::size_t i = 0; i < full.size(); ++i)
    if (lo[i] != 0 || hi[i] != full[i]) cut.push_back(i);
  if (cut.size() == 1)
    return "rows " + std::to_string(lo[cut[0]]) + ".." + std::to_string(hi[cut[0]] - 1) + " of axis " +
           std::to_string(cut[0]);
  std::string out = "[";
  for (std::size_t i = 0; i < full.size(); ++i)
    out += (i ? ", " : "") + std::to_string(lo[i]) + ":" + std::to_string(hi[i]);
  return out + "]";
}

// ---- the element loop ----------------------------------------------------------------------

std::vector<std::int64_t> strides_of(const Shape& s) {
  std::vector<std::int64_t> st(s.size(), 1);
  for (std::size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

// Compares the elements of box [lo, hi) (full-tensor coordinates) in row-major order, a row of
// the last axis at a time: floating types through the one distance (engine/distance.h), whose
// sums run in that order; other types by their bits.
template <class T>
void compare_box(const std::vector<T>& a, const Side& sa, const std::vector<T>& b, const Side& sb,
                 const Shape& lo, const Shape& hi, DatasetComparison& out) {
  using E = Elem<T>;
  const std::size_t rank = lo.size();
  const auto st_a = strides_of(sa.info.shape), st_b = strides_of(sb.info.shape), st_full = strides_of(sa.full);
  const std::int64_t inner = hi[rank - 1] - lo[rank - 1];
  [[maybe_unused]] std::conditional_t<E::floating, DistanceSum<T, T>, char> sum{};
  Shape idx = lo;
  while (true) {
    std::int64_t off_a = 0, off_b = 0;
    for (std::size_t i = 0; i < rank; ++i) {
      off_a += (idx[i] - sa.lo[i]) * st_a[i];
      off_b += (idx[i] - sb.lo[i]) * st_b[i];
    }
    if constexpr (E::floating)
      sum.add(std::span<const T>(a.data() + off_a, std::size_t(inner)), std::span<const T>(b.data() + off_b, std::size_t(inner)));
    for (std::int64_t j = 0; j < inner && !(E::floating && out.first); ++j) {
      const T x = a[off_a + j], y = b[off_b + j];
      if (E::bits(x) == E::bits(y)) continue;
      if constexpr (!E::floating) ++out.differing;
      if (!out.first) {
        FirstDifference fd;
        fd.index = idx;
        fd.index[rank - 1] += j;
        for (std::size_t i = 0; i < rank; ++i) fd.flat_index += fd.index[i] * st_full[i];
        fd.a_value = E::format(x);
        fd.b_value = E::format(y);
        out.first = fd;
      }
    }
    out.compared += inner;
    // Odometer over all but the contiguous last axis.
    std::size_t k = rank - 1;
    bool done = true;
    while (k > 0) {
      --k;
      if (++idx[k] < hi[k]) {
        done = false;
        break;
      }
      idx[k] = lo[k];
    }
    if (done) break;
  }
  if constexpr (E::floating) {
    out.distance = sum.result();
    out.differing = out.distance->differing;
  }
}

// Loads both sides, checks each whole one against its sha256_full (a mismatch makes the
// dataset `corrupt`: comparing data that is not what was written would mislead), then compares.
template <class T>
void load_and_compare(const h5::File& fa, const Side& sa, const h5::File& fb, const Side& sb,
                      const Shape& lo, const Shape& hi, DatasetComparison& out) {
  const std::vector<T> a = load<T>(fa, sa.info), b = load<T>(fb, sb.info);
  std::string corrupt;
  auto check = [&](const h5::File& f, const std::string& path, const std::vector<T>& v, bool& checked) {
    const Sha256Check c = check_sha256_full(f, path, v.data(), v.size() * sizeof(T));
    checked = c == Sha256Check::match || c == Sha256Check::mismatch;
    if (c == Sha256Check::mismatch) corrupt += (corrupt.empty() ? "" : "; ") + sha256_mismatch_message(f, path);
  };
  check(fa, sa.info.path, a, out.sha256_checked_a);
  check(fb, sb.info.path, b, out.sha256_checked_b);
  if (!corrupt.empty()) {
    out.status = CompareStatus::corrupt;
    out.note = corrupt;
    return;
  }
  compare_box(a, sa, b, sb, lo, hi, out);
  out.status = out.differing == 0 ? CompareStatus::equal : CompareStatus::differs;
}

std::string dataset_label(const DatasetComparison& d) {
  if (d.path_a.empty()) return d.path_b;
  if (d.path_b.empty() || d.path_b == d.path_a) return d.path_a;
  return d.path_a + " => " + d.path_b;
}

std::string index_str(const Shape& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

bool bad_input(CompareStatus s) {
  return s == CompareStatus::dtype_mismatch || s == CompareStatus::unsupported || s == CompareStatus::corrupt ||
         s == CompareStatus::unverifiable;
}

}  // namespace

std::string_view status_name(CompareStatus s) {
  switch (s) {
    case CompareStatus::equal: return "equal";
    case CompareStatus::differs: return "differs";
    case CompareStatus::not_stored: return "not_stored";
    case CompareStatus::only_a: return "only_a";
    case CompareStatus::only_b: return "only_b";
    case CompareStatus::shape_mismatch: return "shape_mismatch";
    case CompareStatus::dtype_mismatch: return "dtype_mismatch";
    case CompareStatus::unsupported: return "unsupported";
    case CompareStatus::corrupt: return "corrupt";
    case CompareStatus::unverifiable: return "unverifiable";
  }
  return "unsupported";
}

namespace {

// The names two declarations both hold (JSON lists: a table's time_columns, a text's
// time_fields; anything else declares none): a name one side alone declares is compared, so
// that no file can exempt a field the other does not.
std::set<std::string> declared_by_both(const nlohmann::json& a, const nlohmann::json& b) {
  const auto names = [](const nlohmann::json& list) {
    std::set<std::string> out;
    if (list.is_array())
      for (const auto& n : list)
        if (n.is_string()) out.insert(n.get<std::string>());
    return out;
  };
  const std::set<std::string> x = names(a), y = names(b);
  std::set<std::string> both;
  std::set_intersection(x.begin(), x.end(), y.begin(), y.end(), std::inserter(both, both.end()));
  return both;
}

// The leaves of two JSON values side by side: each leaf (or a leaf on one side only) counted,
// and those that differ recorded by path; a leaf under a time field (a key in `time_keys`, a cell
// of a table's time column) is counted apart.
struct JsonDiff {
  bool timing = false;
  std::set<std::string> time_keys;  // declared by both files (the dataset's time_fields)
  std::int64_t leaves = 0, timing_leaves = 0, timing_differing = 0, provenance_leaves = 0;
  std::vector<std::string> differing;  // paths, in document order
  std::string first;                   // "path: A=… B=…" of the first
  std::string first_provenance;        // the same for the first provenance field that differs
  bool in_provenance = false;

  void leaf(const std::string& path, const nlohmann::json* a, const nlohmann::json* b, bool timed) {
    ++leaves;
    const bool same = a && b && *a == *b;
    if (in_provenance) {
      ++provenance_leaves;
      if (!same && first_provenance.empty())
        first_provenance = path.substr(path.starts_with(".") ? 1 : 0) + ": A=" + (a ? a->dump() : std::string("(absent)")) +
                           " B=" + (b ? b->dump() : std::string("(absent)"));
      return;
    }
    if (timed) {
      ++timing_leaves;
      if (!same) ++timing_differing;
      if (!timing) return;
    }
    if (same) return;
    if (differing.empty())
      first = path + ": A=" + (a ? a->dump() : std::string("(absent)")) + " B=" + (b ? b->dump() : std::string("(absent)"));
    differing.push_back(path);
  }

  void walk(const std::string& path, const nlohmann::json* a, const nlohmann::json* b, bool timed) {
    const bool objects = a && b && a->is_object() && b->is_object();
    const bool arrays = a && b && a->is_array() && b->is_array();
    if (objects) {
      // A rendered table: its cells under a column both sides call a time column are time fields.
      std::vector<bool> timed_column;
      if (a->contains("columns") && a->at("columns").is_array()) {
        const std::set<std::string> time_columns =
            declared_by_both(a->value("time_columns", nlohmann::json()), b->value("time_columns", nlohmann::json()));
        for (const auto& c : a->at("columns")) timed_column.push_back(c.is_string() && time_columns.count(c.get<std::string>()));
      }
      std::set<std::string> keys;
      for (const auto& [k, v] : a->items()) keys.insert(k);
      for (const auto& [k, v] : b->items()) keys.insert(k);
      for (const auto& k : keys) {
        const nlohmann::json* x = a->contains(k) ? &a->at(k) : nullptr;
        const nlohmann::json* y = b->contains(k) ? &b->at(k) : nullptr;
        const std::string sub = path + "." + k;
        if (k == "rows" && !timed_column.empty() && x && y && x->is_array() && y->is_array()) {
          rows(sub, *x, *y, timed_column, timed);
          continue;
        }
        const bool was = in_provenance;
        in_provenance = in_provenance || provenance_field(k);
        walk(sub, x, y, timed || time_keys.count(k));
        in_provenance = was;
      }
    } else if (arrays) {
      for (std::size_t i = 0; i < std::max(a->size(), b->size()); ++i)
        walk(path + "[" + std::to_string(i) + "]", i < a->size() ? &(*a)[i] : nullptr, i < b->size() ? &(*b)[i] : nullptr,
             timed);
    } else {
      leaf(path, a, b, timed);
    }
  }

  void rows(const std::string& path, const nlohmann::json& a, const nlohmann::json& b, const std::vector<bool>& timed_column,
            bool timed) {
    for (std::size_t r = 0; r < std::max(a.size(), b.size()); ++r) {
      const nlohmann::json* x = r < a.size() ? &a[r] : nullptr;
      const nlohmann::json* y = r < b.size() ? &b[r] : nullptr;
      const std::string sub = path + "[" + std::to_string(r) + "]";
      if (!x || !y || !x->is_array() || !y->is_array()) {
        walk(sub, x, y, timed);
        continue;
      }
      for (std::size_t c = 0; c < std::max(x->size(), y->size()); ++c)
        walk(sub + "[" + std::to_string(c) + "]", c < x->size() ? &(*x)[c] : nullptr, c < y->size() ? &(*y)[c] : nullptr,
             timed || (c < timed_column.size() && timed_column[c]));
    }
  }
};

// Two uint8 datasets that both hold JSON: compared field by field into `out`; false when either
// is not JSON (then they are compared as bytes).
bool compare_json_text(const h5::File& a, const std::string& path_a, const h5::File& b, const std::string& path_b,
                       const CompareOptions& opt, DatasetComparison& out) {
  const std::string ta = a.read_text(path_a), tb = b.read_text(path_b);
  const nlohmann::json ja = read_json_if_valid(ta, a.path().string() + ":" + path_a).value_or(nullptr);
  const nlohmann::json jb = read_json_if_valid(tb, b.path().string() + ":" + path_b).value_or(nullptr);
  if (!(ja.is_object() || ja.is_array()) || !(jb.is_object() || jb.is_array())) return false;
  JsonDiff d;
  d.timing = opt.timing;
  // The keys that measure time are what the writer declared beside the text (attribute
  // time_fields, a JSON list), never guessed from their names.
  const auto declared = [](const h5::File& f, const std::string& path) {
    const std::string list = string_attr(f, path, "time_fields");
    if (list.empty()) return nlohmann::json();
    return read_json_if_valid(list, f.path().string() + ":" + path + "@time_fields").value_or(nullptr);
  };
  const nlohmann::json da = declared(a, path_a), db = declared(b, path_b);
  d.time_keys = declared_by_both(da, db);
  d.walk("", &ja, &jb, false);
  out.compared = d.leaves;
  out.differing = std::int64_t(d.differing.size());
  out.status = d.differing.empty() ? CompareStatus::equal : CompareStatus::differs;
  out.note = "JSON, compared field by field";
  if (!d.differing.empty()) out.note += "; first differing field " + d.first.substr(d.first.front() == '.' ? 1 : 0);
  if (!d.first_provenance.empty())
    out.note += "; paths of inputs differ, not counted (provenance: " + d.first_provenance + ")";
  if (d.timing_leaves > 0)
    out.note += opt.timing ? "; timing fields compared (" + std::to_string(d.timing_differing) + " of " +
                                 std::to_string(d.timing_leaves) + " differ)"
                           : "; " + std::to_string(d.timing_leaves) + " timing fields not compared (" +
                                 std::to_string(d.timing_differing) + " differ; --timing compares them)";
  if (da != db)
    out.note += "; the files declare different time fields (A " + da.dump() + ", B " + db.dump() +
                "): only those both declare are counted apart";
  return true;
}

}  // namespace

bool provenance_field(const std::string& name) {
  return name == "provenance" || name == "file" || name == "compared_to";
}

DatasetComparison compare_datasets(const h5::File& a, const std::string& path_a, const h5::File& b,
                                   const std::string& path_b, const CompareOptions& opt) {
  DatasetComparison out;
  out.path_a = path_a;
  out.path_b = path_b;
  const h5::DatasetInfo ia = a.info(path_a), ib = b.info(path_b);
  out.dtype = std::string(h5::kind_name(ia.kind));
  if (ia.kind == h5::ElemKind::other || ib.kind == h5::ElemKind::other) {
    out.status = CompareStatus::unsupported;
    out.note = "element type not supported (psi compares bfloat16, float32, float64, uint8, uint16, int64)";
    return out;
  }
  if (ia.kind == h5::ElemKind::u8 && ib.kind == h5::ElemKind::u8 && ia.shape.size() == 1 && ib.shape.size() == 1) {
    try {
      if (compare_json_text(a, path_a, b, path_b, opt, out)) {
        out.full_shape = ia.shape;
        return out;
      }
    } catch (const Error& e) {
      out.status = CompareStatus::unsupported;
      out.note = e.what();
      return out;
    }
  }
  if (ia.kind != ib.kind) {
    out.status = CompareStatus::dtype_mismatch;
    out.note = "dtype " + kind_label(ia) + " in A vs " + kind_label(ib) + " in B";
    return out;
  }
  Side sa, sb;
  try {
    sa = describe(a, ia);
    sb = describe(b, ib);
  } catch (const Error& e) {
    out.status = CompareStatus::unsupported;
    out.note = e.what();
    return out;
  }
  out.full_shape = sa.full;
  try {
    for (const std::string& u : {unverified_tensor(a, ia, "A"), unverified_tensor(b, ib, "B")})
      if (!u.empty()) out.unverified += (out.unverified.empty() ? "" : "; ") + u;
  } catch (const Error& e) {
    out.status = CompareStatus::unverifiable;
    out.note = e.what();
    return out;
  }
  if (!out.unverified.empty()) out.note = "UNVERIFIED (" + out.unverified + ")";
  if (sa.full != sb.full) {
    out.status = CompareStatus::shape_mismatch;
    out.note = "shape " + shape_str(sa.full) + " in A vs " + shape_str(sb.full) + " in B";
    return out;
  }
  auto none = StoredRegion::Kind::none;
  if (sa.region.kind == none || sb.region.kind == none) {
    out.status = CompareStatus::not_stored;
    out.note = sa.region.kind == none && sb.region.kind == none ? "stored='none' in A and B"
               : sa.region.kind == none                         ? "stored='none' in A"
                                                                : "stored='none' in B";
    return out;
  }
  // Scalars are compared as one-element vectors.
  if (sa.full.empty()) {
    for (Side* s : {&sa, &sb}) {
      s->full = s->info.shape = s->hi = Shape{1};
      s->lo = Shape{0};
    }
  }
  Shape lo(sa.full.size()), hi(sa.full.size());
  bool empty = false;
  for (std::size_t i = 0; i < lo.size(); ++i) {
    lo[i] = std::max(sa.lo[i], sb.lo[i]);
    hi[i] = std::min(sa.hi[i], sb.hi[i]);
    empty = empty || hi[i] <= lo[i];
  }
  const bool partial = sa.region.kind != StoredRegion::Kind::full || sb.region.kind != StoredRegion::Kind::full;
  const std::string regions = "A stores " + stored_name(sa.region) + ", B stores " + stored_name(sb.region);
  if (empty) {
    out.status = CompareStatus::not_stored;
    out.note = numel(sa.full) == 0 ? "empty tensor" : "no element stored in both (" + regions + ")";
    return out;
  }
  if (partial && (lo != Shape(lo.size(), 0) || hi != sa.full))
    out.note += std::string(out.note.empty() ? "" : "; ") + "compared the stored " + describe_box(lo, hi, sa.full) + " (" + regions + ")";
  switch (ia.kind) {
    case h5::ElemKind::bf16: load_and_compare<Bf16>(a, sa, b, sb, lo, hi, out); break;
    case h5::ElemKind::f32: load_and_compare<float>(a, sa, b, sb, lo, hi, out); break;
    case h5::ElemKind::f64: load_and_compare<double>(a, sa, b, sb, lo, hi, out); break;
    case h5::ElemKind::u8: load_and_compare<std::uint8_t>(a, sa, b, sb, lo, hi, out); break;
    case h5::ElemKind::u16: load_and_compare<std::uint16_t>(a, sa, b, sb, lo, hi, out); break;
    case h5::ElemKind::i64: load_and_compare<std::int64_t>(a, sa, b, sb, lo, hi, out); break;
    case h5::ElemKind::other: break;
  }
  return out;
}

CompareReport compare_files(const std::filesystem::path& a, const std::filesystem::path& b,
                            const CompareOptions& opt) {
  const h5::File fa = h5::File::open_read(a), fb = h5::File::open_read(b);
  CompareReport r;
  r.file_a = a.string();
  r.file_b = b.string();
  r.format_a = file_format(fa);
  r.format_b = file_format(fb);
  r.partial_a = partial_marker(fa);
  r.partial_b = partial_marker(fb);
  auto refuse_partial = [&](const std::string& file, const std::string& marker) {
    if (!marker.empty() && !opt.allow_partial)
      throw Error(file + ": a partial file (" + marker + "); psi compare refuses it unless --allow-partial is given");
  };
  refuse_partial(r.file_a, r.partial_a);
  refuse_partial(r.file_b, r.partial_b);
  r.strict = opt.strict || (!opt.subset && opt.only.empty() && opt.map.empty());
  std::unique_ptr<re2::RE2> only;
  if (!opt.only.empty()) {
    const std::string shown = opt.only.size() > 60 ? opt.only.substr(0, 60) + "…" : opt.only;
    if (opt.only.size() > kMaxOnlyPattern)
      throw Error("--only '" + shown + "': longer than " + std::to_string(kMaxOnlyPattern) + " characters");
    re2::RE2::Options ro;
    ro.set_log_errors(false);
    ro.set_max_mem(std::int64_t(64) << 20);
    only = std::make_unique<re2::RE2>(opt.only, ro);
    if (!only->ok())
      throw Error("--only '" + shown + "' is not a valid regular expression (RE2 syntax): " + only->error());
  }
  auto selected = [&](const std::string& p) { return !only || re2::RE2::PartialMatch(p, *only); };
  auto mapped = [&](const std::string& p) {
    for (const auto& m : opt.map)
      if (maps_path(m, p)) return m.to + p.substr(m.from.size());
    return p;
  };
  std::set<std::string> in_b, targets;
  const auto list_b = fb.list_datasets();
  for (const auto& d : list_b) in_b.insert(d.path);
  for (const auto& d : fa.list_datasets()) {
    const std::string pb = mapped(d.path);
    targets.insert(pb);
    if (!selected(d.path)) continue;
    if (in_b.count(pb)) {
      r.datasets.push_back(compare_datasets(fa, d.path, fb, pb, opt));
    } else {
      DatasetComparison only_a;
      only_a.path_a = d.path;
      only_a.status = CompareStatus::only_a;
      only_a.dtype = std::string(h5::kind_name(d.kind));
      only_a.full_shape = d.shape;
      if (pb != d.path) only_a.note = "mapped to " + pb + ", which B lacks";
      r.datasets.push_back(only_a);
    }
  }
  for (const auto& d : list_b) {
    if (targets.count(d.path) || !selected(d.path)) continue;
    DatasetComparison only_b;
    only_b.path_b = d.path;
    only_b.status = CompareStatus::only_b;
    only_b.dtype = std::string(h5::kind_name(d.kind));
    only_b.full_shape = d.shape;
    r.datasets.push_back(only_b);
  }
  return r;
}

std::int64_t CompareReport::count(CompareStatus s) const {
  return std::count_if(datasets.begin(), datasets.end(), [s](const auto& d) { return d.status == s; });
}

int CompareReport::exit_code() const {
  for (const auto& d : datasets)
    if (bad_input(d.status)) return int(Exit::bad_input);
  if (count(CompareStatus::differs) + count(CompareStatus::shape_mismatch) > 0) return int(Exit::differs);
  if (count(CompareStatus::equal) == 0) return int(Exit::differs);
  if (strict && count(CompareStatus::only_a) + count(CompareStatus::only_b) > 0) return int(Exit::differs);
  if (std::any_of(datasets.begin(), datasets.end(), [](const auto& d) { return !d.unverified.empty(); }))
    return int(Exit::unverified);
  return int(Exit::ok);
}

std::vector<std::string> CompareReport::errors() const {
  std::vector<std::string> out;
  for (const auto& d : datasets)
    if (d.status == CompareStatus::corrupt || d.status == CompareStatus::unverifiable)
      out.push_back(d.note);  // names the file(s) and dataset itself
    else if (bad_input(d.status))
      out.push_back(file_a + ":" + d.path_a + " vs " + file_b + ":" + d.path_b + ": " +
                    std::string(status_name(d.status)) + ": " + d.note);
  return out;
}

std::string format_table(const CompareReport& r) {
  auto partial = [](const std::string& marker) { return marker.empty() ? "" : ", PARTIAL: " + marker; };
  // Names and notes come from the files (paths, dataset names, partial markers): each line is
  // kept one line, so that a newline in them cannot forge another.
  std::string out = one_line("A: " + r.file_a + " (" + r.format_a + partial(r.partial_a) + ")") + "\n";
  out += one_line("B: " + r.file_b + " (" + r.format_b + partial(r.partial_b) + "), the reference of rel_l2") + "\n";
  std::size_t width = 7;
  for (const auto& d : r.datasets) width = std::max(width, one_line(dataset_label(d)).size());
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-14s %21s %10s %8s %10s  %-*s  %s\n", "status", "differing/total", "sign_flips",
                "max_ulp", "rel_l2", int(width), "dataset", "first difference / note");
  out += buf;
  for (const auto& d : r.datasets) {
    std::string counts = "-", flips = "-", ulp = "-", rel = "-";
    const std::optional<Distance>& dist = d.distance;
    if (d.status == CompareStatus::equal || d.status == CompareStatus::differs) {
      counts = std::to_string(d.differing) + "/" + std::to_string(d.compared);
      if (dist) {
        flips = std::to_string(dist->sign_flips);
        ulp = dist->max_ulp_same_sign == kUlpNaN ? "nan" : std::to_string(dist->max_ulp_same_sign);
        std::snprintf(buf, sizeof buf, "%.3e", dist->rel_l2);
        rel = dist->rel_l2 == 0 ? "0" : buf;
      }
    }
    std::string detail;
    if (d.first)
      detail = "@" + std::to_string(d.first->flat_index) + " " + index_str(d.first->index) +
               ": A=" + d.first->a_value + " B=" + d.first->b_value;
    if (!d.note.empty()) detail += (detail.empty() ? "" : "; ") + d.note;
    std::snprintf(buf, sizeof buf, "%-14s %21s %10s %8s %10s  ", std::string(status_name(d.status)).c_str(),
                  counts.c_str(), flips.c_str(), ulp.c_str(), rel.c_str());
    std::string label = one_line(dataset_label(d));
    label.resize(std::max(label.size(), width), ' ');
    out += buf + label + "  " + one_line(detail);
    while (!out.empty() && out.back() == ' ') out.pop_back();
    out += "\n";
  }
  const auto n_equal = r.count(CompareStatus::equal), n_diff = r.count(CompareStatus::differs);
  const auto n_shape = r.count(CompareStatus::shape_mismatch);
  const auto n_bad = r.count(CompareStatus::dtype_mismatch) + r.count(CompareStatus::unsupported) +
                     r.count(CompareStatus::corrupt) + r.count(CompareStatus::unverifiable);
  // The shape count only when there is one, so that the usual line keeps its form.
  const std::string shape_part = n_shape ? ", " + std::to_string(n_shape) + " differ in shape" : "";
  std::snprintf(buf, sizeof buf,
                "summary: %" PRId64 " compared (%" PRId64 " bitwise equal, %" PRId64 " differ)%s, %" PRId64
                " not stored, %" PRId64 " only in A, %" PRId64 " only in B, %" PRId64 " bad -> exit %d\n",
                n_equal + n_diff, n_equal, n_diff, shape_part.c_str(), r.count(CompareStatus::not_stored),
                r.count(CompareStatus::only_a), r.count(CompareStatus::only_b), n_bad, r.exit_code());
  out += buf;
  if (n_bad == 0 && n_diff == 0 && n_shape == 0 && n_equal == 0)
    out += "nothing was compared: the files share no stored dataset (exit 1)\n";
  else if (n_bad == 0 && n_diff == 0 && n_shape == 0 && r.strict && r.count(CompareStatus::only_a) + r.count(CompareStatus::only_b) > 0)
    out += "not everything was compared: datasets in one file only (exit 1; --subset compares what both hold)\n";
  return out;
}

std::string format_json(const CompareReport& r) {
  using nlohmann::json;
  json j;
  j["file_a"] = r.file_a;
  j["file_b"] = r.file_b;
  j["format_a"] = r.format_a;
  j["format_b"] = r.format_b;
  j["partial_a"] = r.partial_a.empty() ? json(nullptr) : json(r.partial_a);
  j["partial_b"] = r.partial_b.empty() ? json(nullptr) : json(r.partial_b);
  j["strict"] = r.strict;
  j["datasets"] = json::array();
  for (const auto& d : r.datasets) {
    json e;
    e["path_a"] = d.path_a.empty() ? json(nullptr) : json(d.path_a);
    e["path_b"] = d.path_b.empty() ? json(nullptr) : json(d.path_b);
    e["status"] = status_name(d.status);
    e["dtype"] = d.dtype;
    e["full_shape"] = d.full_shape;
    e["compared"] = d.compared;
    e["differing"] = d.differing;
    const std::optional<Distance>& dist = d.distance;
    e["sign_flips"] = dist ? json(dist->sign_flips) : json(nullptr);
    e["max_ulp"] = !dist ? json(nullptr) : dist->max_ulp_same_sign == kUlpNaN ? json("nan") : json(dist->max_ulp_same_sign);
    // JSON has no NaN or Inf: a non-finite relative error is written as a string.
    e["rel_l2"] = !dist                          ? json(nullptr)
                  : std::isfinite(dist->rel_l2)  ? json(dist->rel_l2)
                  : std::isnan(dist->rel_l2)     ? json("nan")
                                                : json("inf");
    if (d.first)
      e["first_difference"] = {{"flat_index", d.first->flat_index},
                               {"index", d.first->index},
                               {"a", d.first->a_value},
                               {"b", d.first->b_value}};
    e["note"] = d.note;
    e["sha256_checked"] = {{"a", d.sha256_checked_a}, {"b", d.sha256_checked_b}};
    e["unverified"] = d.unverified.empty() ? json(nullptr) : json(d.unverified);
    j["datasets"].push_back(e);
  }
  j["summary"] = {{"equal", r.count(CompareStatus::equal)},
                  {"differs", r.count(CompareStatus::differs)},
                  {"shape_mismatch", r.count(CompareStatus::shape_mismatch)},
                  {"not_stored", r.count(CompareStatus::not_stored)},
                  {"only_a", r.count(CompareStatus::only_a)},
                  {"only_b", r.count(CompareStatus::only_b)},
                  {"bad", r.count(CompareStatus::dtype_mismatch) + r.count(CompareStatus::unsupported) +
                              r.count(CompareStatus::corrupt) + r.count(CompareStatus::unverifiable)}};
  j["exit_code"] = r.exit_code();
  return j.dump(2) + "\n";
}

}  // namespace psi::hdf5
