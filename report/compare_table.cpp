#include "report/compare_table.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <functional>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/distance.h"
#include "engine/error.h"
#include "engine/metric.h"
#include "report/table.h"

namespace psi::report {

using compare::CompareReport;
using compare::CompareStatus;
using compare::DatasetComparison;

namespace {

std::string dataset_label(const DatasetComparison& d) {
  if (d.path_a.empty()) return d.path_b;
  if (d.path_b.empty() || d.path_b == d.path_a) return d.path_a;
  return d.path_a + " => " + d.path_b;
}

std::string index_str(const Shape& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// One of the distance's metrics (engine/metric.h) as psi compare shows it: its column, and its
// value as a cell and in --json.
struct MetricColumn {
  std::string key;
  int width = 0, order = 0;
  std::function<std::string(const Distance&)> cell;
  std::function<nlohmann::json(const Distance&)> json;
};

// Every metric, in psi compare's column order.
const std::vector<MetricColumn>& metric_columns() {
  static const std::vector<MetricColumn> columns = [] {
    std::vector<MetricColumn> c;
    for_each_metric([&](const auto& m) {
      const auto member = m.member;
      MetricColumn col{m.compare_key, m.compare_width, m.compare_column, {}, {}};
      if constexpr (std::is_floating_point_v<std::remove_cvref_t<decltype(Distance{}.*member)>>) {
        col.cell = [member](const Distance& d) {
          char buf[64];
          std::snprintf(buf, sizeof buf, "%.3e", d.*member);
          return d.*member == 0 ? std::string("0") : std::string(buf);
        };
        // JSON has no NaN or Inf: a non-finite value (a relative error to a reference of zeros,
        // or sums beyond float64's range) is written as a string.
        col.json = [member](const Distance& d) {
          const double v = d.*member;
          return std::isfinite(v) ? nlohmann::json(v) : std::isnan(v) ? nlohmann::json("nan") : nlohmann::json("inf");
        };
      } else {
        col.cell = [member](const Distance& d) { return std::to_string(d.*member); };
        col.json = [member](const Distance& d) { return nlohmann::json(d.*member); };
      }
      c.push_back(std::move(col));
    });
    std::sort(c.begin(), c.end(), [](const MetricColumn& a, const MetricColumn& b) { return a.order < b.order; });
    return c;
  }();
  return columns;
}

// `text` right-aligned in `width` (a longer one as it is).
std::string right(const std::string& text, int width) {
  return std::string(std::size_t(std::max(0, width - int(text.size()))), ' ') + text;
}

std::string element_str(const compare::ElementDifference& e) {
  return "@" + std::to_string(e.flat_index) + " " + index_str(e.index) + ": A=" + e.a_value + " B=" + e.b_value;
}

std::string ulp_str(const compare::ElementDifference& e) {
  switch (e.kind) {
    case compare::DiffKind::sign_of_zero: return "the sign of zero";
    case compare::DiffKind::nan_payload: return "NaN payloads or signs differ";
    case compare::DiffKind::nan_vs_number: return "a NaN against a number";
    case compare::DiffKind::inf: return "an infinity";
    case compare::DiffKind::value: break;
  }
  if (e.sign_flip) return "sign flip";
  if (!e.ulp) return "";
  return std::to_string(*e.ulp) + (*e.ulp == 1 ? " ulp" : " ulps");
}

std::string counted(std::int64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// "differences: 3 values, 1 sign of zero": the kinds that occur, under a differing dataset.
std::string kinds_line(const compare::DifferenceKinds& k) {
  std::string out;
  auto add = [&](std::int64_t n, const char* one, const char* many) {
    if (n > 0) out += (out.empty() ? "" : ", ") + counted(n, one, many);
  };
  add(k.value, "value", "values");
  add(k.sign_of_zero, "sign of zero", "signs of zero");
  add(k.nan_payload, "NaN payload", "NaN payloads");
  add(k.nan_vs_number, "NaN against a number", "NaNs against numbers");
  add(k.inf, "infinity", "infinities");
  return "    differences: " + out + "\n";
}

// The pairs the distance leaves out, when there are any: out of every metric's column.
std::string non_finite_line(const DatasetComparison& d) {
  const bool by_value = !d.by_value_ulp_unit.empty();
  std::string metrics;
  const auto& columns = metric_columns();
  for (std::size_t i = 0; i < columns.size(); ++i)
    metrics += (i == 0 ? "" : i + 1 == columns.size() ? " and " : ", ") + columns[i].key;
  return "    non-finite: " + counted(d.non_finite.pairs, "pair holds", "pairs hold") + " a NaN or an infinity (" +
         std::to_string(d.non_finite.matched) + (by_value ? " equal by value" : " bitwise equal") + "), left out of " +
         metrics + "\n";
}

}  // namespace

std::string compare_table(const CompareReport& r) {
  auto partial = [](const std::string& marker) { return marker.empty() ? "" : ", PARTIAL: " + marker; };
  // Names and notes come from the files (paths, dataset names, partial markers): each line is
  // kept one line, so that a newline in them cannot forge another.
  std::string out = one_line("A: " + r.file_a + " (" + r.format_a + partial(r.partial_a) + ")") + "\n";
  out += one_line("B: " + r.file_b + " (" + r.format_b + partial(r.partial_b) + "), the reference of rel_l2") + "\n";
  std::size_t width = 7;
  for (const auto& d : r.datasets) width = std::max(width, one_line(dataset_label(d)).size());
  char buf[256];
  std::string header = "status";
  header.resize(14, ' ');
  header += " " + right("differing/total", 21);
  for (const MetricColumn& m : metric_columns()) header += " " + right(m.key, m.width);
  std::string dataset = "dataset";
  dataset.resize(width, ' ');
  out += header + "  " + dataset + "  first difference / note\n";
  for (const auto& d : r.datasets) {
    std::string counts = "-";
    std::vector<std::string> metrics(metric_columns().size(), "-");
    const std::optional<Distance>& dist = d.distance;
    if (d.status == CompareStatus::equal || d.status == CompareStatus::equal_as_json ||
        d.status == CompareStatus::differs) {
      counts = std::to_string(d.differing) + "/" + std::to_string(d.compared);
      // Over finite pairs: a max_ulp is never a NaN's.
      if (dist)
        for (std::size_t i = 0; i < metrics.size(); ++i) metrics[i] = metric_columns()[i].cell(*dist);
    }
    std::string detail;
    if (d.first) detail = element_str(*d.first);
    if (!d.note.empty()) detail += (detail.empty() ? "" : "; ") + d.note;
    std::string line = std::string(status_name(d.status));
    line.resize(std::max<std::size_t>(line.size(), 14), ' ');
    line += " " + right(counts, 21);
    for (std::size_t i = 0; i < metrics.size(); ++i) line += " " + right(metrics[i], metric_columns()[i].width);
    std::string label = one_line(dataset_label(d));
    label.resize(std::max(label.size(), width), ' ');
    out += line + "  " + label + "  " + one_line(detail);
    while (!out.empty() && out.back() == ' ') out.pop_back();
    out += "\n";
    if (d.kinds && d.differing > 0) out += kinds_line(*d.kinds);
    if (d.non_finite.pairs > 0) out += non_finite_line(d);
    // --differences: the listed elements under their dataset's line.
    const std::int64_t shown = std::min<std::int64_t>(r.differences, std::int64_t(d.differences.size()));
    for (std::int64_t i = 0; i < shown; ++i) {
      const auto& e = d.differences[std::size_t(i)];
      const std::string u = ulp_str(e);
      out += one_line("    " + element_str(e) + (u.empty() ? "" : ", " + u)) + "\n";
    }
    if (shown > 0 && shown < d.differing)
      out += "    ... " + std::to_string(d.differing - shown) + " more differing (--differences all lists every one)\n";
    // A side with no hash of its own (a user's file): the hash of what was compared, so the
    // verdict names the bytes it rests on.
    if ((!d.sha256_a.empty() && !d.sha256_checked_a) || (!d.sha256_b.empty() && !d.sha256_checked_b))
      out += "    sha256: A " + (d.sha256_a.empty() ? std::string("-") : d.sha256_a) + ", B " +
             (d.sha256_b.empty() ? std::string("-") : d.sha256_b) + "\n";
  }
  const auto n_equal = r.count(CompareStatus::equal), n_diff = r.count(CompareStatus::differs);
  const auto n_json = r.count(CompareStatus::equal_as_json);
  const auto n_shape = r.count(CompareStatus::shape_mismatch);
  const auto n_bad = r.count(CompareStatus::dtype_mismatch) + r.count(CompareStatus::unsupported) +
                     r.count(CompareStatus::corrupt) + r.count(CompareStatus::unverifiable);
  // The shape and JSON counts only when there is one, so that the usual line keeps its form.
  const std::string shape_part = n_shape ? ", " + std::to_string(n_shape) + " differ in shape" : "";
  const std::string json_part = n_json ? ", " + std::to_string(n_json) + " equal as JSON only" : "";
  std::snprintf(buf, sizeof buf,
                "summary: %" PRId64 " compared (%" PRId64 " bitwise equal%s, %" PRId64 " differ)%s, %" PRId64
                " not stored, %" PRId64 " only in A, %" PRId64 " only in B, %" PRId64 " bad -> exit %d\n",
                n_equal + n_json + n_diff, n_equal, json_part.c_str(), n_diff, shape_part.c_str(),
                r.count(CompareStatus::not_stored),
                r.count(CompareStatus::only_a), r.count(CompareStatus::only_b), n_bad, r.exit_code());
  out += buf;
  if (n_bad == 0 && n_diff == 0 && n_shape == 0 && n_equal + n_json == 0)
    out += "nothing was compared: the files share no stored dataset (exit 1)\n";
  else if (n_bad == 0 && n_diff == 0 && n_shape == 0 && r.strict && r.count(CompareStatus::only_a) + r.count(CompareStatus::only_b) > 0)
    out += "not everything was compared: datasets in one file only (exit 1; --subset compares what both hold)\n";
  return out;
}

std::string compare_json(const CompareReport& r) {
  using nlohmann::json;
  json j;
  j["file_a"] = r.file_a;
  j["file_b"] = r.file_b;
  j["format_a"] = r.format_a;
  j["format_b"] = r.format_b;
  j["partial_a"] = r.partial_a.empty() ? json(nullptr) : json(r.partial_a);
  j["partial_b"] = r.partial_b.empty() ? json(nullptr) : json(r.partial_b);
  j["strict"] = r.strict;
  j["datasets"] = json::array();
  for (const auto& d : r.datasets) {
    json e;
    e["path_a"] = d.path_a.empty() ? json(nullptr) : json(d.path_a);
    e["path_b"] = d.path_b.empty() ? json(nullptr) : json(d.path_b);
    e["status"] = status_name(d.status);
    e["dtype"] = d.dtype;
    e["full_shape"] = d.full_shape;
    e["compared"] = d.compared;
    e["differing"] = d.differing;
    const std::optional<Distance>& dist = d.distance;
    for (const MetricColumn& m : metric_columns()) e[m.key] = dist ? m.json(*dist) : json(nullptr);
    e["difference_kinds"] = !d.kinds ? json(nullptr)
                                     : json{{"value", d.kinds->value},
                                            {"sign_of_zero", d.kinds->sign_of_zero},
                                            {"nan_payload", d.kinds->nan_payload},
                                            {"nan_vs_number", d.kinds->nan_vs_number},
                                            {"inf", d.kinds->inf}};
    e["non_finite"] = !d.kinds ? json(nullptr) : json{{"pairs", d.non_finite.pairs}, {"matched", d.non_finite.matched}};
    e["by_value"] = d.by_value_ulp_unit.empty()
                        ? json(nullptr)
                        : json{{"dtype_a", d.dtype}, {"dtype_b", d.by_value_dtype_b}, {"ulp_unit", d.by_value_ulp_unit}};
    if (d.first)
      e["first_difference"] = {{"flat_index", d.first->flat_index},
                               {"index", d.first->index},
                               {"a", d.first->a_value},
                               {"b", d.first->b_value}};
    if (r.differences > 0) {
      e["differences"] = json::array();
      const std::int64_t shown = std::min<std::int64_t>(r.differences, std::int64_t(d.differences.size()));
      for (std::int64_t i = 0; i < shown; ++i) {
        const auto& x = d.differences[std::size_t(i)];
        e["differences"].push_back({{"flat_index", x.flat_index},
                                    {"index", x.index},
                                    {"a", x.a_value},
                                    {"b", x.b_value},
                                    {"ulp", !x.ulp ? json(nullptr) : *x.ulp == kUlpNaN ? json("nan") : json(*x.ulp)},
                                    {"sign_flip", x.sign_flip},
                                    {"kind", compare::kind_name(x.kind)}});
      }
    }
    e["note"] = d.note;
    e["sha256_checked"] = {{"a", d.sha256_checked_a}, {"b", d.sha256_checked_b}};
    e["sha256"] = {{"a", d.sha256_a.empty() ? nlohmann::json(nullptr) : nlohmann::json(d.sha256_a)},
                   {"b", d.sha256_b.empty() ? nlohmann::json(nullptr) : nlohmann::json(d.sha256_b)}};
    e["unverified"] = d.unverified.empty() ? json(nullptr) : json(d.unverified);
    j["datasets"].push_back(e);
  }
  j["summary"] = {{"equal", r.count(CompareStatus::equal)},
                  {"equal_as_json", r.count(CompareStatus::equal_as_json)},
                  {"differs", r.count(CompareStatus::differs)},
                  {"shape_mismatch", r.count(CompareStatus::shape_mismatch)},
                  {"not_stored", r.count(CompareStatus::not_stored)},
                  {"only_a", r.count(CompareStatus::only_a)},
                  {"only_b", r.count(CompareStatus::only_b)},
                  {"bad", r.count(CompareStatus::dtype_mismatch) + r.count(CompareStatus::unsupported) +
                              r.count(CompareStatus::corrupt) + r.count(CompareStatus::unverifiable)}};
  j["exit_code"] = r.exit_code();
  return j.dump(2) + "\n";
}

std::string differences_csv(const CompareReport& r) {
  std::string out = std::string(kDifferencesCsvHeader) + "\n";
  for (const auto& d : r.datasets)
    for (const auto& e : d.differences) {
      const std::string ulp = e.sign_flip || !e.ulp ? "" : *e.ulp == kUlpNaN ? "nan" : std::to_string(*e.ulp);
      out += csv_cell(d.path_a) + "," + csv_cell(d.path_b) + "," + std::to_string(e.flat_index) + "," +
             csv_cell(index_str(e.index)) + "," + csv_cell(e.a_value) + "," + csv_cell(e.b_value) + "," + ulp + "," +
             (e.sign_flip ? "1" : "0") + "\n";
    }
  return out;
}

}  // namespace psi::report
