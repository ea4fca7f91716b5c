// Rendering of result tables: columns padded by display width (multi-byte characters such as
// "±" take one column), and the JSON form's numeric fields beside each rendered cell.
#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "report/table.h"

using namespace psi::report;

namespace {

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

}  // namespace

TEST(TableRender, DisplayWidthCountsCodePoints) {
  EXPECT_EQ(display_width("abc"), 3u);
  EXPECT_EQ(display_width("1.2 ± 0.3"), 9u);
  EXPECT_EQ(display_width("§IV-C"), 5u);
  EXPECT_EQ(display_width("Δ = a − b"), 9u);
  EXPECT_EQ(pad_right("§IV", 5), "§IV  ");
  EXPECT_EQ(pad_right("toolong", 3), "toolong");
}

TEST(TableRender, MarkdownColumnsLineUpWithMultiByteCells) {
  Table t;
  t.title = "t";
  t.columns = {"schedule", "wall (ms, mean ± SD)", "peak"};
  t.add_row({"baseline", "173.8 ± 45.4", "1.2 MiB / 1.7 MiB"});
  t.add_row({"§IV-C", "1.0 ± 0.1", "Δ −3"});
  std::vector<std::string> table;
  for (const auto& l : lines_of(render({t}, Format::markdown)))
    if (l.starts_with("|")) table.push_back(l);
  ASSERT_EQ(table.size(), 4u);
  for (const auto& l : table) EXPECT_EQ(display_width(l), display_width(table[1])) << l;
}

TEST(TableRender, CellNumbers) {
  std::string unit;
  EXPECT_EQ(cell_numbers("1.2 MiB / 1.7 MiB", unit), nlohmann::json({1.2, 1.7}));
  EXPECT_EQ(unit, "MiB");
  EXPECT_EQ(cell_numbers("173.8 ± 45.4", unit), nlohmann::json({173.8, 45.4}));
  EXPECT_EQ(unit, "");
  EXPECT_EQ(cell_numbers("63,496 / 315,392", unit), nlohmann::json({63496, 315392}));
  EXPECT_EQ(cell_numbers("76 / 294 / 0", unit), nlohmann::json({76, 294, 0}));
  EXPECT_EQ(cell_numbers("3.428e-03 / 179,084", unit), nlohmann::json({3.428e-3, 179084}));
  EXPECT_EQ(cell_numbers("~5.20100118592e-04", unit), nlohmann::json(5.20100118592e-4));
  EXPECT_EQ(cell_numbers("−1.5", unit), nlohmann::json(-1.5));
  EXPECT_EQ(cell_numbers("12.5%", unit), nlohmann::json(12.5));
  EXPECT_EQ(unit, "%");
  EXPECT_EQ(cell_numbers("(29, 2788)", unit), nlohmann::json({29, 2788}));
  EXPECT_EQ(cell_numbers("-1,234.5E+2", unit), nlohmann::json(-123450.0));
  for (const char* text : {"yes (6 runs)", "psi dense", "0x3a05 (1 ULP)", "5 MiB / 3 ms", "1,2345", "", "MiB", "1234,567",
                           "1,23", "1.", ".5", "1e", "1e+", "--1", "1.2.3", "1e5x"})
    EXPECT_TRUE(cell_numbers(text, unit).is_null()) << text;
}

TEST(TableRender, JsonHasNumbersBesideTheText) {
  Table t;
  t.title = "t";
  t.columns = {"schedule", "wall (ms, mean ± SD)", "managed peak / bound", "bitwise"};
  t.add_row({"baseline", "173.8 ± 45.4", "1.2 MiB / 1.7 MiB", "yes (6 runs)"});
  const auto j = nlohmann::json::parse(render({t}, Format::json));
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["rows"][0][2], "1.2 MiB / 1.7 MiB");  // the text stays
  const auto& v = j[0]["values"][0];
  EXPECT_EQ(v["managed peak / bound [MiB]"], nlohmann::json({1.2, 1.7}));
  EXPECT_EQ(v["wall (ms, mean ± SD)"], nlohmann::json({173.8, 45.4}));
  EXPECT_FALSE(v.contains("schedule"));
  EXPECT_FALSE(v.contains("bitwise"));
}

TEST(TableRender, PsiListColumnsLineUp) {
  FILE* p = popen((std::string(PSI_BINARY) + " list").c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  ASSERT_EQ(pclose(p), 0);
  // Where the summary starts, in display columns: after the second run of two spaces.
  auto summary_column = [](const std::string& l) {
    const std::size_t a = l.find("  "), b = l.find_first_not_of(' ', a);
    const std::size_t c = l.find("  ", b), d = l.find_first_not_of(' ', c);
    return display_width(l.substr(0, d));
  };
  const auto lines = lines_of(out);
  ASSERT_EQ(lines.size(), 10u) << out;
  for (const auto& l : lines) EXPECT_EQ(summary_column(l), summary_column(lines[0])) << l;
}

// Cells, titles and notes can quote names from files: a '|' or a newline in them must neither
// end a cell nor forge a line of the Markdown table (round three of the trust issue, class 7).
TEST(TableRender, MarkdownEscapesPipesAndNewlines) {
  Table t;
  t.title = "title\n### forged";
  t.columns = {"dataset", "value"};
  t.add_row({"/a|b\n| forged | row |", "1"});
  t.notes = {"note\n| forged | note |"};
  const auto lines = lines_of(render({t}, Format::markdown));
  // Title, blank, header, rule, one row, blank, one note.
  ASSERT_EQ(lines.size(), 7u) << render({t}, Format::markdown);
  EXPECT_EQ(lines[0], "### title\\n### forged");
  EXPECT_EQ(lines[4].rfind("| /a\\|b\\n\\| forged \\| row \\| | 1", 0), 0u) << lines[4];
  // Exactly the table's three unescaped pipes on the row.
  int pipes = 0;
  for (std::size_t i = 0; i < lines[4].size(); ++i) pipes += lines[4][i] == '|' && (i == 0 || lines[4][i - 1] != '\\');
  EXPECT_EQ(pipes, 3) << lines[4];
  EXPECT_EQ(lines[6], "note\\n| forged | note |");
  // CSV quotes a cell holding a carriage return as it does a newline.
  Table c;
  c.title = "c";
  c.columns = {"x"};
  c.add_row({"a\rb"});
  EXPECT_EQ(render({c}, Format::csv), "# c\nx\n\"a\rb\"\n");
}

// CSV gives a table whole, as Markdown does: its summary and paper lines (notes) and provenance
// follow the rows as comment lines, one line each.
TEST(TableRender, CsvCarriesTheNotes) {
  Table t;
  t.title = "t";
  t.columns = {"x"};
  t.add_row({"1"});
  t.notes = {"modified beats baseline: video 5/9", "paper (Table II)\nforged"};
  t.provenance = {"recording: /a/b.h5"};
  EXPECT_EQ(render({t}, Format::csv),
            "# t\nx\n1\n# modified beats baseline: video 5/9\n# paper (Table II)\\nforged\n# recording: /a/b.h5\n");
}
