// psi.compare: two sides, each a path of any tensor file psi reads (hdf5/tensor_file.h) or arrays
// by name (hdf5::arrays_file), compared as `psi compare` compares files, its JSON returned.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <string>
#include <tuple>
#include <vector>

#include "compare/compare.h"
#include "hdf5/tensor_file.h"
#include "python/module/arrays.h"
#include "report/compare_table.h"

namespace psi::python {

using namespace nb::literals;

namespace {

// One array by name: its element type as `psi compare --json` names it, its shape, its elements.
using Named = std::tuple<std::string, std::string, std::vector<std::int64_t>,
                         nb::ndarray<nb::c_contig, nb::device::cpu, nb::ro>>;

hdf5::ElemKind kind_named(const std::string& side, const std::string& name, const std::string& dtype) {
  for (hdf5::ElemKind k : {hdf5::ElemKind::bf16, hdf5::ElemKind::f32, hdf5::ElemKind::f64, hdf5::ElemKind::u8,
                           hdf5::ElemKind::u16, hdf5::ElemKind::i64})
    if (hdf5::kind_name(k) == dtype) return k;
  throw Error(side + ": tensor \"" + name + "\" is " + dtype + ", which psi does not compare");
}

std::size_t element_bytes(hdf5::ElemKind k) {
  switch (k) {
    case hdf5::ElemKind::u8: return 1;
    case hdf5::ElemKind::bf16:
    case hdf5::ElemKind::u16: return 2;
    case hdf5::ElemKind::f32: return 4;
    default: return 8;
  }
}

// The array's elements must be exactly what its shape and type say: no read past its end.
void check_size(const std::string& side, const std::string& name, hdf5::ElemKind kind, const Shape& shape,
                std::size_t bytes) {
  std::size_t want = element_bytes(kind);
  for (std::int64_t d : shape) {
    if (d < 0 || (d > 0 && want > bytes / std::size_t(d)) )
      throw Error(side + ": tensor \"" + name + "\" of shape " + shape_str(shape) + " does not fit its " +
                  std::to_string(bytes) + " bytes");
    want *= std::size_t(d);
  }
  if (want != bytes)
    throw Error(side + ": tensor \"" + name + "\" of shape " + shape_str(shape) + " needs " + std::to_string(want) +
                " bytes, its array holds " + std::to_string(bytes));
}

hdf5::File side_file(const std::string& shown_as, const nb::object& side) {
  if (nb::isinstance<nb::str>(side)) return hdf5::open_tensor_file(nb::cast<std::string>(side));
  std::vector<Named> arrays;
  if (!nb::try_cast(side, arrays))
    throw nb::type_error(("psi.compare: side " + shown_as + " is neither a path nor a list of (name, dtype, shape, "
                          "array)").c_str());
  std::vector<hdf5::ArrayView> views;
  for (const auto& [name, dtype, shape, data] : arrays) {
    const hdf5::ElemKind kind = kind_named(shown_as, name, dtype);
    check_size(shown_as, name, kind, shape, data.nbytes());
    views.push_back({name, kind, shape, data.data()});
  }
  return hdf5::arrays_file(shown_as, views);
}

std::string compare(const nb::object& a, const nb::object& b, const std::string& only, bool strict, bool as_bf16,
                    bool by_value, std::int64_t differences, bool allow_partial, bool timing) {
  compare::CompareOptions opt;
  opt.only = only;
  opt.strict = strict;
  opt.as_bf16 = as_bf16;
  opt.by_value = by_value;
  opt.differences = differences < 0 ? compare::kEveryDifference : differences;
  opt.allow_partial = allow_partial;
  opt.timing = timing;
  // The arrays stay alive in the caller's frame; only their pointers cross.
  const hdf5::File fa = side_file("a", a), fb = side_file("b", b);
  nb::gil_scoped_release unlocked;
  return report::compare_json(compare::compare_opened(fa, fb, opt));
}

}  // namespace

void bind_compare(nb::module_& m) {
  m.def("compare", &compare, "a"_a, "b"_a, "only"_a, "strict"_a, "as_bf16"_a, "by_value"_a, "differences"_a,
        "allow_partial"_a, "timing"_a);
}

}  // namespace psi::python
