// The README's commands and examples, executed, and those of every docs/ page that carries a
// directive (tests/readme_blocks.h: the checked documents): every fenced block of a checked
// document carries a directive (an HTML comment on the line before it) saying how it is checked,
// so a block added without one, a command that stops working or an example output that drifts
// from what psi prints fails here, named by file and line.
//
//   <!-- readme-test: run -->                 the shell block runs as written (exit 0)
//   <!-- readme-test: lines: psi ARGS -->     every line of the block is a line of `psi ARGS`'s
//                                             output, in order (exact numbers included)
//   <!-- readme-test: tables: psi ARGS -->    the block's tables are `psi ARGS`'s: the same
//                                             headers, rows and cells, except the cells of a
//                                             column the run's report calls a time column (its
//                                             table's time_columns: wall times, rates), which
//                                             differ from run to run; its other lines appear as
//                                             written
//   <!-- readme-test: python after: psi ARGS -->  `psi ARGS` first, then the Python snippet
//                                             (without h5py here: the file and dataset it reads
//                                             are checked instead)
//   <!-- readme-test: file: PATH -->          the block is the repository's file PATH, line for line
//   <!-- readme-test: slurm -->               run as written by the Slurm test (tests/test_slurm.cpp)
//                                             on a single-node cluster of its own
//   <!-- readme-test: skip: WHY -->           not run here, and why
//
// A prose paragraph (the lines after the directive, up to a blank line) may carry one too:
//
//   <!-- readme-test: numbers: psi ARGS; psi ARGS2; not WHAT -->
//                                             every number in the paragraph is one that the
//                                             parts give, as printed or rounded to the digits
//                                             the document gives (thousands commas aside), except
//                                             the numbers of a "not" part, which says what they
//                                             are (a setting, the paper's, a wall time); a part is
//                                             `psi ARGS` (what it prints), `program NAME` (what the
//                                             test program NAME prints, run whole) or `rows PATH#HEADING`
//                                             (how many rows the first table under that heading of
//                                             the repository's file PATH has; PATH from the root)
//
// A table of columns (docs/tables.md) carries
//
//   <!-- readme-test: columns: psi ARGS -->  its rows' first cells, each one code span, are the
//                                             header of the first table `psi ARGS` prints, in
//                                             order, and it prints a paper line; every
//                                             experiment `psi list` gives a paper Table for has one
//
// and every paragraph with a number in it must (Readme.EveryProseNumberIsChecked), in every
// checked document: a page that takes one directive is checked whole. A paragraph is
// a run of non-blank lines outside the fenced blocks, headings and directive lines apart: a list,
// a table or an image with its caption is one. Its numbers are those of prose_numbers below.
//
// Commands run in a scratch folder (their out/ goes there); build/psi and ../shared/ are the
// psi under test and the recordings. The usage table (docs/commands.md) is checked against each
// command's --help, the experiments table against psi list, and docs/index.md against docs/.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hdf5/h5.h"
#include "tests/readme_blocks.h"

namespace fs = std::filesystem;

namespace {

using psi::testing::checked_documents;
using psi::testing::kRepo;
using psi::testing::lines_of;
using Block = psi::testing::ReadmeBlock;
using psi::testing::readme_blocks;

std::string slurp(const fs::path& p) { return psi::testing::file_text(p); }

class Scratch {
 public:
  Scratch() : dir_(fs::temp_directory_path() / ("psi_readme_" + std::to_string(::getpid()))) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~Scratch() { fs::remove_all(dir_); }
  const fs::path& dir() const { return dir_; }

  struct Run {
    int status = -1;
    std::string out, err;
  };
  // A bash script run in the scratch folder.
  Run shell(const std::string& script) const {
    const fs::path file = dir_ / "script.sh";
    std::ofstream(file) << "set -e -o pipefail\n" << script << "\n";
    const std::string cmd = "cd '" + dir_.string() + "' && bash script.sh >stdout.txt 2>stderr.txt";
    const int st = std::system(cmd.c_str());
    return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, slurp(dir_ / "stdout.txt"), slurp(dir_ / "stderr.txt")};
  }
  // `psi ARGS` (ARGS as a directive gives them), each distinct one run once.
  const Run& psi(const std::string& args) {
    auto it = cache_.find(args);
    if (it == cache_.end()) it = cache_.emplace(args, shell(std::string(PSI_BINARY) + " " + args)).first;
    return it->second;
  }

 private:
  fs::path dir_;
  std::map<std::string, Run> cache_;
};

// The block's commands as the documents' reader runs them from the repository root.
std::string as_run_here(std::string text) {
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"build/psi", PSI_BINARY}, {"../shared/", std::string(PSI_SHARED_DIR) + "/"}}) {
    for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
      text.replace(at, from.size(), to);
  }
  return text;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

