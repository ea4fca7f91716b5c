#pragma once
// JSON text read for comparison (issue 57, class 4): every number kept as its exact value, not a
// double (2^53 + 1, 2^64, -0.0 and 1e-400 stay what they say), and a duplicate key refused.
// A number is held as a binary value (which JSON text never yields) whose bytes are the number's
// canonical form, so that two numbers are == exactly when their values are: "1", "1.0" and "10e-1"
// are one value; "-0" and "0" are not.
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace psi::compare {

// The parsed text; psi::Error "<source>: not valid JSON (...)", "<source>: duplicate key 'k' in
// the object at <path>", too deep (engine/json_read.h's bound) or an exponent of more than 18
// digits (no value psi compares has one).
nlohmann::json read_json_exact(std::string_view text, const std::string& source);

// `j` as JSON text, numbers in their canonical form ("9007199254740993", "-0", "0.5", "1e-400").
std::string show_exact(const nlohmann::json& j);

}  // namespace psi::compare
