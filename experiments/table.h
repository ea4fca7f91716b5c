#pragma once
// A result table: what every experiment prints and stores in its report, so that
// `psi report FILE` re-renders it from the file alone (Markdown, CSV or JSON).
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace psi::exp {

struct Table {
  std::string title;
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> notes;  // lines printed under the table

  void add_row(std::vector<std::string> row);
  nlohmann::json to_json() const;
  static Table from_json(const nlohmann::json& j);  // psi::Error on a malformed table
};

enum class Format { markdown, csv, json };
Format parse_format(const std::string& name);  // "markdown"|"md", "csv", "json"
std::string render(const std::vector<Table>& tables, Format f);

// Number formatting shared by the drivers.
std::string fmt_sci(double v, int digits = 3);      // 1.234e-03
std::string fmt_fixed(double v, int decimals = 2);  // 12.35
std::string fmt_mib(double bytes);                  // "12.0 MiB"
std::string fmt_count(long long n);                 // 1,032,192

}  // namespace psi::exp
