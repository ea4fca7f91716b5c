#pragma once
// The two figures of one comparison with a recording (engine/diff_map.h): where the elements
// differ over tokens x channels, each cell coloured by the largest ULP class in it, and how many
// differing elements fall in each class. psi probe --figures and block-controls draw them.
#include <string>
#include <vector>

#include "engine/diff_map.h"
#include "report/figures.h"

namespace psi::report {

// `name`: the figures' name stem ("<variant>.<tensor>.<recording>", the files end in
// ".ulp-map" and ".ulp-histogram"); `what`: the comparison, for the titles ("dense video_out vs
// the MATH recording"); `log_counts`: the histogram's counts on a log axis, so that the tail of
// large distances shows beside the thousands of 1-ULP elements.
std::vector<Figure> diff_figures(const std::string& name, const std::string& what, const psi::DiffMap& m,
                                 bool log_counts = false);

// The histogram's numbers on one line, which psi prints and records beside the figures:
// "ULP classes (elements): 1: 5012, 2: 2410, ..., sign flip: 5; sum 11119".
std::string ulp_histogram_line(const psi::DiffMap& m);

}  // namespace psi::report
