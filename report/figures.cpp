#include "report/figures.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "engine/interrupt.h"
#include "hdf5/output_path.h"

namespace psi::report {

namespace {

constexpr int kW = 900, kH = 480, kLeft = 90, kRight = 170, kTop = 50, kBottom = 80;
const char* kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else o += c;
  }
  return o;
}

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g", v);
  return b;
}

template <class Items>
std::pair<std::vector<std::string>, std::vector<std::string>> axes(const Items& items) {
  std::vector<std::string> cats, series;
  for (auto& i : items) {
    if (std::find(cats.begin(), cats.end(), i.category) == cats.end()) cats.push_back(i.category);
    if (std::find(series.begin(), series.end(), i.series) == series.end()) series.push_back(i.series);
  }
  return {cats, series};
}

// The first line of every SVG psi writes: how a later run knows the file for its own.
constexpr const char* kSvgMark = "<!-- psi figure -->";

struct Frame {
  std::ostringstream s;
  Frame(const std::string& title, const std::string& ylabel) {
    s << kSvgMark << "\n<svg xmlns='http://www.w3.org/2000/svg' width='" << kW << "' height='" << kH
      << "' font-family='DejaVu Sans, sans-serif' font-size='12'>\n"
      << "<rect width='100%' height='100%' fill='white'/>\n"
      << "<text x='" << kW / 2 << "' y='24' text-anchor='middle' font-size='15'>" << esc(title) << "</text>\n"
      << "<text transform='translate(18," << (kTop + kH - kBottom) / 2 << ") rotate(-90)' text-anchor='middle'>"
      << esc(ylabel) << "</text>\n"
      << "<line x1='" << kLeft << "' y1='" << kH - kBottom << "' x2='" << kW - kRight << "' y2='" << kH - kBottom
      << "' stroke='black'/>\n<line x1='" << kLeft << "' y1='" << kTop << "' x2='" << kLeft << "' y2='"
      << kH - kBottom << "' stroke='black'/>\n";
  }
  void ytick(double y, const std::string& label) {
    s << "<line x1='" << kLeft - 4 << "' y1='" << y << "' x2='" << kW - kRight << "' y2='" << y
      << "' stroke='#ddd'/>\n<text x='" << kLeft - 8 << "' y='" << y + 4 << "' text-anchor='end'>" << esc(label)
      << "</text>\n";
  }
  void xlabel(double x, const std::string& label) {
    s << "<text transform='translate(" << x << "," << kH - kBottom + 16 << ") rotate(30)'>" << esc(label)
      << "</text>\n";
  }
  void legend(const std::vector<std::string>& series) {
    for (std::size_t i = 0; i < series.size(); ++i) {
      const int y = kTop + 20 * int(i);
      s << "<rect x='" << kW - kRight + 15 << "' y='" << y << "' width='12' height='12' fill='" << kColours[i % 6]
        << "'/><text x='" << kW - kRight + 33 << "' y='" << y + 11 << "'>" << esc(series[i]) << "</text>\n";
    }
  }
  std::string done() {
    s << "</svg>\n";
    return s.str();
  }
};

}  // namespace

std::string render_svg(const DotPlot& p) {
  auto [cats, series] = axes(p.points);
  double lo = 1e300, hi = 0;
  for (auto& pt : p.points)
    if (pt.value > 0) lo = std::min(lo, pt.value), hi = std::max(hi, pt.value);
  if (hi <= 0) lo = 1e-6, hi = 1;
  const double l0 = std::floor(std::log10(lo)), l1 = std::max(l0 + 1, std::ceil(std::log10(hi)));
  const double plot_h = kH - kBottom - kTop, plot_w = kW - kRight - kLeft;
  auto ypos = [&](double v) {
    const double lv = v > 0 ? std::log10(v) : l0;
    return kTop + plot_h * (1 - (lv - l0) / (l1 - l0));
  };
  Frame f(p.title, p.y_label);
  for (double e = l0; e <= l1; e += 1) f.ytick(ypos(std::pow(10.0, e)), "1e" + num(e));
  const double step = plot_w / double(std::max<std::size_t>(cats.size(), 1));
  for (std::size_t c = 0; c < cats.size(); ++c) f.xlabel(kLeft + step * (double(c) + 0.35), cats[c]);
  for (auto& pt : p.points) {
    const auto c = std::find(cats.begin(), cats.end(), pt.category) - cats.begin();
    const auto si = std::find(series.begin(), series.end(), pt.series) - series.begin();
    const double x = kLeft + step * (double(c) + 0.5) + (double(si) - double(series.size() - 1) / 2) * 8;
    f.s << "<circle cx='" << x << "' cy='" << ypos(pt.value) << "' r='5' fill='" << kColours[si % 6]
        << "'><title>" << esc(pt.series + " " + pt.category + " " + num(pt.value)) << "</title></circle>\n";
  }
  f.legend(series);
  return f.done();
}

