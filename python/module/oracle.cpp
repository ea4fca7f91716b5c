// psi.oracle: explain one output element, certify a whole output (oracle/explain.h,
// oracle/certify.h) on arrays, with the shape checks of the files' path (oracle/operands.h).
// The verdicts go back as the CLI's JSON (one to_json for both) plus the exact values'
// numerators and denominators, which JSON carries only as text.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/parallel.h"
#include "oracle/certify.h"
#include "oracle/explain.h"
#include "oracle/f32_orders.h"
#include "oracle/operands.h"
#include "python/module/arrays.h"

namespace psi::python {

using namespace nb::literals;

namespace {

std::optional<oracle::NamedOperand> named(const char* name, const std::optional<Bits>& a) {
  if (!a) return std::nullopt;
  return oracle::NamedOperand{name, bf16_tensor(*a)};
}

oracle::LoadedOperands operands(const Bits& x, const Bits& w, const std::optional<Bits>& b,
                                const std::optional<Bits>& y) {
  oracle::LoadedOperands l = oracle::operands_from({"x", bf16_tensor(x)}, {"w", bf16_tensor(w)}, named("b", b), named("y", y));
  l.problem.source.x = "x";
  l.problem.source.w = "w";
  l.problem.source.b = b ? "b" : "";
  return l;
}

// (numerator, denominator) as decimal text: Python's int() takes any size.
std::pair<std::string, std::string> ratio(const mpq_class& q) { return {q.get_num().get_str(), q.get_den().get_str()}; }

std::tuple<std::string, std::pair<std::string, std::string>> explain(
    const Bits& x, const Bits& w, const std::optional<Bits>& b, std::int64_t row, std::int64_t col,
    const std::vector<std::pair<std::string, std::uint16_t>>& candidates) {
  oracle::LoadedOperands l = operands(x, w, b, std::nullopt);
  std::vector<oracle::Candidate> cands;
  for (const auto& [name, bits] : candidates) cands.push_back({name, Bf16::from_bits(bits)});
  nb::gil_scoped_release unlocked;
  const oracle::Explanation e = oracle::explain(l.problem, row, col, cands);
  return {oracle::to_json(e).dump(), ratio(e.exact)};
}

using Element = std::tuple<std::int64_t, std::int64_t, std::uint16_t, std::uint16_t, std::int64_t,
                           std::pair<std::string, std::string>, std::vector<std::string>>;

// The report's JSON, then every not correctly rounded element: row, col, given bits, correctly
// rounded bits, ULP distance, exact value, the float32 orders that give the given value.
std::tuple<std::string, std::vector<Element>> certify(const Bits& x, const Bits& w, const std::optional<Bits>& b,
                                                      const Bits& y) {
  oracle::LoadedOperands l = operands(x, w, b, y);
  nb::gil_scoped_release unlocked;
  const oracle::CertifyReport rep = oracle::certify(l.problem, *l.y, {0, -1, thread_count()});
  std::vector<Element> elements;
  for (const auto& el : rep.elements) {
    std::vector<std::string> orders;
    for (std::size_t i : el.orders) orders.push_back(oracle::f32_orders()[i].name);
    elements.emplace_back(el.row, el.col, el.recorded.bits, el.correct.bits, el.ulps, ratio(el.exact), orders);
  }
  return {oracle::to_json(rep, 0.0).dump(), elements};
}

}  // namespace

void bind_oracle(nb::module_& m) {
  m.def("explain", &explain, "x"_a.noconvert(), "w"_a.noconvert(), "b"_a.noconvert().none(), "row"_a, "col"_a,
        "candidates"_a);
  m.def("certify", &certify, "x"_a.noconvert(), "w"_a.noconvert(), "b"_a.noconvert().none(), "y"_a.noconvert());
}

}  // namespace psi::python
