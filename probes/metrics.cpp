#include "probes/metrics.h"

#include <cstdio>
#include <type_traits>
#include <vector>

#include "engine/metric.h"

namespace psi::probes {

namespace {

template <class T>
std::string value_text(T v) {
  char buf[64];
  if constexpr (std::is_floating_point_v<T>) std::snprintf(buf, sizeof buf, "%.3e", v);
  else std::snprintf(buf, sizeof buf, "%lld", (long long)v);
  return buf;
}

template <class T>
std::string name_of(const Metric<T>& m, bool to_float64) {
  return std::string(m.key) + (to_float64 && m.meaning_to_float64 ? "_to_float64" : "");
}

// "a, b and c"
std::string and_list(const std::vector<std::string>& items) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i)
    out += (i == 0 ? "" : i + 1 == items.size() ? " and " : ", ") + items[i];
  return out;
}

}  // namespace

std::string format_distance(const Distance& d, bool to_float64) {
  if (d.bitwise_equal()) return "bitwise-equal (" + std::to_string(d.total) + " elements)";
  std::string out = "differs " + std::to_string(d.differing) + "/" + std::to_string(d.total);
  for_each_metric([&](const auto& m) { out += " " + name_of(m, to_float64) + " " + value_text(d.*m.member); });
  return out;
}

std::string metrics_legend() {
  std::string out;
  for_each_metric([&](const auto& m) { out += (out.empty() ? "" : "; ") + std::string(m.key) + " = " + m.meaning; });
  return "result: " + out + "\n";
}

std::string metrics_legend_to_float64() {
  std::string values;
  std::vector<std::string> rounded{"differing"};
  for_each_metric([&](const auto& m) {
    if (m.meaning_to_float64) values += (values.empty() ? "" : "; ") + name_of(m, true) + " = " + m.meaning_to_float64;
    else rounded.push_back(m.key);
  });
  return "result of the float64 rows: the recording against the float64 block (psi run block-controls' float64 "
         "table): " + values + " with the unrounded float64 values; " + and_list(rounded) +
         " against the float64 block rounded to BF16\n";
}

}  // namespace psi::probes
