#include "hdf5/verify.h"

#include <cmath>
#include <variant>

#include "engine/bf16.h"
#include "engine/interrupt.h"
#include "hdf5/h5.h"
#include "hdf5/schema.h"
#include "hdf5/state_file.h"
#include "hdf5/unverified.h"

namespace psi::hdf5 {

namespace {

template <class T>
std::int64_t count_nonfinite(const std::vector<T>& v) {
  std::int64_t n = 0;
  for (const T& x : v) {
    if constexpr (std::is_same_v<T, Bf16>) n += !x.is_finite();
    else n += !std::isfinite(x);
  }
  return n;
}

}  // namespace

VerifyReport verify_file(const std::filesystem::path& file) {
  VerifyReport r;
  r.file = file;
  const hdf5::File f = hdf5::File::open_read(file);
  const auto schema = f.attr("/", "schema");
  const auto* schema_text = schema ? std::get_if<std::string>(&*schema) : nullptr;
  if (!schema_text) {
    r.format = "a recording or another HDF5 file (no psi schema)";
  } else {
    r.format = *schema_text;
    if (schema_text->starts_with("psi-h5/") && *schema_text != "psi-h5/1")
      r.problems.push_back(file.string() + ": schema " + *schema_text + "; this psi reads psi-h5/1");
    const std::string partial = partial_marker(f);
    if (!partial.empty()) r.problems.push_back(file.string() + ": a partial file (" + partial + ")");
  }
  for (const hdf5::DatasetInfo& di : f.list_datasets()) {
    check_interrupt("psi verify " + file.string());
    const Integrity in = read_integrity(f, di.path);
    const std::string where = file.string() + ":" + di.path;
    if (const std::string p = dtype_label_problem(di); !p.empty()) r.problems.push_back(where + ": " + p);
    // Only a tensor stored whole is hashed: rows beyond the range `stored` names would go unchecked.
    if (in.stored != "full" && in.stored != "none") {
      const StoredRegion region = parse_stored(in.stored, where);
      if (std::size_t(region.axis) >= di.shape.size() || di.shape[std::size_t(region.axis)] != region.last - region.first + 1)
        r.problems.push_back(where + ": its stored attribute says '" + in.stored + "' but it holds " + shape_str(di.shape) +
                             "; data it does not describe would go unchecked");
    }
    if (const std::string why = unverifiable_reason(in); !why.empty() && di.kind != hdf5::ElemKind::other && !is_text_dataset(f, di)) {
      if (unverified_allowed()) {
        unverifiable(where, why);
        r.notes.push_back("UNVERIFIED: " + where + ": " + why);
      } else {
        ++r.unverifiable;
        r.problems.push_back(where + ": " + why);
      }
    }
    std::vector<std::uint8_t> bytes;
    std::int64_t nonfinite = -1;  // -1: not a float dataset
    const auto take_float = [&](const auto& t) {
      nonfinite = count_nonfinite(t.data);
      const auto* p = reinterpret_cast<const std::uint8_t*>(t.ptr());
      bytes.assign(p, p + t.bytes());
    };
    const auto take_bytes = [&](const auto& v) {
      const auto* p = reinterpret_cast<const std::uint8_t*>(v.data());
      bytes.assign(p, p + v.size() * sizeof(v[0]));
    };
    switch (di.kind) {
      case hdf5::ElemKind::bf16: take_float(f.read_bf16(di.path)); break;
      case hdf5::ElemKind::f32: take_float(f.read_f32(di.path)); break;
      case hdf5::ElemKind::f64: take_float(f.read_f64(di.path)); break;
      case hdf5::ElemKind::u8: bytes = f.read_u8(di.path); break;
      case hdf5::ElemKind::u16: take_bytes(f.read_u16(di.path)); break;
      case hdf5::ElemKind::i64: take_bytes(f.read_i64(di.path)); break;
      default:
        ++r.unchecked;
        r.notes.push_back(where + ": " + std::string(hdf5::kind_name(di.kind)) + " data, not read (psi reads no such data)");
        continue;
    }
    ++r.datasets;
    if (!in.sha256_full.empty() && in.stored == "full") {
      ++r.hashes_checked;
      if (check_sha256_full(f, di.path, bytes.data(), bytes.size()) == Sha256Check::mismatch)
        r.problems.push_back(sha256_mismatch_message(f, di.path));
    }
    if (nonfinite < 0) continue;
    r.nonfinite += nonfinite;
    const auto recorded = f.attr(di.path, attr::nonfinite_count);
    if (recorded && in.stored == "full") {
      const auto* i = std::get_if<std::int64_t>(&*recorded);
      if (!i || *i != nonfinite)
        r.problems.push_back(where + ": " + std::to_string(nonfinite) + " non-finite elements, its nonfinite_count says " +
                             (i ? std::to_string(*i) : std::string("something that is not a whole number")));
    }
  }
  return r;
}

}  // namespace psi::hdf5
