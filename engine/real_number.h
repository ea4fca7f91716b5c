#pragma once
// The one parser of every real number a user or a file gives psi (environment variables, the
// device check's tables, report cells): decimal digits with an optional '-', fraction and
// exponent, nothing before or after; never `inf`, `nan`, hexadecimal or a leading '+', '.' or
// space. A literal whose value a double cannot hold is a range error, not a saturation: one
// that overflows (1e999, -1e999) or whose nonzero value underflows to zero or to a subnormal
// (1e-400).
#include <charconv>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

namespace psi {

// The value, or nullopt with `why` (when given) saying what is wrong with `s`.
inline std::optional<double> parse_real(std::string_view s, std::string* why = nullptr) {
  const auto fail = [&](const char* what) -> std::optional<double> {
    if (why) *why = what;
    return std::nullopt;
  };
  const std::size_t digits_at = !s.empty() && s[0] == '-' ? 1 : 0;
  if (s.size() <= digits_at || s[digits_at] < '0' || s[digits_at] > '9')
    return fail("not a decimal number");
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, std::chars_format::general);
  if (ec == std::errc::result_out_of_range) return fail("out of the range of a double");
  if (ec != std::errc() || end != s.data() + s.size()) return fail("not a decimal number");
  const std::string_view mantissa = s.substr(0, s.find_first_of("eE"));
  const bool nonzero_literal = mantissa.find_first_of("123456789") != std::string_view::npos;
  if (!std::isfinite(v) || std::fpclassify(v) == FP_SUBNORMAL || (v == 0 && nonzero_literal))
    return fail("out of the range of a double");
  return v;
}

}  // namespace psi
