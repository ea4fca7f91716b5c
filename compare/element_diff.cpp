#include "compare/element_diff.h"

#include <algorithm>
#include <bit>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <span>
#include <type_traits>

#include "compare/by_value.h"
#include "compare/file_attrs.h"
#include "engine/bf16.h"
#include "engine/distance.h"
#include "engine/error.h"
#include "engine/sha256.h"

namespace psi::compare {

namespace {

// ---- element types -------------------------------------------------------------------------
// What the comparison needs of an element type beside the distance (engine/distance.h, floating
// types): its bits (equality is bitwise), its value (a double holds each exactly, bar an int64
// beyond 2^53: compare/by_value.h) and how a value is shown.

template <class T>
struct Elem;

template <>
struct Elem<Bf16> {
  static constexpr bool floating = true;
  static std::uint64_t bits(Bf16 v) { return v.bits; }
  static double value(Bf16 v) { return double(v.to_float()); }
  static std::string format(Bf16 v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g (0x%04x)", value(v), unsigned(v.bits));
    return buf;
  }
};

template <>
struct Elem<float> {
  static constexpr bool floating = true;
  static std::uint64_t bits(float v) { return std::bit_cast<std::uint32_t>(v); }
  static double value(float v) { return double(v); }
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
  static double value(double v) { return v; }
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
  static double value(I v) { return double(v); }
  static std::string format(I v) { return std::to_string(v); }
};
template <>
struct Elem<std::uint8_t> : IntElem<std::uint8_t> {};
template <>
struct Elem<std::uint16_t> : IntElem<std::uint16_t> {};
template <>
struct Elem<std::int64_t> : IntElem<std::int64_t> {};

// An element of kind `k` shown from its bits.
std::string format_bits(hdf5::ElemKind k, std::uint64_t bits) {
  switch (k) {
    case hdf5::ElemKind::bf16: return Elem<Bf16>::format(Bf16::from_bits(std::uint16_t(bits)));
    case hdf5::ElemKind::f32: return Elem<float>::format(std::bit_cast<float>(std::uint32_t(bits)));
    case hdf5::ElemKind::f64: return Elem<double>::format(std::bit_cast<double>(bits));
    case hdf5::ElemKind::u8: return Elem<std::uint8_t>::format(std::uint8_t(bits));
    case hdf5::ElemKind::u16: return Elem<std::uint16_t>::format(std::uint16_t(bits));
    case hdf5::ElemKind::i64: return Elem<std::int64_t>::format(std::int64_t(bits));
    case hdf5::ElemKind::other: break;
  }
  return "";
}

// What differs in two values whose elements differ (comparison.h DiffKind).
DiffKind kind_of(double x, double y) {
  const bool nan_x = std::isnan(x), nan_y = std::isnan(y);
  if (nan_x && nan_y) return DiffKind::nan_payload;
  if (nan_x || nan_y) return DiffKind::nan_vs_number;
  if (std::isinf(x) || std::isinf(y)) return DiffKind::inf;
  if (x == 0 && y == 0) return DiffKind::sign_of_zero;
  return DiffKind::value;
}

// ---- loading -------------------------------------------------------------------------------

template <class T>
std::vector<T> load(const hdf5::File& f, const Side& s) {
  const hdf5::DatasetInfo& di = s.info;
  // Every kind through hdf5::File's checked readers: their bounds on what a dataset may claim
  // (storage, compression ratio, this machine's memory) hold for integers too.
  if constexpr (std::is_same_v<T, Bf16>) return s.bf16_from_u16 ? f.read_bf16_bits(di.path).data : f.read_bf16(di.path).data;
  else if constexpr (std::is_same_v<T, float>) return f.read_f32(di.path).data;
  else if constexpr (std::is_same_v<T, double>) return f.read_f64(di.path).data;
  else if constexpr (std::is_same_v<T, std::uint8_t>) return f.read_u8(di.path);
  else if constexpr (std::is_same_v<T, std::uint16_t>) return f.read_u16(di.path);
  else return f.read_i64(di.path);
}

// Loads one side and checks it whole against its sha256_full; a mismatch is added to `corrupt`.
template <class T>
std::vector<T> load_checked(const hdf5::File& f, const Side& s, bool& checked, std::string& sha256, std::string& corrupt) {
  std::vector<T> v = load<T>(f, s);
  const hdf5::Sha256Check c = hdf5::check_sha256_full(f, s.info.path, v.data(), v.size() * sizeof(T));
  checked = c == hdf5::Sha256Check::match || c == hdf5::Sha256Check::mismatch;
  if (c == hdf5::Sha256Check::mismatch) corrupt += (corrupt.empty() ? "" : "; ") + hdf5::sha256_mismatch_message(f, s.info.path);
  // The hash of what was compared: the file's own where it matched, else computed here (a user's
  // file records none; a partial tensor's is of its stored rows).
  if (c == hdf5::Sha256Check::match) sha256 = hdf5::read_integrity(f, s.info.path).sha256_full;
  else if (c != hdf5::Sha256Check::mismatch) sha256 = sha256_hex(v.data(), v.size() * sizeof(T));
  return v;
}

// Data that is not what was written is not compared (it would mislead): the dataset is corrupt.
bool refused_as_corrupt(const std::string& corrupt, DatasetComparison& out) {
  if (corrupt.empty()) return false;
  out.status = CompareStatus::corrupt;
  out.note = corrupt;
  return true;
}

// A side read for --by-value: each element's exact value, and its bits to show it in its own
// type; `inexact` says which element no double holds, if one does not.
struct Exact {
  hdf5::ElemKind kind = hdf5::ElemKind::other;
  std::vector<double> value;
  std::vector<std::uint64_t> bits;
  std::string inexact;
};

template <class T>
Exact exact_of(const std::vector<T>& v, hdf5::ElemKind kind, const std::string& where) {
  Exact e{kind, std::vector<double>(v.size()), std::vector<std::uint64_t>(v.size()), ""};
  for (std::size_t i = 0; i < v.size(); ++i) {
    if constexpr (std::is_same_v<T, std::int64_t>)
      if (e.inexact.empty() && !exact_in_double(v[i]))
        e.inexact = where + ": element " + std::to_string(i) + " (" + std::to_string(v[i]) +
                    ") has no exact double value, so --by-value cannot compare it";
    e.value[i] = Elem<T>::value(v[i]);
    e.bits[i] = Elem<T>::bits(v[i]);
  }
  return e;
}

Exact load_exact(const hdf5::File& f, const Side& s, bool& checked, std::string& sha256, std::string& corrupt) {
  const std::string where = f.path().string() + ":" + s.info.path;
  switch (s.info.kind) {
    case hdf5::ElemKind::bf16: return exact_of(load_checked<Bf16>(f, s, checked, sha256, corrupt), s.info.kind, where);
    case hdf5::ElemKind::f32: return exact_of(load_checked<float>(f, s, checked, sha256, corrupt), s.info.kind, where);
    case hdf5::ElemKind::f64: return exact_of(load_checked<double>(f, s, checked, sha256, corrupt), s.info.kind, where);
    case hdf5::ElemKind::u8: return exact_of(load_checked<std::uint8_t>(f, s, checked, sha256, corrupt), s.info.kind, where);
    case hdf5::ElemKind::u16: return exact_of(load_checked<std::uint16_t>(f, s, checked, sha256, corrupt), s.info.kind, where);
    case hdf5::ElemKind::i64: return exact_of(load_checked<std::int64_t>(f, s, checked, sha256, corrupt), s.info.kind, where);
    case hdf5::ElemKind::other: break;
  }
  return {};
}

// ---- walking a box -------------------------------------------------------------------------

std::vector<std::int64_t> strides_of(const Shape& s) {
  std::vector<std::int64_t> st(s.size(), 1);
  for (std::size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

// Calls row(idx, off_a, off_b, n) for each row of the last axis of box [lo, hi) (full-tensor
// coordinates), in row-major order: idx is its first element's index, off_a and off_b where it
// starts in each side's stored data, n its length.
template <class F>
void for_each_row(const Side& sa, const Side& sb, const Shape& lo, const Shape& hi, F&& row) {
  const std::size_t rank = lo.size();
  const auto st_a = strides_of(sa.info.shape), st_b = strides_of(sb.info.shape);
  Shape idx = lo;
  while (true) {
    std::int64_t off_a = 0, off_b = 0;
    for (std::size_t i = 0; i < rank; ++i) {
      off_a += (idx[i] - sa.lo[i]) * st_a[i];
      off_b += (idx[i] - sb.lo[i]) * st_b[i];
    }
    row(idx, off_a, off_b, hi[rank - 1] - lo[rank - 1]);
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
}

// What a walk collects into `out` beside the distance: the differing elements counted by kind,
// the first of them and the first `list`, the non-finite pairs.
class Tally {
 public:
  Tally(const Side& sa, std::int64_t list, DatasetComparison& out)
      : st_full_(strides_of(sa.full)), list_(list), out_(out) {
    out_.kinds.emplace();
  }
  void non_finite(bool matched) {
    ++out_.non_finite.pairs;
    out_.non_finite.matched += matched;
  }
  void differ(DiffKind k) {
    ++out_.differing;
    out_.kinds->count(k);
  }
  bool wants_element() const { return !out_.first || std::int64_t(out_.differences.size()) < list_; }
  // Element j of the row that starts at full-tensor index `row`.
  void note(const Shape& row, std::int64_t j, ElementDifference fd) {
    fd.index = row;
    fd.index.back() += j;
    for (std::size_t i = 0; i < fd.index.size(); ++i) fd.flat_index += fd.index[i] * st_full_[i];
    if (!out_.first) out_.first = fd;
    if (std::int64_t(out_.differences.size()) < list_) out_.differences.push_back(std::move(fd));
  }

 private:
  std::vector<std::int64_t> st_full_;
  std::int64_t list_;
  DatasetComparison& out_;
};

// Adds pairs [from, to) of a row to the distance: only runs of pairs of two finite elements are
// added, in order, so the sums are those of the finite pairs in row-major order.
template <class Sum, class T>
void add_run(Sum& sum, const T* a, const T* b, std::int64_t from, std::int64_t to) {
  if (to > from)
    sum.add(std::span<const T>(a + from, std::size_t(to - from)), std::span<const T>(b + from, std::size_t(to - from)));
}

// Compares two sides of one element type bitwise: floating types also through the one distance
// (engine/distance.h) over their finite pairs.
template <class T>
void compare_box(const std::vector<T>& a, const Side& sa, const std::vector<T>& b, const Side& sb,
                 const Shape& lo, const Shape& hi, std::int64_t list, DatasetComparison& out) {
  using E = Elem<T>;
  Tally tally(sa, list, out);
  [[maybe_unused]] std::conditional_t<E::floating, DistanceSum<T, T>, char> sum{};
  for_each_row(sa, sb, lo, hi, [&](const Shape& idx, std::int64_t off_a, std::int64_t off_b, std::int64_t n) {
    const T* ra = a.data() + off_a;
    const T* rb = b.data() + off_b;
    std::int64_t run = 0;  // where the current run of finite pairs starts
    for (std::int64_t j = 0; j < n; ++j) {
      const T x = ra[j], y = rb[j];
      const bool same = E::bits(x) == E::bits(y);
      if constexpr (E::floating) {
        if (!std::isfinite(E::value(x)) || !std::isfinite(E::value(y))) {
          add_run(sum, ra, rb, run, j);
          run = j + 1;
          tally.non_finite(same);
        }
      }
      if (same) continue;
      const DiffKind kind = E::floating ? kind_of(E::value(x), E::value(y)) : DiffKind::value;
      tally.differ(kind);
      if (!tally.wants_element()) continue;
      ElementDifference fd;
      fd.a_value = E::format(x);
      fd.b_value = E::format(y);
      fd.kind = kind;
      if constexpr (E::floating) {
        fd.sign_flip = is_sign_flip(x, y);
        if (!fd.sign_flip) fd.ulp = ulps_apart(x, y);
      }
      tally.note(idx, j, std::move(fd));
    }
    if constexpr (E::floating) add_run(sum, ra, rb, run, n);
    out.compared += n;
  });
  if constexpr (E::floating) out.distance = sum.result();
}

// Compares two sides of different element types by value (compare/by_value.h): the distance's
// counts and relative L2 over the finite pairs' exact values, its ULPs in `unit`.
void compare_box_by_value(const Exact& a, const Side& sa, const Exact& b, const Side& sb, const Shape& lo,
                          const Shape& hi, UlpUnit unit, std::int64_t list, DatasetComparison& out) {
  Tally tally(sa, list, out);
  DistanceSum<double, double> sum;
  std::int64_t max_ulp = 0;
  for_each_row(sa, sb, lo, hi, [&](const Shape& idx, std::int64_t off_a, std::int64_t off_b, std::int64_t n) {
    const double* ra = a.value.data() + off_a;
    const double* rb = b.value.data() + off_b;
    std::int64_t run = 0;
    for (std::int64_t j = 0; j < n; ++j) {
      const double x = ra[j], y = rb[j];
      const bool same = equal_by_value(x, y), finite = std::isfinite(x) && std::isfinite(y);
      if (!finite) {
        add_run(sum, ra, rb, run, j);
        run = j + 1;
        tally.non_finite(same);
      }
      if (same) continue;
      const DiffKind kind = kind_of(x, y);
      tally.differ(kind);
      const bool flip = is_sign_flip(x, y);
      const std::int64_t ulp = flip ? 0 : ulps_in(unit, x, y);
      if (finite) max_ulp = std::max(max_ulp, ulp);
      if (!tally.wants_element()) continue;
      ElementDifference fd;
      fd.a_value = format_bits(a.kind, a.bits[std::size_t(off_a + j)]);
      fd.b_value = format_bits(b.kind, b.bits[std::size_t(off_b + j)]);
      fd.kind = kind;
      fd.sign_flip = flip;
      if (!flip) fd.ulp = ulp;
      tally.note(idx, j, std::move(fd));
    }
    add_run(sum, ra, rb, run, n);
    out.compared += n;
  });
  out.distance = sum.result();
  out.distance->max_ulp_same_sign = max_ulp;
}

template <class T>
void load_and_compare(const hdf5::File& fa, const Side& sa, const hdf5::File& fb, const Side& sb,
                      const Shape& lo, const Shape& hi, std::int64_t list, DatasetComparison& out) {
  std::string corrupt;
  const std::vector<T> a = load_checked<T>(fa, sa, out.sha256_checked_a, out.sha256_a, corrupt);
  const std::vector<T> b = load_checked<T>(fb, sb, out.sha256_checked_b, out.sha256_b, corrupt);
  if (refused_as_corrupt(corrupt, out)) return;
  compare_box(a, sa, b, sb, lo, hi, list, out);
  out.status = out.differing == 0 ? CompareStatus::equal : CompareStatus::differs;
}

// --as bf16 on two float32 tensors: when every value of both is a BF16 value (its 16 low bits
// zero: a .float() copy of BF16 states), they compare as BF16, so one BF16 step is 1 ULP, not
// 65536; otherwise as float32, and the note names the first value that is not one.
void load_and_compare_f32_as_bf16(const hdf5::File& fa, const Side& sa, const hdf5::File& fb, const Side& sb,
                                  const Shape& lo, const Shape& hi, std::int64_t list, DatasetComparison& out) {
  std::string corrupt;
  const std::vector<float> a = load_checked<float>(fa, sa, out.sha256_checked_a, out.sha256_a, corrupt);
  const std::vector<float> b = load_checked<float>(fb, sb, out.sha256_checked_b, out.sha256_b, corrupt);
  if (refused_as_corrupt(corrupt, out)) return;
  std::string not_bf16;
  auto narrowed = [&](const std::vector<float>& v, const hdf5::File& f, const Side& s) {
    std::vector<Bf16> r(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
      const std::uint32_t u = std::bit_cast<std::uint32_t>(v[i]);
      if ((u & 0xffffu) != 0) {
        char bits[16];
        std::snprintf(bits, sizeof bits, "0x%08x", u);
        not_bf16 = f.path().string() + ":" + s.info.path + " element " + std::to_string(i) + " (" + bits + ")";
        return std::vector<Bf16>();
      }
      r[i] = Bf16::from_bits(std::uint16_t(u >> 16));
    }
    return r;
  };
  const std::vector<Bf16> a16 = narrowed(a, fa, sa);
  const std::vector<Bf16> b16 = not_bf16.empty() ? narrowed(b, fb, sb) : std::vector<Bf16>();
  std::string note;
  if (not_bf16.empty()) {
    compare_box(a16, sa, b16, sb, lo, hi, list, out);
    note = "float32 holding BF16 values, compared as BF16 (--as bf16)";
  } else {
    compare_box(a, sa, b, sb, lo, hi, list, out);
    note = "--as bf16: " + not_bf16 + " is not a BF16 value, so compared as float32";
  }
  out.note = out.note.empty() ? note : out.note + "; " + note;
  out.status = out.differing == 0 ? CompareStatus::equal : CompareStatus::differs;
}

void load_and_compare_by_value(const hdf5::File& fa, const Side& sa, const hdf5::File& fb, const Side& sb,
                               const Shape& lo, const Shape& hi, std::int64_t list, DatasetComparison& out) {
  std::string corrupt;
  const Exact a = load_exact(fa, sa, out.sha256_checked_a, out.sha256_a, corrupt);
  const Exact b = load_exact(fb, sb, out.sha256_checked_b, out.sha256_b, corrupt);
  if (refused_as_corrupt(corrupt, out)) return;
  for (const Exact* e : {&a, &b})
    if (!e->inexact.empty()) {
      out.status = CompareStatus::unsupported;
      out.note = e->inexact;
      return;
    }
  const UlpUnit unit = coarser_unit(sa.info.kind, sb.info.kind);
  out.by_value_dtype_b = std::string(hdf5::kind_name(sb.info.kind));
  out.by_value_ulp_unit = std::string(unit_name(unit));
  compare_box_by_value(a, sa, b, sb, lo, hi, unit, list, out);
  out.status = out.differing == 0 ? CompareStatus::equal : CompareStatus::differs;
}

}  // namespace

Side describe(const hdf5::File& f, const hdf5::DatasetInfo& di) {
  const std::string where = f.path().string() + ":" + di.path;
  Side s;
  s.info = di;
  std::string fs = string_attr(f, di.path, hdf5::attr::full_shape);
  s.full = fs.empty() ? di.shape : hdf5::parse_shape_json(fs, where);
  s.region = hdf5::parse_stored(hdf5::read_integrity(f, di.path).stored, where);
  if (s.region.kind == hdf5::StoredRegion::Kind::none) return s;
  if (s.region.kind == hdf5::StoredRegion::Kind::rows &&
      (s.region.axis >= int(s.full.size()) || s.region.last >= s.full[s.region.axis]))
    throw Error(where + ": stored='" + hdf5::stored_name(s.region) + "' lies outside full_shape " + shape_str(s.full));
  if (hdf5::stored_shape(s.full, s.region) != di.shape)
    throw Error(where + ": stored shape " + shape_str(di.shape) + " does not match stored='" +
                hdf5::stored_name(s.region) + "' of full_shape " + shape_str(s.full));
  s.lo.assign(s.full.size(), 0);
  s.hi = s.full;
  if (s.region.kind == hdf5::StoredRegion::Kind::rows) {
    s.lo[s.region.axis] = s.region.first;
    s.hi[s.region.axis] = s.region.last + 1;
  }
  return s;
}

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

void compare_elements(const hdf5::File& fa, const Side& sa, const hdf5::File& fb, const Side& sb, const Shape& lo,
                      const Shape& hi, std::int64_t list, DatasetComparison& out) {
  if (sa.info.kind != sb.info.kind) return load_and_compare_by_value(fa, sa, fb, sb, lo, hi, list, out);
  switch (sa.info.kind) {
    case hdf5::ElemKind::bf16: load_and_compare<Bf16>(fa, sa, fb, sb, lo, hi, list, out); break;
    case hdf5::ElemKind::f32:
      if (sa.f32_as_bf16) load_and_compare_f32_as_bf16(fa, sa, fb, sb, lo, hi, list, out);
      else load_and_compare<float>(fa, sa, fb, sb, lo, hi, list, out);
      break;
    case hdf5::ElemKind::f64: load_and_compare<double>(fa, sa, fb, sb, lo, hi, list, out); break;
    case hdf5::ElemKind::u8: load_and_compare<std::uint8_t>(fa, sa, fb, sb, lo, hi, list, out); break;
    case hdf5::ElemKind::u16: load_and_compare<std::uint16_t>(fa, sa, fb, sb, lo, hi, list, out); break;
    case hdf5::ElemKind::i64: load_and_compare<std::int64_t>(fa, sa, fb, sb, lo, hi, list, out); break;
    case hdf5::ElemKind::other: break;
  }
}

}  // namespace psi::compare
