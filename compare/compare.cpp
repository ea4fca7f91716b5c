#include "compare/compare.h"

#include <algorithm>
#include <memory>
#include <set>

#include <re2/re2.h>

#include "compare/by_value.h"
#include "compare/element_diff.h"
#include "compare/file_attrs.h"
#include "compare/json_diff.h"
#include "engine/error.h"
#include "hdf5/schema.h"
#include "hdf5/state_file.h"
#include "hdf5/tensor_file.h"
#include "hdf5/unverified.h"

namespace psi::compare {

namespace {

// psi files and the recordings hash every tensor they hold: one without sha256_full was edited
// (hdf5/unverified.h refuses it, or records it under --allow-unverified); a plain HDF5 file
// records no hashes, and its data is compared as it is. Returns why, or empty.
std::string unverified_tensor(const hdf5::File& f, const hdf5::DatasetInfo& di, const char* side) {
  const std::string format = file_format(f);
  if ((format != hdf5::kSchema && format != hdf5::kRecordingFormat) || hdf5::is_text_dataset(f, di)) return "";
  const std::string why = hdf5::unverifiable_reason(hdf5::read_integrity(f, di.path));
  if (why.empty()) return "";
  hdf5::unverifiable(f.path().string() + ":" + di.path, why);
  return std::string(side) + ": " + why;
}

std::string kind_label(const hdf5::DatasetInfo& di) {
  std::string k(hdf5::kind_name(di.kind));
  if (di.kind == hdf5::ElemKind::u16) k += " (no dtype='bfloat16' attribute; --as bf16 reads it as BF16)";
  return k;
}

bool bad_input(CompareStatus s) {
  return s == CompareStatus::dtype_mismatch || s == CompareStatus::unsupported || s == CompareStatus::corrupt ||
         s == CompareStatus::unverifiable;
}

}  // namespace



DatasetComparison compare_datasets(const hdf5::File& a, const std::string& path_a, const hdf5::File& b,
                                   const std::string& path_b, const CompareOptions& opt) {
  DatasetComparison out;
  out.path_a = path_a;
  out.path_b = path_b;
  hdf5::DatasetInfo ia = a.info(path_a), ib = b.info(path_b);
  bool u16_as_bf16[2] = {false, false};
  if (opt.as_bf16)
    for (int side = 0; side < 2; ++side) {
      hdf5::DatasetInfo& i = side ? ib : ia;
      if (i.kind == hdf5::ElemKind::u16) {
        i.kind = hdf5::ElemKind::bf16;
        u16_as_bf16[side] = true;
      }
    }
  out.dtype = std::string(hdf5::kind_name(ia.kind));
  if (ia.kind == hdf5::ElemKind::other || ib.kind == hdf5::ElemKind::other) {
    out.status = CompareStatus::unsupported;
    out.note = "element type not supported (psi compares bfloat16, float32, float64, uint8, uint16, int64)";
    return out;
  }
  // Text is read as JSON only where both sides declare it: other bytes compare as bytes.
  if (hdf5::is_json_text(a, ia) && hdf5::is_json_text(b, ib)) {
    try {
      compare_json_text(a, path_a, b, path_b, opt, out);
      out.full_shape = ia.shape;
      return out;
    } catch (const Error& e) {
      out.status = CompareStatus::unsupported;
      out.note = e.what();
      return out;
    }
  }
  const std::string dtypes = kind_label(ia) + " in A vs " + kind_label(ib) + " in B";
  if (ia.kind != ib.kind && !opt.by_value) {
    out.status = CompareStatus::dtype_mismatch;
    out.note = "dtype " + dtypes + " (--by-value compares them by value)";
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
  sa.bf16_from_u16 = u16_as_bf16[0];
  sb.bf16_from_u16 = u16_as_bf16[1];
  sa.f32_as_bf16 = sb.f32_as_bf16 = opt.as_bf16 && ia.kind == hdf5::ElemKind::f32 && ib.kind == hdf5::ElemKind::f32;
  if (u16_as_bf16[0] || u16_as_bf16[1])
    out.note = std::string(u16_as_bf16[0] && u16_as_bf16[1] ? "A's and B's" : u16_as_bf16[0] ? "A's" : "B's") +
               " uint16 read as BF16 (--as bf16)";
  out.full_shape = sa.full;
  try {
    for (const std::string& u : {unverified_tensor(a, ia, "A"), unverified_tensor(b, ib, "B")})
      if (!u.empty()) out.unverified += (out.unverified.empty() ? "" : "; ") + u;
  } catch (const Error& e) {
    out.status = CompareStatus::unverifiable;
    out.note = e.what();
    return out;
  }
  if (!out.unverified.empty())
    out.note = "UNVERIFIED (" + out.unverified + ")" + (out.note.empty() ? "" : "; " + out.note);
  if (sa.full != sb.full) {
    out.status = CompareStatus::shape_mismatch;
    out.note = "shape " + shape_str(sa.full) + " in A vs " + shape_str(sb.full) + " in B";
    return out;
  }
  auto none = hdf5::StoredRegion::Kind::none;
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
  const bool partial = sa.region.kind != hdf5::StoredRegion::Kind::full || sb.region.kind != hdf5::StoredRegion::Kind::full;
  const std::string regions = "A stores " + hdf5::stored_name(sa.region) + ", B stores " + hdf5::stored_name(sb.region);
  if (empty) {
    out.status = CompareStatus::not_stored;
    out.note = numel(sa.full) == 0 ? "empty tensor" : "no element stored in both (" + regions + ")";
    return out;
  }
  if (partial && (lo != Shape(lo.size(), 0) || hi != sa.full))
    out.note += std::string(out.note.empty() ? "" : "; ") + "compared the stored " + describe_box(lo, hi, sa.full) + " (" + regions + ")";
  if (ia.kind != ib.kind)
    out.note += std::string(out.note.empty() ? "" : "; ") + "compared by value (--by-value): " + dtypes + ", ULPs of " +
                std::string(unit_name(coarser_unit(ia.kind, ib.kind)));
  compare_elements(a, sa, b, sb, lo, hi, opt.differences, out);
  // Equal stored elements say nothing of the rows a side leaves out: where both whole tensors'
  // hashes are known (sha256_full, or the hash of a side stored whole) and differ, the tensors
  // are not equal, whatever the stored rows say.
  if (out.status == CompareStatus::equal && partial && ia.kind == ib.kind) {
    const auto whole = [](const hdf5::File& f, const Side& s, const std::string& computed) {
      return s.region.kind == hdf5::StoredRegion::Kind::full ? computed : hdf5::read_integrity(f, s.info.path).sha256_full;
    };
    const std::string ha = whole(a, sa, out.sha256_a), hb = whole(b, sb, out.sha256_b);
    if (!ha.empty() && !hb.empty() && ha != hb) {
      out.status = CompareStatus::differs;
      out.note += std::string(out.note.empty() ? "" : "; ") + "the stored elements are equal but the whole tensors differ: sha256_full A " +
                  ha + ", B " + hb;
    }
  }
  return out;
}

CompareReport compare_files(const std::filesystem::path& a, const std::filesystem::path& b,
                            const CompareOptions& opt) {
  const hdf5::File fa = hdf5::open_tensor_file(a), fb = hdf5::open_tensor_file(b);
  return compare_opened(fa, fb, opt);
}

CompareReport compare_opened(const hdf5::File& fa, const hdf5::File& fb, const CompareOptions& opt) {
  CompareReport r;
  r.file_a = fa.path().string();
  r.file_b = fb.path().string();
  r.format_a = file_format(fa);
  r.format_b = file_format(fb);
  r.partial_a = hdf5::partial_marker(fa);
  r.partial_b = hdf5::partial_marker(fb);
  auto refuse_partial = [&](const std::string& file, const std::string& marker) {
    if (!marker.empty() && !opt.allow_partial)
      throw Error(file + ": a partial file (" + marker + "); psi compare refuses it unless --allow-partial is given");
  };
  refuse_partial(r.file_a, r.partial_a);
  refuse_partial(r.file_b, r.partial_b);
  r.strict = opt.strict || (!opt.subset && opt.only.empty() && opt.map.empty());
  r.differences = opt.differences;
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
  const auto list_a = fa.list_datasets(), list_b = fb.list_datasets();
  // A file of one unnamed array (.npy) pairs its array with the other side's one tensor, whatever
  // the two are called, unless the user maps names.
  std::vector<PathMap> maps = opt.map;
  if (maps.empty() && (hdf5::single_array_file(fa) || hdf5::single_array_file(fb)) && list_a.size() == 1 &&
      list_b.size() == 1)
    maps.push_back({list_a[0].path, list_b[0].path});
  auto mapped = [&](const std::string& p) {
    for (const auto& m : maps)
      if (auto b = map_path(m, p)) return *b;
    return p;
  };
  std::set<std::string> in_b, targets;
  for (const auto& d : list_b) in_b.insert(d.path);
  for (const auto& d : list_a) {
    const std::string pb = mapped(d.path);
    targets.insert(pb);
    if (!selected(d.path)) continue;
    if (in_b.count(pb)) {
      r.datasets.push_back(compare_datasets(fa, d.path, fb, pb, opt));
    } else {
      DatasetComparison only_a;
      only_a.path_a = d.path;
      only_a.status = CompareStatus::only_a;
      only_a.dtype = std::string(hdf5::kind_name(d.kind));
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
    only_b.dtype = std::string(hdf5::kind_name(d.kind));
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
  if (count(CompareStatus::equal) + count(CompareStatus::equal_as_json) == 0) return int(Exit::differs);
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

}  // namespace psi::compare
