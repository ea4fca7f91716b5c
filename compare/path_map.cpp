#include "compare/path_map.h"

#include <algorithm>
#include <vector>

#include "engine/error.h"

namespace psi::compare {

namespace {

// Matches `pattern` ('*' = any run of non-'/' characters) against the start of `path`, ending at
// a component boundary (or anywhere when the pattern ends with '/'). Returns how much of `path`
// it took and what each '*' matched, the first '*' taking as little as lets the rest match.
// suffix[i][j]: pattern[i..] matches path[j..end] for some end at a boundary; O(|pattern|·|path|).
struct Match {
  std::size_t length = 0;
  std::vector<std::string> stars;
};

std::optional<Match> glob_prefix(std::string_view pattern, std::string_view full_path) {
  // The match ends within as many components as the pattern has: the rest of the path is not
  // looked at (so a hostile file's long names cost nothing past them).
  const std::size_t slashes = std::size_t(std::count(pattern.begin(), pattern.end(), '/'));
  std::size_t end = 0;
  for (std::size_t seen = 0; end < full_path.size(); ++end)
    if (full_path[end] == '/' && seen++ == slashes) break;
  const std::string_view path = full_path.substr(0, end);
  const std::size_t n = pattern.size(), m = path.size();
  if (n * (m + 1) > (std::size_t(1) << 26))
    throw Error("--map: the dataset path " + std::string(full_path.substr(0, 80)) + "… is too long to match '" +
                std::string(pattern.substr(0, 80)) + "' against");
  auto at_end = [&](std::size_t j) {
    return j == full_path.size() || full_path[j] == '/' || (n > 0 && pattern.back() == '/');
  };
  std::vector<std::vector<char>> ok(n + 1, std::vector<char>(m + 1, 0));
  for (std::size_t j = 0; j <= m; ++j) ok[n][j] = at_end(j);
  for (std::size_t i = n; i-- > 0;)
    for (std::size_t j = m + 1; j-- > 0;) {
      if (pattern[i] == '*') ok[i][j] = ok[i + 1][j] || (j < m && path[j] != '/' && ok[i][j + 1]);
      else ok[i][j] = j < m && path[j] == pattern[i] && ok[i + 1][j + 1];
    }
  if (!ok[0][0]) return std::nullopt;
  Match r;
  std::size_t j = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (pattern[i] != '*') {
      ++j;
      continue;
    }
    std::size_t k = j;
    while (!ok[i + 1][k]) ++k;  // ok[i][j] holds, so some k within the component does
    r.stars.emplace_back(path.substr(j, k - j));
    j = k;
  }
  // The shortest end at a boundary: the rest of the path is appended to TO.
  r.length = j;
  return r;
}

std::size_t stars(std::string_view s) { return std::size_t(std::count(s.begin(), s.end(), '*')); }

}  // namespace

bool maps_path(const PathMap& m, std::string_view path) { return map_path(m, path).has_value(); }

std::optional<std::string> map_path(const PathMap& m, std::string_view path) {
  const std::optional<Match> g = glob_prefix(m.from, path);
  if (!g) return std::nullopt;
  std::string to;
  std::size_t next = 0;
  for (char c : m.to) to += c == '*' ? g->stars.at(next++) : std::string(1, c);
  return to + std::string(path.substr(g->length));
}

PathMap parse_path_map(const std::string& text) {
  const std::string shown = text.size() > 200 ? text.substr(0, 200) + "…" : text;
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    throw Error("--map '" + shown + "' is not FROM=TO (e.g. --map /block_small/flash/=/block_small/math/)");
  if (text.size() > kMaxMapText)
    throw Error("--map '" + shown + "' is longer than " + std::to_string(kMaxMapText) + " characters");
  auto rooted = [](std::string s) { return s.empty() || s.front() == '/' ? s : "/" + s; };
  PathMap m{rooted(text.substr(0, eq)), rooted(text.substr(eq + 1))};
  if (stars(m.from) != stars(m.to))
    throw Error("--map '" + shown + "': FROM has " + std::to_string(stars(m.from)) + " '*' and TO " +
                std::to_string(stars(m.to)) + "; each '*' of TO takes what the same '*' of FROM matched, in order");
  return m;
}

}  // namespace psi::compare
