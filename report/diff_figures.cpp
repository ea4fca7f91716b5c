#include "report/diff_figures.h"

namespace psi::report {

namespace {

// Light to dark with the ULP class; a sign flip apart in blue.
const char* kClassColours[psi::kUlpClasses] = {"#fee391", "#fec44f", "#fe9929", "#ec7014", "#cc4c02",
                                                  "#993404", "#662506", "#7a0177", "#49006a", "#2d004b",
                                                  "#1a0030", "#000000", "#1f78b4"};

std::string range(std::int64_t first, std::int64_t last) { return std::to_string(first) + "-" + std::to_string(last); }

// "1 token", "5 tokens".
std::string count_of(std::int64_t n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

}  // namespace

std::string ulp_histogram_line(const psi::DiffMap& m) {
  std::string s = "ULP classes (elements):";
  for (int k = 1; k <= psi::kUlpClasses; ++k)
    s += (k == 1 ? " " : ", ") + psi::ulp_class_label(k) + ": " + std::to_string(m.histogram[std::size_t(k - 1)]);
  return s + "; sum " + std::to_string(m.differing());
}

std::vector<Figure> diff_figures(const std::string& name, const std::string& what, const psi::DiffMap& m,
                                 bool log_counts) {
  CellMap map;
  map.title = what + ": " + std::to_string(m.differing()) + " of " + std::to_string(m.rows * m.cols) +
              " differ; largest ULP distance per cell of " + count_of(m.row_step, "token") + " x " +
              count_of(m.col_step, "channel");
  map.y_label = "token";
  map.x_label = "channel";
  map.y_first = std::to_string(m.first_row);
  map.y_last = std::to_string(m.first_row + m.rows - 1);
  map.x_first = "0";
  map.x_last = std::to_string(m.cols - 1);
  map.cells = m.cells;
  for (int k = 1; k <= psi::kUlpClasses; ++k)
    map.classes.push_back({psi::ulp_class_label(k) + (k < psi::kSignFlipClass ? " ULP" : ""),
                           kClassColours[k - 1]});
  // The cells as drawn, so that the picture can be checked without reading pixels.
  map.data = "tokens " + range(m.first_row, m.first_row + m.rows - 1) + " x channels " + range(0, m.cols - 1) +
             " in cells of " + std::to_string(m.row_step) + " x " + std::to_string(m.col_step) +
             "; one hex digit per cell: 0 equal, else the class of its largest difference (1.." +
             std::to_string(psi::kUlpClasses - 1) + " as the legend, " + std::to_string(psi::kSignFlipClass) +
             " sign flip); " + ulp_histogram_line(m) + "\n";
  for (const std::string& row : m.cells) map.data += row + "\n";

  BarChart hist;
  hist.title = what + ": BF16 ULP distance of the " + std::to_string(m.differing()) + " differing elements";
  hist.y_label = log_counts ? "elements (log scale)" : "elements";
  hist.value_labels = true;
  hist.log_y = log_counts;
  for (int k = 1; k <= psi::kUlpClasses; ++k)
    hist.bars.push_back({psi::ulp_class_label(k), "differing elements",
                         double(m.histogram[std::size_t(k - 1)])});
  return {{name + ".ulp-map", render_svg(map)}, {name + ".ulp-histogram", render_svg(hist)}};
}

}  // namespace psi::report
