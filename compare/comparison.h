#pragma once
// What psi compare decides about one dataset (DatasetComparison) and the options it decides under
// (CompareOptions): the vocabulary that compare.cpp's walk of two files, element_diff.h and
// json_diff.h share, apart from the walk so that those two do not include the file that calls them.
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compare/path_map.h"
#include "engine/distance.h"
#include "engine/tensor.h"

namespace psi::compare {

inline constexpr std::size_t kMaxOnlyPattern = 4096;

struct CompareOptions {
  // Regular expression (RE2 syntax: no backreferences or lookaround; matched in time linear in
  // the path whatever the pattern) searched anywhere in the dataset path ("/group/name"; anchor
  // with ^ and $); empty: every dataset. It is matched against A's path (B's for datasets only
  // in B). At most kMaxOnlyPattern characters.
  std::string only;
  std::vector<PathMap> map;  // first matching prefix wins
  // Datasets present in only one file count as differences unless the user asked for a subset
  // (`subset`, `only` or `map`); `strict` makes them count even then.
  bool strict = false;
  bool subset = false;
  // A partial file (root attribute `partial`: an interrupted run) is refused unless this is set;
  // then the report says which side is partial.
  bool allow_partial = false;
  // Text datasets holding JSON (a report's cases, tables and options) are compared field by
  // field. The fields that measure time differ from run to run and are listed as not compared
  // unless this is set; a field is one when both files declare it: a key named in the dataset's
  // attribute `time_fields` (a JSON list; a report's cases carry it), a cell of a column named in
  // a table's `time_columns` (report/table.h). Nothing is taken for a time by its name.
  // Likewise the keys both files name in a text's attribute `provenance_fields` say where an
  // input or output lay (a report's case `file`, a table's `provenance` lines): their
  // differences are shown, never counted, so the same run reached by other paths compares equal.
  bool timing = false;
  // uint16 datasets without psi's dtype='bfloat16' attribute (NumPy and h5py have no BF16, so a
  // user keeps its bits so) are read as BF16 (`--as bf16`); otherwise they compare as integers.
  // With it, two float32 tensors whose every value is a BF16 value compare as BF16 as well.
  bool as_bf16 = false;
  // How many differing elements of each dataset to list (`--differences N`; kEveryDifference:
  // all of them); 0 lists none, only the first difference of the one-line view.
  std::int64_t differences = 0;
  // Tensors of different element types compare by value (--by-value); otherwise they are a
  // dtype_mismatch.
  bool by_value = false;
};
inline constexpr std::int64_t kEveryDifference = std::numeric_limits<std::int64_t>::max();

enum class CompareStatus {
  equal,           // every compared element bitwise equal
  equal_as_json,   // declared JSON text equal field by field, its bytes not: an agreement, never
                   // counted as bitwise equal (spacing, key order, a number's spelling, or
                   // fields not counted: timing, provenance)
  differs,         // some element differs
  not_stored,      // one side (or both) stores no element of it (stored='none' / no common rows)
  only_a,          // present in A only
  only_b,          // present in B only
  shape_mismatch,  // a difference: the full shapes differ (e.g. texts of different lengths)
  dtype_mismatch,  // bad input
  corrupt,         // bad input: a side's data does not match its sha256_full
  unverifiable,    // bad input: a psi file's or recording's tensor with no sha256_full (hdf5/unverified.h)
  unsupported,     // bad input: an element type psi cannot compare, inconsistent attributes, or
                   // (--by-value) an int64 no double holds
};

std::string_view status_name(CompareStatus s);

// What differs in a pair of elements whose bits (by value: values) differ; a pair's first
// matching line decides: both NaN (their payloads or signs: nan_payload), one NaN (nan_vs_number,
// the other a number or an Inf), an Inf on either side (inf), +0 against -0 (sign_of_zero), two
// other finite values (value; every difference of integer types).
enum class DiffKind { value, sign_of_zero, nan_payload, nan_vs_number, inf };

std::string_view kind_name(DiffKind k);  // "value", "sign_of_zero", ... as in JSON

struct DifferenceKinds {
  std::int64_t value = 0, sign_of_zero = 0, nan_payload = 0, nan_vs_number = 0, inf = 0;
  void count(DiffKind k);
};

// The pairs left out of the distance: a NaN or an Inf on either side; `matched`: those whose two
// elements are equal all the same (bitwise; by value under --by-value).
struct NonFinitePairs {
  std::int64_t pairs = 0, matched = 0;
};

// A differing element. `ulp`: for floating types, the ULP distance of the two values
// (engine/distance.h; kUlpNaN with a NaN; by value, in the coarser type's steps,
// compare/by_value.h), none across a sign flip, which is counted apart.
struct ElementDifference {
  std::int64_t flat_index = 0;  // row-major index in the full tensor
  Shape index;                  // the same as a multi-index of the full tensor
  std::string a_value;          // formatted value (with raw bits for floating types)
  std::string b_value;
  std::optional<std::int64_t> ulp;
  bool sign_flip = false;
  DiffKind kind = DiffKind::value;
};

struct DatasetComparison {
  std::string path_a;  // empty for only_b
  std::string path_b;  // empty for only_a
  CompareStatus status = CompareStatus::equal;
  std::string dtype;   // "bfloat16", "float32", "float64", "uint8", ...
  Shape full_shape;
  std::int64_t compared = 0;   // elements (JSON text: leaves) compared
  std::int64_t differing = 0;  // elements whose bits differ (JSON text: leaves that differ)
  // Floating types: A's distance to B, the reference (engine/distance.h), over the pairs of two
  // finite elements; its max_ulp_same_sign is the table's and JSON's max_ulp.
  std::optional<Distance> distance;
  // A tensor's elements compared (not a JSON text): what each differing one differs in, and the
  // pairs the distance leaves out.
  std::optional<DifferenceKinds> kinds;
  NonFinitePairs non_finite;
  // Compared by value (--by-value, the element types differ): B's element type and the type
  // whose ULPs the distances count (compare/by_value.h); empty otherwise.
  std::string by_value_dtype_b, by_value_ulp_unit;
  std::optional<ElementDifference> first;
  // The first CompareOptions::differences differing elements, in row-major order (--differences).
  std::vector<ElementDifference> differences;
  std::string note;  // which rows were compared, why nothing was, or the bad-input reason
  // Whether each side's data was checked against its sha256_full (only whole datasets can be).
  bool sha256_checked_a = false, sha256_checked_b = false;
  // The SHA-256 of each side's elements as compared (little-endian; a partial tensor's stored
  // rows): the file's sha256_full where it matched, else computed, so that a verdict on a user's
  // file, which records no hash, still names the bytes it rests on. Empty: not read.
  std::string sha256_a, sha256_b;
  // A tensor of a psi file or a recording (which always hash their tensors) with no sha256_full,
  // compared under --allow-unverified (refused otherwise, hdf5/unverified.h): why, per side.
  std::string unverified;
};

}  // namespace psi::compare
