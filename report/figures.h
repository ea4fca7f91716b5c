#pragma once
// Figures next to a report: SVG drawn here, PNG converted from it with rsvg-convert (Debian's
// librsvg2-bin) when that program is installed.
#include <filesystem>
#include <string>
#include <vector>

namespace psi::report {

struct Figure {
  std::string name;  // file stem suffix: <report stem>.<name>.svg / .png
  std::string svg;
};

// Points grouped by category on the x axis, one colour per series, log-scaled y.
struct DotPlot {
  struct Point {
    std::string category;
    std::string series;
    double value;
  };
  std::string title, y_label;
  std::vector<Point> points;
};

// Grouped bars (one group per category, one bar per series), linear y (a zero line where the
// values change sign, ticks at round values sharing one power of ten) or log counts.
struct BarChart {
  struct Bar {
    std::string category;
    std::string series;
    double value;
  };
  std::string title, y_label;
  std::vector<Bar> bars;
  bool value_labels = false;  // each bar's value written above it
  // Counts on a log axis (powers of ten), so that a tail of small counts beside a large one shows;
  // a count of 0 draws no bar.
  bool log_y = false;
};

// A grid of cells, each drawn in the colour of its class (blank: class 0), row 0 at the top.
struct CellMap {
  struct Class {
    std::string label, colour;
  };
  std::string title, x_label, y_label;
  std::string x_first, x_last, y_first, y_last;  // what the axes' ends stand for
  std::vector<std::string> cells;                // one string per row, one hex digit (the class) per cell
  std::vector<Class> classes;                    // classes 1, 2, ...
  std::string data;                              // the numbers drawn, kept in the SVG as its <desc>
};

std::string render_svg(const DotPlot& p);
std::string render_svg(const BarChart& b);
std::string render_svg(const CellMap& m);

// Where a figure goes beside `report`: <report stem>.<name><ext> (ext ".svg" or ".png").
std::filesystem::path figure_file(const std::filesystem::path& report, const Figure& fig, const std::string& ext);

// Whether an existing file is a figure psi wrote (the output rule's recognizer): an SVG whose
// first line is psi's mark, or a PNG beside such an SVG of the same name.
bool is_psi_figure(const std::filesystem::path& p);

// Writes every figure beside `report` (atomically) and returns the files written; a PNG that
// could not be made is reported in `notes`.
std::vector<std::filesystem::path> write_figures(const std::filesystem::path& report, const std::vector<Figure>& figs,
                                                 std::vector<std::string>& notes);

}  // namespace psi::report
