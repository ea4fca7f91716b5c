#pragma once
// The distance metrics (engine/distance.h) as psi shows them, one entry each, which every
// surface enumerates: psi probe's rows and their legend (probes/metrics.h, cli/cmd_probe.cpp),
// psi compare's table and --json (report/compare_table.cpp), the experiments' records
// (experiments/records.h) and the tables that show the standard set (psi run probes), and, of
// those the entries mark, the tables that keep the paper's columns (block-controls). A new
// metric is its field in Distance, its computation in distance.cpp and its entry here
// (docs/contributing.md, "Add a metric"). The counts every surface shows first, the elements
// compared and the differing ones, are Distance's total and differing, not metrics.
#include <cstdint>
#include <tuple>

#include "engine/distance.h"

namespace psi {

// T: std::int64_t for a count of elements or ULPs, double for a ratio or a value.
template <class T>
struct Metric {
  const char* key;          // psi probe's name for it and the records' key: "max_ulp_same_sign"
  const char* compare_key;  // psi compare's column and --json key: "max_ulp"
  const char* label;        // a table's column: "max ULP (same sign)"
  T Distance::*member;
  // What it measures, for psi probe's legend (its rows compare psi with a recording).
  const char* meaning;
  // Against a float64 reference, what it measures with the reference's unrounded values, for
  // psi probe's legend of its float64 rows, where it is named key + "_to_float64"; null for a
  // metric that compares with the reference's BF16 rounding, as the counts do.
  const char* meaning_to_float64;
  int compare_width;   // psi compare's column width
  int compare_column;  // its place among psi compare's metric columns (0 first)
  // In every report's records; false: absent in the reports written before it (read as 0 there),
  // whose rows show "—" for it.
  bool in_every_report;
  // Shown by the tables that keep the paper's columns (block-controls' tables and its device-check
  // section), which show these metrics of each output and its differing elements, not every one.
  bool in_paper_tables;
};

// In the order psi probe and the tables show them.
inline constexpr std::tuple kDistanceMetrics{
    Metric<double>{"rel_l2", "rel_l2", "rel L2", &Distance::rel_l2, "||psi - recording|| / ||recording|| in float64",
                   "||recording - float64|| / ||float64||", 10, 2, true, true},
    Metric<std::int64_t>{"sign_flips", "sign_flips", "sign flips", &Distance::sign_flips,
                         "differing elements whose sign (-, 0, +) differs from the recording's", nullptr, 10, 0, false,
                         false},
    Metric<std::int64_t>{"max_ulp_same_sign", "max_ulp", "max ULP (same sign)", &Distance::max_ulp_same_sign,
                         "the largest BF16 ULP distance among the other differing elements", nullptr, 8, 1, false,
                         false},
};

inline constexpr std::size_t kDistanceMetricCount = std::tuple_size_v<decltype(kDistanceMetrics)>;

// f(metric) for every metric, in order.
template <class F>
constexpr void for_each_metric(F&& f) {
  std::apply([&](const auto&... m) { (f(m), ...); }, kDistanceMetrics);
}

}  // namespace psi
