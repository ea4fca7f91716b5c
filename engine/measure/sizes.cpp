#include "engine/measure/sizes.h"

#include <cstdio>
#include <limits>

#include "engine/error.h"
#include "engine/whole_number.h"

namespace psi::rt {

std::string format_amount(std::uint64_t bytes) {
  char buf[64];
  if (bytes >= (1ull << 30))
    std::snprintf(buf, sizeof buf, "%.1f GiB", double(bytes) / double(1ull << 30));
  else if (bytes >= (1ull << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / double(1ull << 20));
  else if (bytes >= (1ull << 10))
    std::snprintf(buf, sizeof buf, "%.1f KiB", double(bytes) / double(1ull << 10));
  else
    std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(bytes));
  return buf;
}

std::string format_capacity(std::uint64_t bytes) {
  if (bytes > 0 && bytes % (1ull << 30) == 0) return std::to_string(bytes >> 30) + " GiB";
  if (bytes > 0 && bytes % (1ull << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  if (bytes > 0 && bytes % (1ull << 10) == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " bytes";
}

std::uint64_t parse_capacity(std::string_view text, std::string_view what) {
  const auto bad = [&](const std::string& why) {
    return Error(std::string(what) + " '" + std::string(text) + "': " + why +
                 " (expected a whole number with an optional unit: bytes, KiB, MiB, GiB)");
  };
  std::size_t i = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
  if (i == 0) throw bad("no number");
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  const auto parsed = parse_whole(text.substr(0, i), 0, kMax);
  if (!parsed) throw bad("too large");
  const std::uint64_t n = *parsed;
  while (i < text.size() && text[i] == ' ') ++i;
  const std::string_view unit = text.substr(i);
  int shift = 0;
  if (unit.empty() || unit == "bytes" || unit == "B")
    shift = 0;
  else if (unit == "KiB")
    shift = 10;
  else if (unit == "MiB")
    shift = 20;
  else if (unit == "GiB")
    shift = 30;
  else
    throw bad("unknown unit '" + std::string(unit) + "'");
  if (n > (kMax >> shift)) throw bad("too large");
  return n << shift;
}

}  // namespace psi::rt
