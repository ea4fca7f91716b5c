#pragma once
// The checked documents' fenced blocks with the directive on the line before each
// (<!-- readme-test: ... -->): what the README test checks block by block, and where the Slurm
// test finds the commands it runs. The checked documents are README.md and every page under
// docs/ that carries a directive, so an example keeps its check wherever it moves.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace psi::testing {

inline const std::filesystem::path kRepo = std::filesystem::path(PSI_TEST_DATA) / ".." / "..";
inline const std::filesystem::path kReadme = kRepo / "README.md";

struct ReadmeBlock {
  std::string file;       // the document, relative to the repository ("README.md", "docs/x.md")
  int line = 0;           // of the opening fence, 1-based
  std::string directive;  // the text after "readme-test: "
  std::string info;       // the fence's info string ("sh", "python", "")
  std::vector<std::string> body;
  std::string where() const { return file + ":" + std::to_string(line); }
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

// README.md, then every docs/ page with a directive in it, by path.
inline std::vector<std::string> checked_documents() {
  std::vector<std::string> docs;
  for (const auto& f : std::filesystem::recursive_directory_iterator(kRepo / "docs"))
    if (f.is_regular_file() && f.path().extension() == ".md" &&
        file_text(f.path()).find("<!-- readme-test: ") != std::string::npos)
      docs.push_back(std::filesystem::relative(f.path(), kRepo).generic_string());
  std::sort(docs.begin(), docs.end());
  docs.insert(docs.begin(), "README.md");
  return docs;
}

inline std::vector<ReadmeBlock> blocks_of(const std::string& doc) {
  const auto lines = lines_of(file_text(kRepo / doc));
  static const std::regex directive(R"(^<!-- readme-test: (.*) -->$)");
  std::vector<ReadmeBlock> blocks;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (!lines[i].starts_with("```")) continue;
    ReadmeBlock b;
    b.file = doc;
    b.line = int(i) + 1;
    b.info = lines[i].substr(3);
    std::smatch m;
    if (i > 0 && std::regex_match(lines[i - 1], m, directive)) b.directive = m[1];
    for (++i; i < lines.size() && !lines[i].starts_with("```"); ++i) b.body.push_back(lines[i]);
    blocks.push_back(std::move(b));
  }
  return blocks;
}

// Every checked document's blocks, in document order.
inline std::vector<ReadmeBlock> readme_blocks() {
  std::vector<ReadmeBlock> all;
  for (const auto& doc : checked_documents())
    for (auto& b : blocks_of(doc)) all.push_back(std::move(b));
  return all;
}

}  // namespace psi::testing
