// docs/architecture.md's folder table, held to the sources: every folder that holds psi's code
// is a row, every row is a folder, and every include from one folder into another is one the
// row allows. The build refuses a link that runs back up, but only once a symbol is used; an
// include alone would slip through, and the page would drift from the house.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/readme_blocks.h"

namespace fs = std::filesystem;

namespace {

const fs::path kRoot = fs::path(PSI_TEST_DATA) / ".." / "..";
// Top-level folders that are not layers: programs and their helpers (which may include any
// layer), scripts, pages, build files.
bool is_layer_root(const std::string& name) {
  static const std::set<std::string> others = {"tests", "bench", "fuzz", "scripts", "docs", "cmake", "out"};
  return !name.empty() && name[0] != '.' && name.rfind("build", 0) != 0 && !others.count(name);
}

// Every source file of the layers, as a path relative to the repository.
std::vector<std::string> layer_sources() {
  std::vector<std::string> files;
  for (const auto& top : fs::directory_iterator(kRoot)) {
    if (!top.is_directory() || !is_layer_root(top.path().filename().string())) continue;
    for (const auto& e : fs::recursive_directory_iterator(top.path())) {
      const auto x = e.path().extension();
      if (e.is_regular_file() && (x == ".h" || x == ".cpp" || x == ".cu" || x == ".cuh"))
        files.push_back(fs::relative(e.path(), kRoot).generic_string());
    }
  }
  return files;
}

// The folder (layer) a repository path belongs to: engine/x/... for engine's sub-layers (the CPU
// backend within engine/backend), else its first component; "engine" for engine's own files.
std::string layer_of(const std::string& path) {
  const auto first = path.find('/');
  if (first == std::string::npos) return "";
  const std::string top = path.substr(0, first);
  if (top != "engine") return top;
  const auto second = path.find('/', first + 1);
  if (second == std::string::npos) return "engine";
  const std::string sub = path.substr(0, second);
  if (sub == "engine/backend" && path.compare(second + 1, 5, "cuda/") == 0) return "engine/backend/cuda";
  return sub;
}

struct Row {
  std::set<std::string> may_include;
};

// The table under "## Folders": | `folder` | library | owns | `a`, `b` or — |.
std::map<std::string, Row> folder_table() {
  std::istringstream in(psi::testing::file_text(kRoot / "docs" / "architecture.md"));
  std::map<std::string, Row> rows;
  std::string line;
  bool in_section = false;
  const std::regex cell_name("`([^`]+)`");
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) in_section = line == "## Folders";
    if (!in_section || line.rfind("| `", 0) != 0) continue;
    std::vector<std::string> cells;
    std::string cell;
    std::istringstream cs(line.substr(1));
    while (std::getline(cs, cell, '|')) cells.push_back(cell);
    if (cells.size() != 4) {
      ADD_FAILURE() << "docs/architecture.md: a row of " << cells.size() << " cells, not four: " << line;
      continue;
    }
    std::smatch m;
    if (!std::regex_search(cells[0], m, cell_name)) continue;
    Row row;
    const std::string& allowed = cells[3];
    for (std::sregex_iterator it(allowed.begin(), allowed.end(), cell_name), end; it != end; ++it)
      row.may_include.insert((*it)[1]);
    EXPECT_TRUE(rows.emplace(m[1], row).second) << "docs/architecture.md: " << m[1] << " is two rows";
  }
  return rows;
}

TEST(Architecture, TheTableHasRows) { EXPECT_GT(folder_table().size(), 10u); }

TEST(Architecture, EveryFolderOfCodeIsARowAndEveryRowAFolder) {
  const auto rows = folder_table();
  std::set<std::string> layers;
  for (const auto& rel : layer_sources()) layers.insert(layer_of(rel));
  for (const auto& l : layers) EXPECT_TRUE(rows.count(l)) << l << " holds code but is no row of docs/architecture.md";
  for (const auto& [folder, row] : rows) {
    EXPECT_TRUE(layers.count(folder)) << "docs/architecture.md names " << folder << ", which holds no code";
    for (const auto& to : row.may_include)
      EXPECT_TRUE(rows.count(to)) << "docs/architecture.md: " << folder << " may include " << to << ", no row";
  }
}

TEST(Architecture, EveryIncludeIsOneItsFolderMayMake) {
  const auto rows = folder_table();
  const std::regex include_line("^#include \"([^\"]+)\"");
  int checked = 0;
  for (const auto& rel : layer_sources()) {
    const std::string folder = layer_of(rel);
    const auto row = rows.find(folder);
    if (row == rows.end()) continue;  // EveryFolderOfCodeIsARowAndEveryRowAFolder says so
    std::istringstream in(psi::testing::file_text(kRoot / rel));
    std::string line;
    while (std::getline(in, line)) {
      std::smatch m;
      if (!std::regex_search(line, m, include_line)) continue;
      const std::string to = layer_of(m[1]);
      if (to.empty() || to == folder) continue;  // its own folder, or generated
      if (!rows.count(to)) {
        // a program's helper (tests/, bench/, fuzz/) is no layer's to include; anything else is
        // a system header
        EXPECT_FALSE(fs::is_directory(kRoot / to.substr(0, to.find('/')))) << rel << " includes " << m[1];
        continue;
      }
      ++checked;
      EXPECT_TRUE(row->second.may_include.count(to))
          << rel << " includes " << m[1] << ": " << folder << " may not include " << to
          << " (docs/architecture.md, Folders)";
    }
  }
  EXPECT_GT(checked, 100);
}

}  // namespace