std::string render_svg(const BarChart& b) {
  auto [cats, series] = axes(b.bars);
  // The axis spans zero and every value: a negative bar (a difference) hangs below the zero line.
  double lo = 0, hi = 0;
  for (auto& bar : b.bars) lo = std::min(lo, bar.value), hi = std::max(hi, bar.value);
  if (hi <= lo) hi = 1;
  const double plot_h = kH - kBottom - kTop, plot_w = kW - kRight - kLeft;
  const auto ypos = [&](double v) { return kTop + plot_h * (hi - v) / (hi - lo); };
  Frame f(b.title, b.y_label);
  for (int i = 0; i <= 4; ++i) f.ytick(ypos(lo + (hi - lo) * i / 4.0), num(lo + (hi - lo) * i / 4.0));
  const double step = plot_w / double(std::max<std::size_t>(cats.size(), 1));
  const double bw = step * 0.8 / double(std::max<std::size_t>(series.size(), 1));
  for (std::size_t c = 0; c < cats.size(); ++c) f.xlabel(kLeft + step * (double(c) + 0.3), cats[c]);
  for (auto& bar : b.bars) {
    const auto c = std::find(cats.begin(), cats.end(), bar.category) - cats.begin();
    const auto si = std::find(series.begin(), series.end(), bar.series) - series.begin();
    const double top = ypos(std::max(bar.value, 0.0)), h = ypos(std::min(bar.value, 0.0)) - top;
    f.s << "<rect x='" << kLeft + step * double(c) + step * 0.1 + bw * double(si) << "' y='" << top
        << "' width='" << bw << "' height='" << h << "' fill='" << kColours[si % 6] << "'><title>"
        << esc(bar.series + " " + bar.category + " " + num(bar.value)) << "</title></rect>\n";
    if (b.value_labels)
      f.s << "<text x='" << kLeft + step * double(c) + step * 0.1 + bw * (double(si) + 0.5) << "' y='"
          << top - 4 << "' text-anchor='middle' font-size='10'>" << std::int64_t(bar.value) << "</text>\n";
  }
  f.legend(series);
  return f.done();
}

