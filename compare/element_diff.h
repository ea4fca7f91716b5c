#pragma once
// psi compare's element diff: where each side's stored elements sit in the full tensor, and the
// element-by-element comparison of the box both sides store.
#include <string>

#include "compare/comparison.h"
#include "engine/tensor.h"
#include "hdf5/h5.h"
#include "hdf5/schema.h"

namespace psi::compare {

// One side of a comparison: where its stored elements sit in the full tensor.
struct Side {
  hdf5::DatasetInfo info;
  bool bf16_from_u16 = false;  // info.kind is bf16 for a uint16 dataset read as BF16 (--as bf16)
  // --as bf16 on float32: compared as BF16, in BF16 ULPs, when every value of both sides is one
  bool f32_as_bf16 = false;
  Shape full;
  hdf5::StoredRegion region;
  Shape lo, hi;  // the stored box [lo, hi) in full-tensor coordinates
};


// The side of dataset `di` of `f`: its full shape (attribute full_shape) and stored region
// (attribute stored), checked against each other (psi::Error naming the dataset otherwise).
Side describe(const hdf5::File& f, const hdf5::DatasetInfo& di);

// "rows 0..255 of axis 1" when the box cuts one axis, else the box in slice notation.
std::string describe_box(const Shape& lo, const Shape& hi, const Shape& full);

// Loads both sides, checks each whole one against its sha256_full (a mismatch makes the dataset
// `corrupt`), then compares the elements of box [lo, hi) (full-tensor coordinates) into `out`:
// its counts by kind, distance over the finite pairs, non-finite pairs, first difference, the
// first `list` differing elements and status. Sides of one element kind compare bitwise, of two
// kinds by value (--by-value, compare/by_value.h).
void compare_elements(const hdf5::File& fa, const Side& sa, const hdf5::File& fb, const Side& sb, const Shape& lo,
                      const Shape& hi, std::int64_t list, DatasetComparison& out);

}  // namespace psi::compare
