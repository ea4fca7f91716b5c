#pragma once
// A table's paper line: the paper's values for the cells that correspond (from the paper's text),
// or which cells correspond and that the values are in its table, with the scale psi ran at, so
// that a reader sees psi's figure beside the published one.
#include <string>

#include <nlohmann/json.hpp>

namespace psi::exp {

// "paper (<paper>); here: model tiny (ltx25), SynthInit weights, cpu backend." from the report's
// recorded options (Options::to_json).
std::string paper_note(const std::string& paper, const nlohmann::json& options);

}  // namespace psi::exp
