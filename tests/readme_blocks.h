#pragma once
// The README's fenced blocks with the directive on the line before each (<!-- readme-test: ... -->):
// what the README test checks block by block, and where the Slurm test finds the commands it runs.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace psi::testing {

inline const std::filesystem::path kReadme = std::filesystem::path(PSI_TEST_DATA) / ".." / ".." / "README.md";

struct ReadmeBlock {
  int line = 0;           // of the opening fence, 1-based
  std::string directive;  // the text after "readme-test: "
  std::string info;       // the fence's info string ("sh", "python", "")
  std::vector<std::string> body;
};

// Lines without their trailing blanks and carriage returns.
inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) {
    while (!l.empty() && (l.back() == ' ' || l.back() == '\r')) l.pop_back();
    out.push_back(l);
  }
  return out;
}

inline std::string file_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline std::vector<ReadmeBlock> readme_blocks() {
  const auto lines = lines_of(file_text(kReadme));
  static const std::regex directive(R"(^<!-- readme-test: (.*) -->$)");
  std::vector<ReadmeBlock> blocks;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (!lines[i].starts_with("```")) continue;
    ReadmeBlock b;
    b.line = int(i) + 1;
    b.info = lines[i].substr(3);
    std::smatch m;
    if (i > 0 && std::regex_match(lines[i - 1], m, directive)) b.directive = m[1];
    for (++i; i < lines.size() && !lines[i].starts_with("```"); ++i) b.body.push_back(lines[i]);
    blocks.push_back(std::move(b));
  }
  return blocks;
}

}  // namespace psi::testing
