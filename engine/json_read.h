#pragma once
// The one reader of JSON text that comes from outside psi (a file, an HDF5 dataset or attribute,
// an option): nesting is bounded before a value is built, so a deep document (100,000 `[`) is a
// one-line refusal naming its source, never a stack overflow in a later copy, comparison or dump;
// so is what the parsed document would take (its values and strings) against the machine's memory.
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace psi {

// Deeper than any JSON psi writes (its reports nest 6 levels).
inline constexpr int kMaxJsonDepth = 64;

// The parsed value; psi::Error "<source>: not valid JSON (...)" or "<source>: JSON nested deeper
// than 64 levels".
nlohmann::json read_json(std::string_view text, const std::string& source);

// The same, but nullopt for text that is not JSON, with the parser's reason in `why` (for callers
// that say so in their own words or treat it as not JSON); too deep is still a refusal.
std::optional<nlohmann::json> read_json_if_valid(std::string_view text, const std::string& source,
                                                 std::string* why = nullptr);

}  // namespace psi
