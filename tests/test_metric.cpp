// The distance metric registry (engine/metric.h): every surface that shows the standard set of
// metrics shows each registered one, under its own name and with its own value — psi probe's
// rows and legend, psi compare's table and --json, the experiments' records and psi run probes'
// table — so that a metric is one entry. Each metric gets a value no other metric has.
#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/metric.h"
#include "experiments/experiment.h"
#include "experiments/records.h"
#include "probes/metrics.h"
#include "report/compare_table.h"
#include "report/table.h"

namespace {

// A distance whose metrics are 7, 8, 9, … (a ratio 7e-3, …) in registry order.
psi::Distance distinct_distance() {
  psi::Distance d;
  d.total = 1000;
  d.differing = 100;
  int i = 7;
  psi::for_each_metric([&](const auto& m) {
    using T = std::remove_cvref_t<decltype(d.*m.member)>;
    d.*m.member = std::is_floating_point_v<T> ? T(i) * T(1e-3) : T(i);
    ++i;
  });
  return d;
}

template <class T>
std::string probe_value(T v) {
  char buf[64];
  if constexpr (std::is_floating_point_v<T>) std::snprintf(buf, sizeof buf, "%.3e", double(v));
  else std::snprintf(buf, sizeof buf, "%lld", (long long)v);
  return buf;
}

}  // namespace

TEST(DistanceMetrics, KeysAndCompareColumnsAreDistinct) {
  std::set<std::string> keys, compare_keys, labels;
  std::set<int> columns;
  psi::for_each_metric([&](const auto& m) {
    EXPECT_TRUE(keys.insert(m.key).second) << m.key;
    EXPECT_TRUE(compare_keys.insert(m.compare_key).second) << m.compare_key;
    EXPECT_TRUE(labels.insert(m.label).second) << m.label;
    EXPECT_TRUE(columns.insert(m.compare_column).second) << m.key;
    EXPECT_GE(m.compare_width, int(std::string(m.compare_key).size())) << m.key;
  });
  EXPECT_EQ(keys.size(), psi::kDistanceMetricCount);
  // psi compare's places are 0 … count − 1.
  EXPECT_EQ(*columns.begin(), 0);
  EXPECT_EQ(*columns.rbegin(), int(psi::kDistanceMetricCount) - 1);
}

TEST(DistanceMetrics, PsiProbeRowsAndLegendShowEveryMetric) {
  const psi::Distance d = distinct_distance();
  const std::string row = psi::probes::format_distance(d), f64 = psi::probes::format_distance(d, true);
  const std::string legend = psi::probes::metrics_legend(), legend64 = psi::probes::metrics_legend_to_float64();
  psi::for_each_metric([&](const auto& m) {
    const std::string value = probe_value(d.*m.member);
    EXPECT_NE(row.find(" " + std::string(m.key) + " " + value), std::string::npos) << row;
    const std::string name64 = std::string(m.key) + (m.meaning_to_float64 ? "_to_float64" : "");
    EXPECT_NE(f64.find(" " + name64 + " " + value), std::string::npos) << f64;
    EXPECT_NE(legend.find(std::string(m.key) + " = " + m.meaning), std::string::npos) << legend;
    EXPECT_NE(legend64.find(name64), std::string::npos) << legend64;
  });
  EXPECT_EQ(row.rfind("differs 100/1000 ", 0), 0u) << row;
}

TEST(DistanceMetrics, PsiCompareTableAndJsonShowEveryMetric) {
  psi::compare::CompareReport r;
  r.file_a = "a.h5";
  r.file_b = "b.h5";
  psi::compare::DatasetComparison ds;
  ds.path_a = ds.path_b = "/x";
  ds.status = psi::compare::CompareStatus::differs;
  ds.dtype = "bfloat16";
  ds.compared = 1000;
  ds.differing = 100;
  ds.distance = distinct_distance();
  r.datasets.push_back(ds);
  const std::string text = psi::report::compare_table(r);
  const auto json = nlohmann::json::parse(psi::report::compare_json(r));
  // The header's metric columns in psi compare's order, and the row's values under them.
  std::vector<std::string> header(psi::kDistanceMetricCount), cells(psi::kDistanceMetricCount);
  psi::for_each_metric([&](const auto& m) {
    header[std::size_t(m.compare_column)] = m.compare_key;
    const auto v = (*ds.distance).*m.member;
    cells[std::size_t(m.compare_column)] = std::is_floating_point_v<decltype(v)> ? probe_value(v) : std::to_string(v);
    EXPECT_EQ(json["datasets"][0][m.compare_key], nlohmann::json(v)) << m.compare_key;
  });
  std::string header_text = "differing/total", cells_text = "100/1000";
  for (std::size_t i = 0; i < header.size(); ++i) {
    header_text += " " + header[i];
    cells_text += " " + cells[i];
  }
  std::string squeezed;  // the table without its column padding
  for (char c : text)
    if (c != ' ' || squeezed.empty() || squeezed.back() != ' ') squeezed += c;
  EXPECT_NE(squeezed.find(header_text + " dataset"), std::string::npos) << text;
  EXPECT_NE(squeezed.find("differs " + cells_text + " /x"), std::string::npos) << text;
}

TEST(DistanceMetrics, RecordsAndTheProbesTableShowEveryMetric) {
  const psi::Distance d = distinct_distance();
  psi::exp::ProbeRow row{"dense", "proj_out", "official", "all", d, std::nullopt, std::nullopt};
  const nlohmann::json record = row;
  const psi::Distance back = *record.get<psi::exp::ProbeRow>().distance;
  nlohmann::json cases = nlohmann::json::array({{{"case", "audio-ff-up"}, {"index", 0}, {"rows", {record}}}});
  const psi::report::Table t = psi::exp::find_experiment("probes").tabulate(cases, nlohmann::json::object())[0];
  ASSERT_EQ(t.rows.size(), 1u);
  psi::for_each_metric([&](const auto& m) {
    EXPECT_EQ(record.at(m.key), nlohmann::json(d.*m.member)) << m.key;
    EXPECT_EQ(back.*m.member, d.*m.member) << m.key;
    const auto it = std::find(t.columns.begin(), t.columns.end(), std::string(m.label));
    ASSERT_NE(it, t.columns.end()) << m.label;
    const auto v = d.*m.member;
    const std::string cell = std::is_floating_point_v<decltype(v)> ? psi::report::fmt_sci(double(v))
                                                                   : psi::report::fmt_count((long long)v);
    EXPECT_EQ(t.rows[0][std::size_t(it - t.columns.begin())], cell) << m.label;
  });
}