std::string psi_args(const std::string& directive, const std::string& kind) {
  const std::string prefix = kind + ": psi ";
  return directive.starts_with(prefix) ? directive.substr(prefix.size()) : std::string();
}

// ---- Markdown tables ------------------------------------------------------------------------

std::vector<std::string> cells(const std::string& line) {
  std::vector<std::string> out;
  std::string cell;
  for (std::size_t i = 1; i < line.size(); ++i) {
    if (line[i] == '|' && line[i - 1] != '\\') {
      const auto a = cell.find_first_not_of(' '), b = cell.find_last_not_of(' ');
      out.push_back(a == std::string::npos ? "" : cell.substr(a, b - a + 1));
      cell.clear();
    } else {
      cell += line[i];
    }
  }
  return out;
}

bool is_rule(const std::vector<std::string>& c) {
  for (const auto& x : c)
    if (x.empty() || x.find_first_not_of("-:") != std::string::npos) return false;
  return !c.empty();
}

struct MdTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};


std::vector<MdTable> tables_of(const std::vector<std::string>& lines) {
  std::vector<MdTable> out;
  bool in_table = false;
  for (const auto& l : lines) {
    if (!l.starts_with("|")) {
      in_table = false;
      continue;
    }
    const auto c = cells(l);
    if (!in_table) {
      out.push_back({c, {}});
      in_table = true;
    } else if (!is_rule(c)) {
      out.back().rows.push_back(c);
    }
  }
  return out;
}

// ---- Numbers in prose -----------------------------------------------------------------------

// A number as written: digits with thousands commas, a fraction, an exponent ("54,869",
// "4.07e-4"); one glued to a letter before it ("attn1", "H200") is a name, not a number.
struct Number {
  std::string text;  // without its commas
  double value = 0;
  int digits = 0;    // significant digits, for a number with a fraction or an exponent
  bool integral = true;
  std::size_t at = 0, end = 0;  // where it is in the text
};

std::vector<Number> numbers_in(const std::string& s) {
  const auto digit = [&](std::size_t k) { return k < s.size() && std::isdigit(static_cast<unsigned char>(s[k])); };
  std::vector<Number> out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (!digit(i) || (i > 0 && (std::isalnum(static_cast<unsigned char>(s[i - 1])) || s[i - 1] == '_' || s[i - 1] == '.')))
      continue;
    Number n;
    n.at = i;
    std::size_t j = i;
    for (; digit(j) || (s[j] == ',' && digit(j + 1) && digit(j + 2) && digit(j + 3) && !digit(j + 4)); ++j)
      if (s[j] != ',') n.text += s[j];
    if (j < s.size() && s[j] == '.' && digit(j + 1)) {
      n.integral = false;
      for (n.text += s[j++]; digit(j); ++j) n.text += s[j];
    }
    if (j < s.size() && (s[j] == 'e' || s[j] == 'E')) {
      const std::size_t k = j + 1 + (j + 1 < s.size() && (s[j + 1] == '-' || s[j + 1] == '+'));
      if (digit(k)) {
        n.integral = false;
        n.text += s.substr(j, k - j);
        for (j = k; digit(j); ++j) n.text += s[j];
      }
    }
    n.value = std::stod(n.text);
    const std::string mantissa = n.text.substr(0, n.text.find_first_of("eE"));
    for (std::size_t k = mantissa.find_first_not_of("0."); k < mantissa.size(); ++k) n.digits += mantissa[k] != '.';
    n.end = j;
    out.push_back(n);
    i = j;
  }
  return out;
}

// The numbers of a document's text, by one rule. Code spans (`...`) and link targets ("](...)") are
// left out: they are commands, options, file names and quoted output, as typed. A number is what
// numbers_in reads that is not part of a name: not glued to a letter before or after it ("H200",
// "sm_90", "bf16", "22B"), and not after a hyphen or plus that follows a word with a letter in it
// ("SHA-256", "AVX-512", "C++20", "LTX-2", "x86-64"); "8+3", "16-wide" and "2-core" are numbers.
std::vector<Number> prose_numbers(const std::string& text) {
  static const std::regex code("`[^`]*`"), target(R"(\]\([^)]*\))");
  const std::string s = std::regex_replace(std::regex_replace(text, code, " "), target, "]");
  const auto letter = [&](std::size_t k) { return std::isalpha(static_cast<unsigned char>(s[k])) || s[k] == '_'; };
  std::vector<Number> out;
  for (const Number& n : numbers_in(s)) {
    if (n.end < s.size() && letter(n.end)) continue;
    std::size_t k = n.at;
    while (k > 0 && (s[k - 1] == '-' || s[k - 1] == '+')) --k;
    bool name = false;
    if (k < n.at)
      for (; k > 0 && std::isalnum(static_cast<unsigned char>(s[k - 1])); --k) name = name || letter(k - 1);
    if (!name) out.push_back(n);
  }
  return out;
}

