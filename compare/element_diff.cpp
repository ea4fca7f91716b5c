#include "compare/element_diff.h"

#include <algorithm>
#include <bit>
#include <cinttypes>
#include <cstdio>
#include <span>
#include <type_traits>

#include "compare/file_attrs.h"
#include "engine/bf16.h"
#include "engine/distance.h"
#include "engine/error.h"

namespace psi::compare {

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

// Integer datasets hdf5::File has no typed reader for (uint16 without dtype='bfloat16', int64).
template <class T>
std::vector<T> read_native(const hdf5::File& f, const std::string& path, hid_t mem_type, std::int64_t n) {
  std::vector<T> out(static_cast<std::size_t>(n));
  if (n == 0) return out;
  hdf5::Handle d(H5Dopen2(f.id(), path.c_str(), H5P_DEFAULT), H5Dclose);
  if (!d || H5Dread(d.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) < 0)
    throw Error(f.path().string() + ":" + path + ": read failed (truncated or corrupt file?)");
  return out;
}

template <class T>
std::vector<T> load(const hdf5::File& f, const Side& s) {
  const hdf5::DatasetInfo& di = s.info;
  if constexpr (std::is_same_v<T, Bf16>) {
    if (!s.bf16_from_u16) return f.read_bf16(di.path).data;
    const std::vector<std::uint16_t> bits = read_native<std::uint16_t>(f, di.path, H5T_NATIVE_UINT16, numel(di.shape));
    std::vector<Bf16> out(bits.size());
    std::transform(bits.begin(), bits.end(), out.begin(), Bf16::from_bits);
    return out;
  }
  else if constexpr (std::is_same_v<T, float>) return f.read_f32(di.path).data;
  else if constexpr (std::is_same_v<T, double>) return f.read_f64(di.path).data;
  else if constexpr (std::is_same_v<T, std::uint8_t>) return f.read_u8(di.path);
  else if constexpr (std::is_same_v<T, std::uint16_t>) return read_native<T>(f, di.path, H5T_NATIVE_UINT16, numel(di.shape));
  else return read_native<T>(f, di.path, H5T_NATIVE_INT64, numel(di.shape));
}

std::vector<std::int64_t> strides_of(const Shape& s) {
  std::vector<std::int64_t> st(s.size(), 1);
  for (std::size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

// Compares the elements of box [lo, hi) (full-tensor coordinates) in row-major order, a row of
// the last axis at a time: floating types through the one distance (engine/distance.h), whose
// sums run in that order; other types by their bits. The first difference, and the first `list`
// into out.differences.
template <class T>
void compare_box(const std::vector<T>& a, const Side& sa, const std::vector<T>& b, const Side& sb,
                 const Shape& lo, const Shape& hi, std::int64_t list, DatasetComparison& out) {
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
    // Floating types count in the distance: the scan stops once nothing more is to be noted.
    for (std::int64_t j = 0;
         j < inner && !(E::floating && out.first && std::int64_t(out.differences.size()) >= list); ++j) {
      const T x = a[off_a + j], y = b[off_b + j];
      if (E::bits(x) == E::bits(y)) continue;
      if constexpr (!E::floating) ++out.differing;
      if (out.first && std::int64_t(out.differences.size()) >= list) continue;
      ElementDifference fd;
      fd.index = idx;
      fd.index[rank - 1] += j;
      for (std::size_t i = 0; i < rank; ++i) fd.flat_index += fd.index[i] * st_full[i];
      fd.a_value = E::format(x);
      fd.b_value = E::format(y);
      if constexpr (E::floating) {
        fd.sign_flip = is_sign_flip(x, y);
        if (!fd.sign_flip) fd.ulp = ulps_apart(x, y);
      }
      if (!out.first) out.first = fd;
      if (std::int64_t(out.differences.size()) < list) out.differences.push_back(fd);
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
void load_and_compare(const hdf5::File& fa, const Side& sa, const hdf5::File& fb, const Side& sb,
                      const Shape& lo, const Shape& hi, std::int64_t list, DatasetComparison& out) {
  const std::vector<T> a = load<T>(fa, sa), b = load<T>(fb, sb);
  std::string corrupt;
  auto check = [&](const hdf5::File& f, const std::string& path, const std::vector<T>& v, bool& checked) {
    const hdf5::Sha256Check c = hdf5::check_sha256_full(f, path, v.data(), v.size() * sizeof(T));
    checked = c == hdf5::Sha256Check::match || c == hdf5::Sha256Check::mismatch;
    if (c == hdf5::Sha256Check::mismatch) corrupt += (corrupt.empty() ? "" : "; ") + hdf5::sha256_mismatch_message(f, path);
  };
  check(fa, sa.info.path, a, out.sha256_checked_a);
  check(fb, sb.info.path, b, out.sha256_checked_b);
  if (!corrupt.empty()) {
    out.status = CompareStatus::corrupt;
    out.note = corrupt;
    return;
  }
  compare_box(a, sa, b, sb, lo, hi, list, out);
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
  switch (sa.info.kind) {
    case hdf5::ElemKind::bf16: load_and_compare<Bf16>(fa, sa, fb, sb, lo, hi, list, out); break;
    case hdf5::ElemKind::f32: load_and_compare<float>(fa, sa, fb, sb, lo, hi, list, out); break;
    case hdf5::ElemKind::f64: load_and_compare<double>(fa, sa, fb, sb, lo, hi, list, out); break;
    case hdf5::ElemKind::u8: load_and_compare<std::uint8_t>(fa, sa, fb, sb, lo, hi, list, out); break;
    case hdf5::ElemKind::u16: load_and_compare<std::uint16_t>(fa, sa, fb, sb, lo, hi, list, out); break;
    case hdf5::ElemKind::i64: load_and_compare<std::int64_t>(fa, sa, fb, sb, lo, hi, list, out); break;
    case hdf5::ElemKind::other: break;
  }
}

}  // namespace psi::compare
