#pragma once
// The one parser of every integer a user gives psi (command-line options, ranges, shard counts):
// decimal digits only (no sign, no exponent, no other base: "010" is ten) and a value in
// [lo, hi], so that "-1" or an overlong number is refused instead of wrapping or saturating.
#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>

namespace psi {

inline std::optional<std::uint64_t> parse_whole(std::string_view s, std::uint64_t lo, std::uint64_t hi) {
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || s[0] == '-' || s[0] == '+' || ec != std::errc() || end != s.data() + s.size() || v < lo || v > hi)
    return std::nullopt;
  return v;
}

}  // namespace psi