// A checked document's paragraphs (see the top of the file), each with the directive before it,
// if any.
struct Paragraph {
  std::string file;      // the document, from the repository root
  std::size_t line = 0;  // of its first line, 1-based
  std::string directive, text;
  std::string where() const { return file + ":" + std::to_string(line); }
};

std::vector<Paragraph> paragraphs_of(const std::string& doc) {
  static const std::regex directive(R"(^<!-- readme-test: (.*) -->$)");
  const auto lines = lines_of(slurp(kRepo / doc));
  const auto apart = [&](std::size_t k) {
    return lines[k].empty() || lines[k].starts_with("```") || lines[k].starts_with("#") || lines[k].starts_with("<!--");
  };
  std::vector<Paragraph> out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].starts_with("```")) {
      for (++i; i < lines.size() && !lines[i].starts_with("```"); ++i) {
      }
      continue;
    }
    if (apart(i)) continue;
    Paragraph p;
    p.file = doc;
    p.line = i + 1;
    std::smatch m;
    if (i > 0 && std::regex_match(lines[i - 1], m, directive)) p.directive = m[1];
    for (; i < lines.size() && !apart(i); ++i) p.text += lines[i] + "\n";
    --i;
    out.push_back(p);
  }
  return out;
}

std::vector<Paragraph> readme_paragraphs() {
  std::vector<Paragraph> all;
  for (const auto& doc : checked_documents())
    for (auto& p : paragraphs_of(doc)) all.push_back(std::move(p));
  return all;
}

// `n` as `out` prints it: the same integer, or a value that rounds to it at n's digits.
bool printed(const Number& n, const std::vector<Number>& out) {
  const auto rounded = [&](double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*e", std::max(n.digits, 1) - 1, v);
    return std::string(buf);
  };
  for (const Number& o : out)
    if (n.integral ? o.integral && o.text == n.text : rounded(o.value) == rounded(n.value)) return true;
  return false;
}

}  // namespace

TEST(Readme, ProseNumbersArePrinted) {
  Scratch s;
  int checked = 0;
  for (const Paragraph& p : readme_paragraphs()) {
    if (!p.directive.starts_with("numbers: ")) continue;
    ++checked;
    const std::string where = p.file + ":" + std::to_string(p.line - 1);
    std::vector<Number> out, exempt;
    std::string sources;
    const std::string parts = p.directive.substr(9);
    for (std::size_t at = 0; at < parts.size();) {
      const std::size_t end = std::min(parts.find("; ", at), parts.size());
      const std::string part = parts.substr(at, end - at);
      at = end + 2;
      if (part.starts_with("not ")) {
        for (const Number& n : numbers_in(part)) exempt.push_back(n);
        continue;
      }
      if (part.starts_with("rows ")) {
        // The table's rows: the lines starting with '|' after its header and rule.
        const std::size_t hash = part.find('#');
        ASSERT_NE(hash, std::string::npos) << where << ": '" << part << "' is not rows PATH#HEADING";
        const auto file = lines_of(slurp(kRepo / part.substr(5, hash - 5)));
        const std::string heading = part.substr(hash + 1);
        auto it = std::find_if(file.begin(), file.end(), [&](const std::string& l) {
          return l.starts_with("#") && l.substr(l.find_first_not_of('#')) == " " + heading;
        });
        ASSERT_NE(it, file.end()) << where << ": no heading '" << heading << "' in " << part;
        it = std::find_if(it, file.end(), [](const std::string& l) { return l.starts_with("|"); });
        long rows = -2;
        for (; it != file.end() && it->starts_with("|"); ++it) ++rows;
        ASSERT_GT(rows, 0) << where << ": no table under '" << heading << "' in " << part;
        for (const Number& n : numbers_in(std::to_string(rows))) out.push_back(n);
      } else {
        const bool program = part.starts_with("program ");
        ASSERT_TRUE(program || part.starts_with("psi "))
            << where << ": '" << part << "' is none of psi ARGS, program NAME, rows PATH#HEADING, not WHAT";
        const auto r = program ? s.shell("'" + (fs::path(PSI_TEST_PROGRAMS) / part.substr(8)).string() + "'")
                               : s.psi(as_run_here(part.substr(4)));
        ASSERT_EQ(r.status, 0) << where << ": " << part << "\n" << r.err;
        for (const Number& n : numbers_in(r.out)) out.push_back(n);
      }
      sources += (sources.empty() ? "" : ", ") + part;
    }
    for (const Number& n : prose_numbers(p.text)) {
      if (std::any_of(exempt.begin(), exempt.end(), [&](const Number& e) { return e.text == n.text; })) continue;
 EXPECT_TRUE(printed(n, out)) << p.where() << ": " << n.text << " is not a number " << sources
                                   << " gives (nor one of its 'not' part), in\n"
                                   << p.text;
    }
  }
  EXPECT_GT(checked, 0);
}

