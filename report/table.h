#pragma once
// A result table: what every experiment prints and stores in its report, so that
// `psi report FILE` re-renders it from the file alone (Markdown, CSV or JSON).
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace psi::report {

struct Table {
  std::string title;
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> notes;  // lines printed under the table
  // Where the inputs lay (paths as given), printed after the notes. Two runs on the same
  // recordings reached by other paths (another machine, a linked folder) differ only here:
  // psi compare shows such a difference and does not count it (its JSON key, kProvenanceKey,
  // is what a report declares as the tables' provenance field).
  std::vector<std::string> provenance;
  static constexpr const char* kProvenanceKey = "provenance";
  // The columns whose cells measure time (wall times, rates, ratios of them), named as in
  // `columns`, or are measured on the machine as a time is (a process's resident peak): they
  // differ from run to run, and psi compare counts them apart. Written always
  // (empty: none), so that a reader never has to guess from a header's words.
  std::vector<std::string> time_columns;

  void add_row(std::vector<std::string> row);
  nlohmann::json to_json() const;  // psi::Error (run_failed) on a time column that is no column
  static Table from_json(const nlohmann::json& j);  // psi::Error on a malformed table
};

enum class Format { markdown, csv, json };
Format parse_format(const std::string& name);  // "markdown"|"md", "csv", "json"
std::string render(const std::vector<Table>& tables, Format f);

// The columns a UTF-8 string takes on a terminal: one per code point (psi's text has no wide or
// combining characters), so "±" or "§" counts once although it is two bytes.
std::size_t display_width(std::string_view s);
// `s` followed by spaces up to `width` display columns.
std::string pad_right(const std::string& s, std::size_t width);

// One CSV field: quoted, its quotes doubled, where it holds a comma, a quote or a line end.
std::string csv_cell(const std::string& s);

// The numbers a rendered cell holds, for JSON beside the text: null unless the cell is only
// numbers (thousands separators, exponents, a leading '~' or '−' allowed), one unit shared by all
// of them (B, KiB, MiB, GiB, ms, s, %, ULP) and separators ('/', '±', brackets). `unit` gets the
// unit ("" for none); one number gives a number, several an array in the order written.
nlohmann::json cell_numbers(const std::string& cell, std::string& unit);

// Number formatting shared by the drivers.
std::string fmt_sci(double v, int digits = 3);      // 1.234e-03
std::string fmt_fixed(double v, int decimals = 2);  // 12.35
std::string fmt_mib(double bytes);                  // "12.0 MiB"
std::string fmt_count(long long n);                 // 1,032,192
// Names the recording a case used, so that tables of two recording sets cannot be taken for each
// other: a note with what identifies it wherever it lies ("<what>: <file name> (SynthInit seed
// S)") and a provenance line with the path as given ("<what>: <file>").
void note_recording(Table& t, const std::string& what, const std::string& file, std::optional<std::uint64_t> seed);

}  // namespace psi::report
