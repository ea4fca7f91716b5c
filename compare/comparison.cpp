#include "compare/comparison.h"

namespace psi::compare {

void DifferenceKinds::count(DiffKind k) {
  switch (k) {
    case DiffKind::value: ++value; break;
    case DiffKind::sign_of_zero: ++sign_of_zero; break;
    case DiffKind::nan_payload: ++nan_payload; break;
    case DiffKind::nan_vs_number: ++nan_vs_number; break;
    case DiffKind::inf: ++inf; break;
  }
}

std::string_view kind_name(DiffKind k) {
  switch (k) {
    case DiffKind::value: return "value";
    case DiffKind::sign_of_zero: return "sign_of_zero";
    case DiffKind::nan_payload: return "nan_payload";
    case DiffKind::nan_vs_number: return "nan_vs_number";
    case DiffKind::inf: return "inf";
  }
  return "value";
}

std::string_view status_name(CompareStatus s) {
  switch (s) {
    case CompareStatus::equal: return "equal";
    case CompareStatus::equal_as_json: return "equal_as_json";
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

}  // namespace psi::compare