// Every paragraph with a number in it says where its numbers come from (a numbers: directive),
// and every numbers: directive stands before a paragraph.
TEST(Readme, EveryProseNumberIsChecked) {
  for (const auto& doc : checked_documents()) {
    int directives = 0, with_numbers = 0;
    for (const auto& l : lines_of(slurp(kRepo / doc))) directives += l.starts_with("<!-- readme-test: numbers: ");
    for (const Paragraph& p : paragraphs_of(doc)) {
      with_numbers += p.directive.starts_with("numbers: ");
      if (p.directive.starts_with("numbers: ")) continue;
      std::string numbers;
      for (const Number& n : prose_numbers(p.text)) numbers += " " + n.text;
      EXPECT_TRUE(numbers.empty()) << p.where() << ": numbers" << numbers
                                   << " without a <!-- readme-test: numbers: ... --> line before the paragraph:\n"
                                   << p.text;
    }
    EXPECT_EQ(with_numbers, directives) << doc << ": a numbers: directive that is not on the line before a paragraph";
  }
}

// The bad-input count the documents give is the total of the bad-input suite's table
// (docs/reliability/bad-input.md), and each row is what its program prints when run whole
// (`psi-bad-input: <suite>: N bad inputs rejected`): a case added to a program without updating
// the table and the count fails here.
TEST(Readme, BadInputCountIsWhatTheProgramsReject) {
  const std::string table_page = "docs/reliability/bad-input.md";
  const std::string reliability = slurp(kRepo / table_page);
  static const std::regex row(R"(\n\| `(test_bad_input_[a-z0-9_]+)` \| (\d+) \|)"), total(R"(\n\| total \| \*\*(\d+)\*\* \|)"),
      count(R"(psi-bad-input: [^\n]*: (\d+) bad inputs rejected)"), readme(R"(\*\*Bad input\*\*: (\d+) malformed inputs)");
  Scratch s;
  long long sum = 0;
  std::set<std::string> in_table;
  for (std::sregex_iterator it(reliability.begin(), reliability.end(), row), end; it != end; ++it) {
    const std::string program = (*it)[1];
    in_table.insert(program);
    sum += std::stoll((*it)[2]);
    const auto r = s.shell("'" + (fs::path(PSI_TEST_PROGRAMS) / program).string() + "'");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(r.out, m, count)) << program << " printed no count (exit " << r.status << "):\n"
                                                    << r.out << r.err;
    EXPECT_EQ(m[1].str(), (*it)[2].str()) << table_page << ": " << program << " rejects " << m[1] << " bad inputs";
  }
  // Every program that counts is in the table.
  for (const auto& f : fs::directory_iterator(kRepo / "tests")) {
    if (f.path().filename().string().starts_with("test_bad_input_") && f.path().extension() == ".cpp" &&
        slurp(f.path()).find("CountPrinter(") != std::string::npos) {
      EXPECT_TRUE(in_table.count(f.path().stem().string())) << f.path() << " counts, but " << table_page << " has no row";
    }
  }
  std::smatch t;
  ASSERT_TRUE(std::regex_search(reliability, t, total)) << table_page << ": no total row";
  EXPECT_EQ(std::stoll(t[1]), sum) << table_page << ": the total is not the rows' sum";
  int counts = 0;
  for (const auto& doc : checked_documents()) {
    const std::string text = slurp(kRepo / doc);
    for (std::sregex_iterator r(text.begin(), text.end(), readme), end; r != end; ++r, ++counts)
      EXPECT_EQ(std::stoll((*r)[1]), sum) << doc << "'s bad-input count";
  }
  EXPECT_GT(counts, 0) << "no checked document says '**Bad input**: N malformed inputs'";
}

TEST(Readme, EveryFencedBlockSaysHowItIsChecked) {
  const auto blocks = readme_blocks();
  ASSERT_GE(blocks.size(), 10u);
  static const std::regex known(R"(^(run|slurm|skip: .+|file: .+|lines: psi .+|tables: psi .+|python after: psi .+)$)");
  for (const auto& b : blocks)
    EXPECT_TRUE(std::regex_match(b.directive, known))
        << b.where() << ": the fenced block needs a <!-- readme-test: ... --> line before it (got '"
        << b.directive << "')";
}

