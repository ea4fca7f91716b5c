#include "report/table.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>
#include <sstream>

#include "engine/error.h"
#include "engine/real_number.h"

namespace psi::report {

void Table::add_row(std::vector<std::string> row) {
  if (row.size() != columns.size())
    throw Error("table '" + title + "': row of " + std::to_string(row.size()) + " cells for " +
                    std::to_string(columns.size()) + " columns",
                Exit::run_failed);
  rows.push_back(std::move(row));
}

namespace {

void check_time_columns(const Table& t, Exit code) {
  for (const std::string& c : t.time_columns)
    if (std::find(t.columns.begin(), t.columns.end(), c) == t.columns.end())
      throw Error("table '" + t.title + "': time column '" + c + "' is not one of its columns", code);
}

}  // namespace

nlohmann::json Table::to_json() const {
  check_time_columns(*this, Exit::run_failed);
  nlohmann::json j = {{"title", title}, {"columns", columns}, {"rows", rows}, {"notes", notes}};
  if (!provenance.empty()) j[kProvenanceKey] = provenance;
  j["time_columns"] = time_columns;
  return j;
}

Table Table::from_json(const nlohmann::json& j) {
  try {
    Table t;
    t.title = j.at("title").get<std::string>();
    t.columns = j.at("columns").get<std::vector<std::string>>();
    for (auto& r : j.at("rows")) t.add_row(r.get<std::vector<std::string>>());
    t.notes = j.value("notes", std::vector<std::string>{});
    t.provenance = j.value(kProvenanceKey, std::vector<std::string>{});
    t.time_columns = j.value("time_columns", std::vector<std::string>{});
    check_time_columns(t, Exit::bad_input);
    return t;
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("report table: malformed JSON: ") + e.what());
  }
}

Format parse_format(const std::string& name) {
  if (name == "markdown" || name == "md") return Format::markdown;
  if (name == "csv") return Format::csv;
  if (name == "json") return Format::json;
  throw Error("unknown format '" + name + "' (valid: markdown, csv, json)");
}

