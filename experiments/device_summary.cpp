#include "experiments/device_summary.h"

#include <cmath>

namespace psi::exp {

std::string md_table(const report::Table& t) {
  std::string s = report::render({t}, report::Format::markdown);
  const std::string untitled = "### \n\n";
  if (t.title.empty() && s.rfind(untitled, 0) == 0) s.erase(0, untitled.size());
  return s;
}

double num(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : std::nan("");
}

std::string ms(double seconds, int decimals) { return report::fmt_fixed(seconds * 1e3, decimals); }

std::string amount(double bytes) { return std::isfinite(bytes) ? report::fmt_mib(bytes) : "-"; }

std::string bytes_pair(const nlohmann::json& run, const char* a, const char* b) {
  return amount(num(run, a)) + " / " + amount(num(run, b));
}

}  // namespace psi::exp