TEST(Readme, FileBlocksAreTheFilesThemselves) {
  int checked = 0;
  for (const auto& b : readme_blocks()) {
    if (!b.directive.starts_with("file: ")) continue;
    ++checked;
    const fs::path file = kRepo / b.directive.substr(6);
    ASSERT_TRUE(fs::is_regular_file(file)) << b.where() << ": no file " << file;
    EXPECT_EQ(joined(b.body), joined(lines_of(slurp(file)))) << b.where() << ": the block is not " << file;
  }
  EXPECT_GT(checked, 0);
}

TEST(Readme, ShellBlocksRunAsWritten) {
  Scratch s;
  int ran = 0;
  for (const auto& b : readme_blocks()) {
    if (b.directive != "run") continue;
    ++ran;
    const auto r = s.shell(as_run_here(joined(b.body)));
    EXPECT_EQ(r.status, 0) << b.where() << "\n" << joined(b.body) << r.err;
  }
  EXPECT_GT(ran, 0);
}

TEST(Readme, ExampleOutputsAreWhatPsiPrints) {
  Scratch s;
  int checked = 0;
  for (const auto& b : readme_blocks()) {
    const std::string exact = psi_args(b.directive, "lines"), shape = psi_args(b.directive, "tables");
    if (exact.empty() && shape.empty()) continue;
    ++checked;
    const auto& r = s.psi(as_run_here(exact.empty() ? shape : exact));
    ASSERT_EQ(r.status, 0) << b.where() << ": psi " << (exact.empty() ? shape : exact) << "\n" << r.err;
    const auto out = lines_of(r.out);
    if (!exact.empty()) {
      // Every line, in order.
      std::size_t at = 0;
      for (const auto& l : b.body) {
        if (l.empty()) continue;
        while (at < out.size() && out[at] != l) ++at;
        EXPECT_LT(at, out.size()) << b.where() << ": psi " << exact << " does not print\n  " << l
                                  << "\n(in this order); it prints:\n"
                                  << r.out;
        if (at == out.size()) break;
        ++at;
      }
      continue;
    }
    // The tables' headers and row names; the other lines as written.
    const auto mine = tables_of(b.body), theirs = tables_of(out);
    // The run's report (the "report: PATH" line, in the scratch folder) says which columns are times.
    fs::path report;
    for (const auto& l : out)
      if (l.starts_with("report: ")) report = s.dir() / l.substr(8);
    ASSERT_FALSE(report.empty()) << b.where() << ": psi " << shape << " names no report:\n" << r.out;
    const nlohmann::json recorded = nlohmann::json::parse(psi::hdf5::File::open_read(report).read_text("/report/tables"));
    for (const auto& t : mine) {
      bool found = false;
      for (const auto& u : theirs)
        if (u.header == t.header) {
          found = true;
          std::set<std::string> time_columns;
          for (const auto& rt : recorded)
            if (rt.at("columns").get<std::vector<std::string>>() == t.header)
              for (const auto& c : rt.at("time_columns")) time_columns.insert(c.get<std::string>());
          ASSERT_EQ(u.rows.size(), t.rows.size()) << b.where() << ": rows of the table headed '"
                                                  << t.header.at(0) << "'";
          for (std::size_t r = 0; r < t.rows.size(); ++r) {
            ASSERT_EQ(u.rows[r].size(), t.header.size()) << b.where() << ": psi's row " << r;
            ASSERT_EQ(t.rows[r].size(), t.header.size()) << b.where() << ": the document's row " << r;
            for (std::size_t c = 0; c < t.header.size(); ++c) {
              if (c == 0 || !time_columns.count(t.header[c])) {
                EXPECT_EQ(u.rows[r][c], t.rows[r][c]) << b.where() << ": table headed '" << t.header.at(0)
                                                      << "', row '" << t.rows[r][0] << "', column '" << t.header[c]
                                                      << "'";
              }
            }
          }
        }
      EXPECT_TRUE(found) << b.where() << ": psi " << shape << " prints no table headed\n  "
                         << joined(t.header) << "it prints:\n"
                         << r.out;
    }
    const std::set<std::string> printed(out.begin(), out.end());
    for (const auto& l : b.body) {
      if (!l.empty() && !l.starts_with("|")) {
        EXPECT_TRUE(printed.count(l)) << b.where() << ": psi " << shape << " does not print\n  " << l
                                      << "\nit prints:\n"
                                      << r.out;
      }
    }
  }
  EXPECT_GT(checked, 0);
}