std::string csv_cell(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

namespace {

// A Markdown cell: one line (control characters escaped) and no unescaped '|'. Cells, titles and
// notes can quote paths and dataset names from files; neither may end a cell or forge a line.
std::string markdown_cell(const std::string& s) {
  std::string out;
  for (char c : one_line(s)) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

std::string markdown(const Table& t) {
  auto escaped = [](const std::vector<std::string>& cells) {
    std::vector<std::string> out;
    for (const auto& c : cells) out.push_back(markdown_cell(c));
    return out;
  };
  const std::vector<std::string> columns = escaped(t.columns);
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : t.rows) rows.push_back(escaped(r));
  std::vector<std::size_t> w(columns.size());
  for (std::size_t c = 0; c < w.size(); ++c) {
    w[c] = display_width(columns[c]);
    for (auto& r : rows) w[c] = std::max(w[c], display_width(r[c]));
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s = "|";
    for (std::size_t c = 0; c < cells.size(); ++c) {
      s += ' ';
      s += pad_right(cells[c], w[c]);
      s += " |";
    }
    return s + "\n";
  };
  std::string out = "### " + one_line(t.title) + "\n\n" + line(columns) + "|";
  for (std::size_t c = 0; c < w.size(); ++c) out += std::string(w[c] + 2, '-') + "|";
  out += "\n";
  for (auto& r : rows) out += line(r);
  for (auto& n : t.notes) out += "\n" + one_line(n) + "\n";
  for (auto& n : t.provenance) out += "\n" + one_line(n) + "\n";
  return out;
}

}  // namespace

std::string render(const std::vector<Table>& tables, Format f) {
  std::string out;
  if (f == Format::json) {
    nlohmann::json j = nlohmann::json::array();
    for (auto& t : tables) {
      nlohmann::json tj = t.to_json();
      // Beside each row's text, its numeric cells as numbers keyed "<column> [<unit>]".
      tj["values"] = nlohmann::json::array();
      for (auto& r : t.rows) {
        nlohmann::json v = nlohmann::json::object();
        for (std::size_t c = 0; c < r.size(); ++c) {
          std::string unit;
          nlohmann::json n = cell_numbers(r[c], unit);
          if (!n.is_null()) v[t.columns[c] + (unit.empty() ? "" : " [" + unit + "]")] = std::move(n);
        }
        tj["values"].push_back(std::move(v));
      }
      j.push_back(std::move(tj));
    }
    return j.dump(2) + "\n";
  }
  for (std::size_t i = 0; i < tables.size(); ++i) {
    const Table& t = tables[i];
    if (i) out += "\n";
    if (f == Format::markdown) {
      out += markdown(t);
      continue;
    }
    out += "# " + one_line(t.title) + "\n";
    // Appended piece by piece: g++ 12 warns (-Wrestrict, a false positive) on "," + string here.
    const auto csv_line = [&out](const std::vector<std::string>& cells) {
      for (std::size_t c = 0; c < cells.size(); ++c) {
        if (c) out += ',';
        out += csv_cell(cells[c]);
      }
      out += '\n';
    };
    csv_line(t.columns);
    for (auto& r : t.rows) csv_line(r);
    // The summary and paper lines, as the title: a comment line each, so that a reader of the CSV
    // has the table whole.
    for (auto& n : t.notes) out += "# " + one_line(n) + "\n";
    for (auto& n : t.provenance) out += "# " + one_line(n) + "\n";
  }
  return out;
}

std::size_t display_width(std::string_view s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;  // continuation bytes add no column
  return n;
}

std::string pad_right(const std::string& s, std::size_t width) {
  const std::size_t w = display_width(s);
  return w >= width ? s : s + std::string(width - w, ' ');
}

namespace {

// Digits from i on; returns the index past them.
std::size_t skip_digits(std::string_view s, std::size_t i) {
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
  return i;
}

// A number as the tables write it: an optional minus, an integer (plain, or grouped in threes by
// commas), an optional fraction, an optional exponent. Hand-written rather than std::regex,
// whose instantiation costs this file most of its compile time.
bool is_number(std::string_view s) {
  std::size_t i = s.starts_with('-') ? 1 : 0;
  const std::size_t int_start = i;
  i = skip_digits(s, i);
  const std::size_t lead = i - int_start;
  if (lead == 0) return false;
  if (i < s.size() && s[i] == ',') {
    if (lead > 3) return false;
    while (i < s.size() && s[i] == ',') {
      const std::size_t group = i + 1;
      i = skip_digits(s, group);
      if (i - group != 3) return false;
    }
  }
  if (i < s.size() && s[i] == '.') {
    const std::size_t frac = i + 1;
    i = skip_digits(s, frac);
    if (i == frac) return false;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    const std::size_t exp = i;
    i = skip_digits(s, exp);
    if (i == exp) return false;
  }
  return i == s.size();
}

}  // namespace

nlohmann::json cell_numbers(const std::string& cell, std::string& unit) {
  static const std::set<std::string> units = {"B", "KiB", "MiB", "GiB", "ms", "s", "%", "ULP"};
  static const std::set<std::string> separators = {"/", "±", "+", "-", "\u2212"};
  std::vector<double> values;
  std::vector<std::string> value_units;
  std::istringstream in(cell);
  std::string tok;
  while (in >> tok) {
    while (!tok.empty() && (tok.front() == '(' || tok.front() == '[')) tok.erase(0, 1);
    while (!tok.empty() && (tok.back() == ')' || tok.back() == ']' || tok.back() == ',')) tok.pop_back();
    if (tok.empty() || separators.count(tok)) continue;
    if (units.count(tok)) {
      if (values.empty() || !value_units.back().empty()) return nullptr;
      value_units.back() = tok;
      continue;
    }
    std::string suffix;
    if (tok.back() == '%') {
      suffix = "%";
      tok.pop_back();
    }
    if (tok.starts_with("~")) tok.erase(0, 1);  // a value cut for the cell (projection-oracle)
    if (tok.starts_with("\u2212")) tok.replace(0, std::string_view("\u2212").size(), "-");
    if (!is_number(tok)) return nullptr;
    tok.erase(std::remove(tok.begin(), tok.end(), ','), tok.end());
    // A value no double holds (1e999, 400 digits) stays text.
    const auto v = parse_real(tok);
    if (!v) return nullptr;
    values.push_back(*v);
    value_units.push_back(suffix);
  }
  if (values.empty()) return nullptr;
  for (const auto& u : value_units)
    if (u != value_units.front()) return nullptr;  // mixed units: no one key says what they are
  unit = value_units.front();
  if (values.size() == 1) return values.front();
  return values;
}

std::string fmt_sci(double v, int digits) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*e", digits - 1, v);
  return b;
}

std::string fmt_fixed(double v, int decimals) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", decimals, v);
  return b;
}

std::string fmt_mib(double bytes) { return fmt_fixed(bytes / (1024.0 * 1024.0), 1) + " MiB"; }

std::string fmt_count(long long n) {
  std::string s = std::to_string(n < 0 ? -n : n), out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return n < 0 ? "-" + out : out;
}

void note_recording(Table& t, const std::string& what, const std::string& file, std::optional<std::uint64_t> seed) {
  t.notes.push_back(what + ": " + std::filesystem::path(file).filename().string() +
                    (seed ? " (SynthInit seed " + std::to_string(*seed) + ")" : ""));
  t.provenance.push_back(what + ": " + file);
}

}  // namespace psi::report