std::string render_svg(const CellMap& m) {
  const double plot_h = kH - kBottom - kTop, plot_w = kW - kRight - kLeft;
  const std::size_t ncols = m.cells.empty() ? 1 : m.cells.front().size();
  const double cw = plot_w / double(std::max<std::size_t>(ncols, 1)),
               ch = plot_h / double(std::max<std::size_t>(m.cells.size(), 1));
  Frame f(m.title, m.y_label);
  f.s << "<desc>" << esc(m.data) << "</desc>\n";
  f.s << "<text x='" << kLeft - 8 << "' y='" << kTop + 10 << "' text-anchor='end'>" << esc(m.y_first) << "</text>\n"
      << "<text x='" << kLeft - 8 << "' y='" << kTop + plot_h << "' text-anchor='end'>" << esc(m.y_last) << "</text>\n"
      << "<text x='" << kLeft << "' y='" << kH - kBottom + 16 << "'>" << esc(m.x_first) << "</text>\n"
      << "<text x='" << kLeft + plot_w << "' y='" << kH - kBottom + 16 << "' text-anchor='end'>" << esc(m.x_last)
      << "</text>\n<text x='" << kLeft + plot_w / 2 << "' y='" << kH - kBottom + 40 << "' text-anchor='middle'>"
      << esc(m.x_label) << "</text>\n";
  // A run of equal cells in a row is one rectangle: the SVG stays small for large grids.
  for (std::size_t r = 0; r < m.cells.size(); ++r) {
    const std::string& row = m.cells[r];
    for (std::size_t c = 0; c < row.size();) {
      std::size_t e = c;
      while (e < row.size() && row[e] == row[c]) ++e;
      const int cls = std::stoi(std::string(1, row[c]), nullptr, 16);
      if (cls > 0 && std::size_t(cls) <= m.classes.size())
        f.s << "<rect x='" << kLeft + cw * double(c) << "' y='" << kTop + ch * double(r) << "' width='"
            << cw * double(e - c) << "' height='" << ch << "' fill='" << m.classes[std::size_t(cls - 1)].colour
            << "'/>\n";
      c = e;
    }
  }
  f.s << "<rect x='" << kLeft << "' y='" << kTop << "' width='" << plot_w << "' height='" << plot_h
      << "' fill='none' stroke='black'/>\n";
  for (std::size_t i = 0; i < m.classes.size(); ++i) {
    const int y = kTop + 20 * int(i);
    f.s << "<rect x='" << kW - kRight + 15 << "' y='" << y << "' width='12' height='12' fill='" << m.classes[i].colour
        << "'/><text x='" << kW - kRight + 33 << "' y='" << y + 11 << "'>" << esc(m.classes[i].label) << "</text>\n";
  }
  return f.done();
}

namespace {

// A file name as the converter must read it: a relative name starting with '-' (a figure beside
// a report named "-x.h5") would be read as an option, so every relative name starts with "./".
std::string as_operand(const std::filesystem::path& p) {
  return p.is_absolute() ? p.string() : (std::filesystem::path(".") / p).string();
}

bool svg_to_png(const std::filesystem::path& svg, const std::filesystem::path& png) {
  const std::string in = as_operand(svg), out = as_operand(png);
  const pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    // "--" too: past it the converter reads no option, whatever the name.
    execlp("rsvg-convert", "rsvg-convert", "-o", out.c_str(), "--", in.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

std::filesystem::path figure_file(const std::filesystem::path& report, const Figure& fig, const std::string& ext) {
  std::filesystem::path p = report;
  p.replace_extension("." + fig.name + ext);
  return p;
}

bool is_psi_figure(const std::filesystem::path& p) {
  if (p.extension() == ".svg") return hdf5::first_line_is(kSvgMark)(p);
  if (p.extension() != ".png") return false;
  std::ifstream in(p, std::ios::binary);
  char magic[8] = {};
  if (!in.read(magic, 8) || std::string(magic, 8) != "\x89PNG\r\n\x1a\n") return false;
  std::filesystem::path svg = p;
  svg.replace_extension(".svg");
  return hdf5::first_line_is(kSvgMark)(svg);
}

std::vector<std::filesystem::path> write_figures(const std::filesystem::path& report, const std::vector<Figure>& figs,
                                                 std::vector<std::string>& notes) {
  std::vector<std::filesystem::path> written;
  for (const Figure& fig : figs) {
    const std::filesystem::path svg = figure_file(report, fig, ".svg");
    hdf5::write_file_atomically(svg, fig.svg);
    written.push_back(svg);
    const std::filesystem::path png = figure_file(report, fig, ".png");
    std::filesystem::path ptmp = hdf5::temp_name(png);
    ptmp += ".png";
    register_temp_file(ptmp.string());
    if (svg_to_png(svg, ptmp)) {
      try {
        hdf5::rename_into_place(ptmp, png);
      } catch (...) {
        std::error_code ec;
        std::filesystem::remove(ptmp, ec);
        release_temp_file(ptmp.string());
        throw;
      }
      release_temp_file(ptmp.string());
      written.push_back(png);
    } else {
      std::error_code ec;
      std::filesystem::remove(ptmp, ec);
      release_temp_file(ptmp.string());
      notes.push_back(png.string() + " not written: rsvg-convert (Debian package librsvg2-bin) is not available");
    }
  }
  return written;
}

}  // namespace psi::report