TEST(Readme, PythonSnippetsReadWhatPsiWrites) {
  Scratch s;
  const bool have_h5py = s.shell("python3 -c 'import h5py, numpy'").status == 0;
  int checked = 0;
  for (const auto& b : readme_blocks()) {
    const std::string before = psi_args(b.directive, "python after");
    if (before.empty()) continue;
    ++checked;
    const auto& prep = s.psi(before);
    ASSERT_EQ(prep.status, 0) << b.where() << ": psi " << before << "\n" << prep.err;
    if (have_h5py) {
      std::ofstream(s.dir() / "snippet.py") << joined(b.body);
      const auto r = s.shell("python3 snippet.py");
      EXPECT_EQ(r.status, 0) << b.where() << "\n" << joined(b.body) << r.err;
      continue;
    }
    // No h5py here: the file and the BF16 dataset the snippet opens must be there.
    std::cout << b.where() << ": h5py is not installed; checking the file and dataset it reads\n";
    static const std::regex opens(R"re(h5py\.File\("([^"]+)"\)\["([^"]+)"\])re");
    std::smatch m;
    const std::string code = joined(b.body);
    ASSERT_TRUE(std::regex_search(code, m, opens)) << b.where() << ": no h5py.File(\"F\")[\"D\"] in\n"
                                                   << code;
    const fs::path file = s.dir() / m[1].str();
    ASSERT_TRUE(fs::exists(file)) << b.where() << ": psi " << before << " wrote no " << m[1];
    const auto f = psi::hdf5::File::open_read(file);
    ASSERT_TRUE(f.exists(m[2])) << b.where() << ": " << m[1] << " has no dataset " << m[2];
    EXPECT_EQ(f.info(m[2]).kind, psi::hdf5::ElemKind::bf16) << m[2] << ": the snippet decodes BF16 bits";
  }
  EXPECT_GT(checked, 0);
}

// Every option a command has is named in its row of the usage table (docs/commands.md), and every
// option the row names exists.
TEST(Readme, UsageTableNamesEveryOption) {
  const std::string usage_page = "docs/commands.md";
  Scratch s;
  static const std::regex command(R"(`(psi [^`]*)`)"), option(R"(--[a-z][a-z0-9-]*)"),
      help_option(R"(^ +(?:-[a-z], ?)?(--[a-z][a-z0-9-]*))");
  std::set<std::string> seen;
  for (const auto& line : lines_of(slurp(kRepo / usage_page))) {
    if (!line.starts_with("| `psi ")) continue;
    const std::string usage_cell = line.substr(0, line.find(" | "));
    for (std::sregex_iterator it(usage_cell.begin(), usage_cell.end(), command), end; it != end; ++it) {
      const std::string usage = (*it)[1];
      std::istringstream words(usage.substr(4));
      std::string name, w;
      while (words >> w && std::regex_match(w, std::regex("[a-z][a-z0-9-]*"))) name += (name.empty() ? "" : " ") + w;
      seen.insert(name);
      std::set<std::string> in_readme, in_help;
      for (std::sregex_iterator o(usage.begin(), usage.end(), option), e; o != e; ++o) in_readme.insert(o->str());
      const auto& help = s.psi(name + " --help");
      ASSERT_EQ(help.status, 0) << "psi " << name << " --help: " << help.err;
      for (const auto& l : lines_of(help.out)) {
        std::smatch m;
        if (std::regex_search(l, m, help_option) && m[1] != "--help") in_help.insert(m[1]);
      }
      for (const auto& o : in_help)
        EXPECT_TRUE(in_readme.count(o)) << usage_page << ": the usage of psi " << name << " lacks " << o << ":\n  " << usage;
      for (const auto& o : in_readme)
        EXPECT_TRUE(in_help.count(o)) << usage_page << ": the usage of psi " << name << " names " << o << ", which it does not have";
    }
  }
  for (const char* c : {"list", "run", "report", "merge", "compare", "probe", "oracle certify", "oracle explain",
                        "synthinit", "device ceilings", "device summary", "verify", "seal", "kernels shapes", "kernels where",
                        "kernels fragile", "kernels search", "kernels confirm"})
    EXPECT_TRUE(seen.count(c)) << usage_page << ": the usage table has no row for psi " << c;
}

// The experiments table (the one under the heading "Experiments" of a checked document) lists
// what psi list lists, in its order.
TEST(Readme, ExperimentsTableIsPsiList) {
  Scratch s;
  const auto& list = s.psi("list");
  ASSERT_EQ(list.status, 0);
  std::vector<std::string> listed, in_docs;
  for (const auto& l : lines_of(list.out)) listed.push_back(l.substr(0, l.find(' ')));
  static const std::regex heading(R"(^#+ Experiments$)"), row(R"(^\| `([a-z-]+)` \|)");
  int tables = 0;
  for (const auto& doc : checked_documents()) {
    const auto lines = lines_of(slurp(kRepo / doc));
    auto it = std::find_if(lines.begin(), lines.end(), [](const std::string& l) { return std::regex_match(l, heading); });
    if (it == lines.end()) continue;
    ++tables;
    for (++it; it != lines.end() && !it->starts_with("#"); ++it) {
      std::smatch m;
      if (std::regex_search(*it, m, row)) in_docs.push_back(m[1]);
    }
  }
  EXPECT_EQ(tables, 1) << "one checked document has the heading 'Experiments'";
  EXPECT_EQ(in_docs, listed);
}

// docs/tables.md describes each column of each paper table once: its lists are the headers psi
// prints, in order, and no experiment that reproduces a Table of the paper is left out; each of
// those tables has its paper line (experiments/paper_line.h).
TEST(Readme, TableColumnsAreWhatPsiPrints) {
  Scratch s;
  std::set<std::string> described;
  for (const Paragraph& p : readme_paragraphs()) {
    if (!p.directive.starts_with("columns: psi ")) continue;
    const std::string args = p.directive.substr(13);
    const auto tables = tables_of(lines_of(p.text));
    ASSERT_EQ(tables.size(), 1u) << p.where() << ": a columns: directive stands before one table";
    std::vector<std::string> listed;
    for (const auto& row : tables[0].rows) {
      const std::string& first = row.at(0);
      ASSERT_TRUE(first.size() > 2 && first.front() == '`' && first.back() == '`' &&
                  first.find('`', 1) == first.size() - 1)
          << p.where() << ": the first cell '" << first << "' is not one code span";
      listed.push_back(first.substr(1, first.size() - 2));
    }
    const auto& r = s.psi(as_run_here(args));
    ASSERT_EQ(r.status, 0) << p.where() << ": psi " << args << "\n" << r.err;
    const auto printed = tables_of(lines_of(r.out));
    ASSERT_FALSE(printed.empty()) << p.where() << ": psi " << args << " prints no table:\n" << r.out;
    EXPECT_EQ(listed, printed[0].header) << p.where() << ": the columns of psi " << args << "'s first table";
    EXPECT_NE(("\n" + r.out).find("\npaper ("), std::string::npos)
        << p.where() << ": psi " << args << " prints no paper line beside its table:\n" << r.out;
    if (args.starts_with("run ")) described.insert(args.substr(4, args.find(' ', 4) - 4));
  }
  const auto& list = s.psi("list");
  ASSERT_EQ(list.status, 0);
  int tables = 0;
  for (const auto& l : lines_of(list.out)) {
    if (l.find(" Table ") == std::string::npos) continue;
    ++tables;
    const std::string name = l.substr(0, l.find(' '));
    EXPECT_TRUE(described.count(name)) << "psi run " << name << " reproduces a paper table; docs/tables.md lists no "
                                       << "columns for it:\n" << l;
  }
  EXPECT_GE(tables, 6) << list.out;
}

// docs/index.md is the map of the documentation: every page under docs/ is listed there (as a
// link), and every page it links to exists.
TEST(Readme, DocsIndexListsEveryPage) {
  const fs::path docs = kRepo / "docs";
  const std::string index = slurp(docs / "index.md");
  ASSERT_FALSE(index.empty()) << "docs/index.md is missing";
  static const std::regex link(R"(\]\(([^)#]+\.md)(#[^)]*)?\))");
  std::set<std::string> linked;
  for (std::sregex_iterator it(index.begin(), index.end(), link), end; it != end; ++it) {
    const std::string target = (*it)[1];
    if (target.find("://") != std::string::npos) continue;
    const fs::path page = fs::weakly_canonical(docs / target);
    EXPECT_TRUE(fs::is_regular_file(page)) << "docs/index.md lists " << target << ", which does not exist";
    linked.insert(page.string());
  }
  // Every page: docs/*.md and the pages of its folders, but not the run records kept in
  // docs/device-runs/ (each run's summary), whose own README.md is the page that lists them.
  for (const auto& f : fs::recursive_directory_iterator(docs)) {
    if (!f.is_regular_file() || f.path().extension() != ".md" || f.path() == docs / "index.md") continue;
    const std::string rel = fs::relative(f.path(), docs).generic_string();
    if (rel.starts_with("device-runs/") && f.path().filename() != "README.md") continue;
    EXPECT_TRUE(linked.count(fs::weakly_canonical(f.path()).string())) << "docs/" << rel << " is not listed in docs/index.md";
  }
}

// Each reliability page that makes a promise ("**Promise.**") names the tests that hold it on its
// "**Held by**" line; every name there (`Suite.Name`, or `Suite.*` for a whole suite) is a test of
// tests/.
TEST(Readme, ReliabilityPagesNameRealTests) {
  std::string sources;
  for (const auto& f : fs::directory_iterator(kRepo / "tests"))
    if (f.path().extension() == ".cpp") sources += slurp(f.path());
  static const std::regex name(R"(`([A-Z][A-Za-z0-9]*)\.(\*|[A-Z][A-Za-z0-9]*)`)"),
      test(R"(\bTEST(?:_F|_P)?\(\s*([A-Za-z0-9]+),\s*([A-Za-z0-9]+)\s*\))");
  std::set<std::string> suites, tests;
  for (std::sregex_iterator it(sources.begin(), sources.end(), test), end; it != end; ++it) {
    suites.insert((*it)[1]);
    tests.insert((*it)[1].str() + "." + (*it)[2].str());
  }
  int promises = 0;
  for (const auto& f : fs::directory_iterator(kRepo / "docs" / "reliability")) {
    const std::string page = slurp(f.path());
    if (page.find("**Promise.**") == std::string::npos) continue;
    ++promises;
    // The paragraph that starts "**Held by**", up to the blank line after it.
    std::string held;
    bool in_held = false;
    for (const auto& l : lines_of(page)) {
      in_held = l.starts_with("**Held by**") || (in_held && !l.empty());
      if (in_held) held += l + "\n";
    }
    int named = 0;
    for (std::sregex_iterator it(held.begin(), held.end(), name), end; it != end; ++it, ++named) {
      const std::string suite = (*it)[1], test_name = (*it)[2];
      EXPECT_TRUE(test_name == "*" ? suites.count(suite) > 0 : tests.count(suite + "." + test_name) > 0)
          << "docs/reliability/" << f.path().filename().string() << " names " << suite << "." << test_name
          << ", which is no test in tests/";
    }
    EXPECT_GT(named, 0) << "docs/reliability/" << f.path().filename().string() << " names no test that holds it";
  }
  EXPECT_GT(promises, 0);
}

namespace {

// The anchor a Markdown heading gets: lower case, spaces as hyphens, other punctuation (and any
// non-ASCII character) dropped.
std::string heading_anchor(const std::string& heading) {
  std::string a;
  for (const char c : heading.substr(heading.find_first_not_of("# ")))
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')
      a += char(std::tolower(static_cast<unsigned char>(c)));
    else if (c == ' ')
      a += '-';
  return a;
}

}  // namespace

// Every relative link of README.md and of every docs/ page leads to a file that exists, and a
// link into a page's section to one of its headings: a page or section that moves takes its
// links with it.
TEST(Readme, DocumentLinksResolve) {
  std::vector<fs::path> pages = {kRepo / "README.md"};
  for (const auto& f : fs::recursive_directory_iterator(kRepo / "docs"))
    if (f.is_regular_file() && f.path().extension() == ".md") pages.push_back(f.path());
  const auto outside_blocks = [](const fs::path& p) {
    std::vector<std::pair<std::size_t, std::string>> out;
    bool in_block = false;
    const auto lines = lines_of(slurp(p));
    for (std::size_t i = 0; i < lines.size(); ++i) {
      if (lines[i].starts_with("```")) in_block = !in_block;
      else if (!in_block) out.emplace_back(i + 1, lines[i]);
    }
    return out;
  };
  static const std::regex link(R"(\]\(([^)\s]+)\))");
  int links = 0;
  for (const auto& page : pages) {
    for (const auto& [number, line] : outside_blocks(page)) {
      for (std::sregex_iterator it(line.begin(), line.end(), link), end; it != end; ++it) {
        const std::string target = (*it)[1];
        if (target.find("://") != std::string::npos || target.starts_with("mailto:")) continue;
        ++links;
        const std::string file = target.substr(0, target.find('#'));
        const std::string anchor = target.find('#') == std::string::npos ? "" : target.substr(target.find('#') + 1);
        const fs::path to = file.empty() ? page : page.parent_path() / file;
        const std::string where = fs::relative(page, kRepo).generic_string() + ":" + std::to_string(number);
        if (!fs::exists(to)) {
          ADD_FAILURE() << where << ": the link " << target << " leads to no file";
          continue;
        }
        if (anchor.empty() || to.extension() != ".md") continue;
        std::set<std::string> anchors;
        for (const auto& [n, l] : outside_blocks(to))
          if (l.starts_with("#")) anchors.insert(heading_anchor(l));
        EXPECT_TRUE(anchors.count(anchor)) << where << ": the link " << target << " names no heading of " << file;
      }
    }
  }
  EXPECT_GT(links, 0);
}
