#include "report/figures.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "outputs/output_path.h"
#include "outputs/pending_output.h"

namespace psi::report {

namespace {

constexpr int kW = 900, kH = 480, kLeft = 90, kRight = 170, kTop = 50, kBottom = 80;
const char* kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#7f7f7f"};
constexpr int kNColours = 7;
// Width of a character in pixels, about, at the body's 12 px and the title's 15 px (DejaVu Sans):
// what margins and line breaks are sized by, so that no label is cut off.
constexpr double kCharW = 7.2, kTitleCharW = 9.0;

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

// Characters, not bytes (a UTF-8 title counts each of its letters once).
double text_chars(const std::string& s) {
  double n = 0;
  for (unsigned char c : s) n += (c & 0xc0) != 0x80;
  return n;
}

// "10⁻⁵": a power of ten as a reader writes it.
std::string power_of_ten(int e) {
  static const char* sup[] = {"⁰", "¹", "²", "³", "⁴", "⁵", "⁶", "⁷", "⁸", "⁹"};
  std::string digits = std::to_string(e < 0 ? -e : e), out = "10";
  if (e < 0) out += "⁻";
  for (char d : digits) out += sup[d - '0'];
  return out;
}

// Tick values for a linear axis over [lo, hi]: multiples of 1, 2 or 5 × 10^k, about five of them,
// spanning the data (so zero is a tick when the data change sign). Labels share one power of
// ten (`exponent`, shown beside the axis name) when the values are very small or large.
struct Ticks {
  std::vector<double> values;
  double step = 1;
  int exponent = 0;
  std::string label(double v) const {
    const double scaled = v / std::pow(10.0, exponent), st = step / std::pow(10.0, exponent);
    const int decimals = std::max(0, int(-std::floor(std::log10(st) + 1e-9)));
    char b[48];
    std::snprintf(b, sizeof b, "%.*f", decimals, std::abs(scaled) < st * 1e-6 ? 0.0 : scaled);
    return b;
  }
};

Ticks linear_ticks(double lo, double hi) {
  Ticks t;
  const double raw = (hi - lo) / 4, mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / mag;
  t.step = mag * (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10);
  const double first = std::floor(lo / t.step + 1e-9) * t.step, last = std::ceil(hi / t.step - 1e-9) * t.step;
  for (double v = first; v <= last + t.step * 1e-6; v += t.step) t.values.push_back(v);
  const double top = std::max(std::abs(first), std::abs(last));
  const int e = int(std::floor(std::log10(top)));
  if (e < -2 || e > 5) t.exponent = e;
  return t;
}

// The axis name with the ticks' common power of ten: "Δ relative L2 (× 10⁻⁵)".
std::string axis_name(const std::string& name, int exponent) {
  return exponent == 0 ? name : name + " (× " + power_of_ten(exponent) + ")";
}

// Breaks `text` at spaces into lines of at most `width` characters.
std::vector<std::string> wrap(const std::string& text, double width) {
  std::vector<std::string> lines;
  std::istringstream words(text);
  std::string line;
  for (std::string w; words >> w;) {
    if (!line.empty() && text_chars(line) + 1 + text_chars(w) > width) {
      lines.push_back(line);
      line.clear();
    }
    line += (line.empty() ? "" : " ") + w;
  }
  if (!line.empty()) lines.push_back(line);
  return lines;
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

// What a figure shows around its plot, sized so that everything fits: the title (wrapped), the
// legend's longest label on the right, the slanted category labels below.
struct Layout {
  std::string title;
  std::vector<std::string> legend;      // series or class labels
  std::vector<std::string> categories;  // x labels drawn slanted (none for a cell map)
  bool x_axis_name = false;             // a line for the x axis' name below the labels
};

struct Frame {
  std::ostringstream s;
  int w = kW, h = kH, left = kLeft, right = kRight, top = kTop, bottom = kBottom;
  double plot_w() const { return w - left - right; }
  double plot_h() const { return h - top - bottom; }

  Frame(const Layout& l, const std::string& ylabel) {
    double legend_chars = 0, category_chars = 0;
    for (const auto& x : l.legend) legend_chars = std::max(legend_chars, text_chars(x));
    for (const auto& x : l.categories) category_chars = std::max(category_chars, text_chars(x));
    right = std::max(kRight, int(45 + kCharW * legend_chars));
    w = kW - kRight + right;  // the plot keeps its width
    const std::vector<std::string> title = wrap(l.title, (w - 30) / kTitleCharW);
    top = kTop + 19 * int(title.size() - 1);
    // A label slanted 30° reaches half its length below the axis.
    bottom = std::max(kBottom, int(30 + 0.5 * kCharW * category_chars + (l.x_axis_name ? 24 : 0)));
    h = kH - kTop - kBottom + top + bottom;
    s << kSvgMark << "\n<svg xmlns='http://www.w3.org/2000/svg' width='" << w << "' height='" << h
      << "' font-family='DejaVu Sans, sans-serif' font-size='12'>\n"
      << "<rect width='100%' height='100%' fill='white'/>\n";
    for (std::size_t i = 0; i < title.size(); ++i)
      s << "<text x='" << w / 2 << "' y='" << 24 + 19 * int(i) << "' text-anchor='middle' font-size='15'>"
        << esc(title[i]) << "</text>\n";
    s << "<text transform='translate(18," << top + plot_h() / 2 << ") rotate(-90)' text-anchor='middle'>"
      << esc(ylabel) << "</text>\n"
      << "<line x1='" << left << "' y1='" << h - bottom << "' x2='" << w - right << "' y2='" << h - bottom
      << "' stroke='black'/>\n<line x1='" << left << "' y1='" << top << "' x2='" << left << "' y2='"
      << h - bottom << "' stroke='black'/>\n";
  }
  void ytick(double y, const std::string& label) {
    s << "<line x1='" << left - 4 << "' y1='" << y << "' x2='" << w - right << "' y2='" << y
      << "' stroke='#ddd'/>\n<text x='" << left - 8 << "' y='" << y + 4 << "' text-anchor='end'>" << esc(label)
      << "</text>\n";
  }
  // The line where the values change sign, drawn over the grid.
  void zero_line(double y) {
    s << "<line x1='" << left << "' y1='" << y << "' x2='" << w - right << "' y2='" << y
      << "' stroke='black' stroke-width='1.2'/>\n";
  }
  void xlabel(double x, const std::string& label) {
    s << "<text transform='translate(" << x << "," << h - bottom + 16 << ") rotate(30)'>" << esc(label)
      << "</text>\n";
  }
  void legend_entry(std::size_t i, const std::string& colour, const std::string& label) {
    const int y = top + 20 * int(i);
    s << "<rect x='" << w - right + 15 << "' y='" << y << "' width='12' height='12' fill='" << colour
      << "'/><text x='" << w - right + 33 << "' y='" << y + 11 << "'>" << esc(label) << "</text>\n";
  }
  void legend(const std::vector<std::string>& series) {
    for (std::size_t i = 0; i < series.size(); ++i) legend_entry(i, kColours[i % kNColours], series[i]);
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
  Frame f(Layout{p.title, series, cats}, p.y_label);
  auto ypos = [&](double v) {
    const double lv = v > 0 ? std::log10(v) : l0;
    return f.top + f.plot_h() * (1 - (lv - l0) / (l1 - l0));
  };
  for (double e = l0; e <= l1; e += 1) f.ytick(ypos(std::pow(10.0, e)), power_of_ten(int(e)));
  const double step = f.plot_w() / double(std::max<std::size_t>(cats.size(), 1));
  for (std::size_t c = 0; c < cats.size(); ++c) f.xlabel(f.left + step * (double(c) + 0.35), cats[c]);
  for (auto& pt : p.points) {
    const auto c = std::find(cats.begin(), cats.end(), pt.category) - cats.begin();
    const auto si = std::find(series.begin(), series.end(), pt.series) - series.begin();
    const double x = f.left + step * (double(c) + 0.5) + (double(si) - double(series.size() - 1) / 2) * 8;
    f.s << "<circle cx='" << x << "' cy='" << ypos(pt.value) << "' r='5' fill='" << kColours[si % kNColours]
        << "'><title>" << esc(pt.series + " " + pt.category + " " + num(pt.value)) << "</title></circle>\n";
  }
  f.legend(series);
  return f.done();
}

std::string render_svg(const BarChart& b) {
  auto [cats, series] = axes(b.bars);
  double lo = 0, hi = 0;
  for (auto& bar : b.bars) lo = std::min(lo, bar.value), hi = std::max(hi, bar.value);
  // Log counts: powers of ten from 1 to above the largest; a bar starts a little below 1 so that a
  // count of 1 shows, and a count of 0 has none. Else the axis spans zero and every value: a
  // negative bar (a difference) hangs below the zero line.
  const bool log_y = b.log_y && hi > 0;
  const double l1 = log_y ? std::max(1.0, std::ceil(std::log10(hi))) : 0, l0 = -0.3;
  Ticks ticks;
  if (!log_y) {
    if (hi <= lo) hi = 1;
    ticks = linear_ticks(lo, hi);
    lo = ticks.values.front();
    hi = ticks.values.back();
  }
  Frame f(Layout{b.title, series, cats}, axis_name(b.y_label, ticks.exponent));
  const auto ypos = [&](double v) {
    if (log_y) return f.top + f.plot_h() * (1 - ((v > 0 ? std::log10(v) : l0) - l0) / (l1 - l0));
    return f.top + f.plot_h() * (hi - v) / (hi - lo);
  };
  if (log_y)
    for (int e = 0; e <= int(l1); ++e) f.ytick(ypos(std::pow(10.0, e)), e < 4 ? std::to_string(int(std::pow(10.0, e))) : power_of_ten(e));
  else
    for (double v : ticks.values) f.ytick(ypos(v), ticks.label(v));
  if (!log_y && lo < 0 && hi > 0) f.zero_line(ypos(0));
  const double base = log_y ? std::pow(10.0, l0) : 0.0;
  const double step = f.plot_w() / double(std::max<std::size_t>(cats.size(), 1));
  const double bw = step * 0.8 / double(std::max<std::size_t>(series.size(), 1));
  for (std::size_t c = 0; c < cats.size(); ++c) f.xlabel(f.left + step * (double(c) + 0.3), cats[c]);
  for (auto& bar : b.bars) {
    const auto c = std::find(cats.begin(), cats.end(), bar.category) - cats.begin();
    const auto si = std::find(series.begin(), series.end(), bar.series) - series.begin();
    const double shown = log_y && bar.value <= 0 ? base : bar.value;
    const double top = ypos(std::max(shown, base)), h = ypos(std::min(shown, base)) - top;
    f.s << "<rect x='" << f.left + step * double(c) + step * 0.1 + bw * double(si) << "' y='" << top
        << "' width='" << bw << "' height='" << h << "' fill='" << kColours[si % kNColours] << "'><title>"
        << esc(bar.series + " " + bar.category + " " + num(bar.value)) << "</title></rect>\n";
    if (b.value_labels)
      f.s << "<text x='" << f.left + step * double(c) + step * 0.1 + bw * (double(si) + 0.5) << "' y='"
          << top - 4 << "' text-anchor='middle' font-size='10'>" << std::int64_t(bar.value) << "</text>\n";
  }
  f.legend(series);
  return f.done();
}

std::string render_svg(const CellMap& m) {
  std::vector<std::string> labels;
  for (const auto& c : m.classes) labels.push_back(c.label);
  Frame f(Layout{m.title, labels, {}, true}, m.y_label);
  const double plot_h = f.plot_h(), plot_w = f.plot_w();
  const double left = f.left, top = f.top, axis = f.h - f.bottom;
  const std::size_t ncols = m.cells.empty() ? 1 : m.cells.front().size();
  const double cw = plot_w / double(std::max<std::size_t>(ncols, 1)),
               ch = plot_h / double(std::max<std::size_t>(m.cells.size(), 1));
  f.s << "<desc>" << esc(m.data) << "</desc>\n";
  f.s << "<text x='" << left - 8 << "' y='" << top + 10 << "' text-anchor='end'>" << esc(m.y_first) << "</text>\n"
      << "<text x='" << left - 8 << "' y='" << top + plot_h << "' text-anchor='end'>" << esc(m.y_last) << "</text>\n"
      << "<text x='" << left << "' y='" << axis + 16 << "'>" << esc(m.x_first) << "</text>\n"
      << "<text x='" << left + plot_w << "' y='" << axis + 16 << "' text-anchor='end'>" << esc(m.x_last)
      << "</text>\n<text x='" << left + plot_w / 2 << "' y='" << axis + 40 << "' text-anchor='middle'>"
      << esc(m.x_label) << "</text>\n";
  // A run of equal cells in a row is one rectangle: the SVG stays small for large grids.
  for (std::size_t r = 0; r < m.cells.size(); ++r) {
    const std::string& row = m.cells[r];
    for (std::size_t c = 0; c < row.size();) {
      std::size_t e = c;
      while (e < row.size() && row[e] == row[c]) ++e;
      const int cls = std::stoi(std::string(1, row[c]), nullptr, 16);
      if (cls > 0 && std::size_t(cls) <= m.classes.size())
        f.s << "<rect x='" << left + cw * double(c) << "' y='" << top + ch * double(r) << "' width='"
            << cw * double(e - c) << "' height='" << ch << "' fill='" << m.classes[std::size_t(cls - 1)].colour
            << "'/>\n";
      c = e;
    }
  }
  f.s << "<rect x='" << left << "' y='" << top << "' width='" << plot_w << "' height='" << plot_h
      << "' fill='none' stroke='black'/>\n";
  for (std::size_t i = 0; i < m.classes.size(); ++i) f.legend_entry(i, m.classes[i].colour, m.classes[i].label);
  return f.done();
}

namespace {

// Whether the file at `fd` is a whole PNG: the signature, the IHDR chunk first, IEND last.
bool is_whole_png(int fd) {
  static const char kHead[] = "\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR";
  static const char kTail[] = "\0\0\0\0IEND\xae\x42\x60\x82";
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size < 16 + 12) return false;
  char head[16], tail[12];
  return ::pread(fd, head, 16, 0) == 16 && ::pread(fd, tail, 12, st.st_size - 12) == 12 &&
         std::memcmp(head, kHead, 16) == 0 && std::memcmp(tail, kTail, 12) == 0;
}

// rsvg-convert reads the SVG on its standard input and writes the PNG on its standard output,
// the pending file itself: no file name reaches it, so none can be read as an option. What it
// wrote is put in place only if it exited 0 and wrote a whole PNG; otherwise why not is returned.
std::string svg_to_png(const std::string& svg, int png_fd) {
  const std::string unavailable = "rsvg-convert (Debian package librsvg2-bin) is not available";
  const int in = ::memfd_create("psi-figure-svg", MFD_CLOEXEC);
  if (in < 0) return unavailable;
  bool written = true;
  for (std::size_t done = 0; written && done < svg.size();) {
    const ssize_t n = ::write(in, svg.data() + done, svg.size() - done);
    if (n > 0) done += std::size_t(n);
    else if (!(n < 0 && errno == EINTR)) written = false;
  }
  if (!written || ::lseek(in, 0, SEEK_SET) != 0) {
    ::close(in);
    return "the SVG could not be handed to rsvg-convert: " + std::string(std::strerror(errno));
  }
  const pid_t pid = fork();
  if (pid < 0) {
    ::close(in);
    return "rsvg-convert could not be started: " + std::string(std::strerror(errno));
  }
  if (pid == 0) {
    // Both moved above 2 first, so that neither is lost when one already is 0 or 1 (a psi
    // started with a standard descriptor closed); the copies dup2 makes lose FD_CLOEXEC.
    const int svg_in = ::fcntl(in, F_DUPFD, 3), png_out = ::fcntl(png_fd, F_DUPFD, 3);
    if (svg_in < 0 || png_out < 0 || ::dup2(svg_in, STDIN_FILENO) < 0 || ::dup2(png_out, STDOUT_FILENO) < 0) _exit(127);
    ::close(svg_in);
    ::close(png_out);
    // Its messages go nowhere rather than into a file that took descriptor 2.
    if (::fcntl(STDERR_FILENO, F_GETFD) < 0 && ::open("/dev/null", O_WRONLY) != STDERR_FILENO) _exit(127);
    execlp("rsvg-convert", "rsvg-convert", "--format=png", static_cast<char*>(nullptr));
    _exit(127);
  }
  ::close(in);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return "rsvg-convert could not be waited for: " + std::string(std::strerror(errno));
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127) return unavailable;
  if (WIFSIGNALED(status)) return "rsvg-convert was killed by signal " + std::to_string(WTERMSIG(status));
  if (WEXITSTATUS(status) != 0) return "rsvg-convert exited with status " + std::to_string(WEXITSTATUS(status));
  if (!is_whole_png(png_fd)) return "rsvg-convert exited 0 but did not write a whole PNG";
  return "";
}

}  // namespace

std::filesystem::path figure_file(const std::filesystem::path& report, const Figure& fig, const std::string& ext) {
  std::filesystem::path p = report;
  p.replace_extension("." + fig.name + ext);
  return p;
}

bool is_psi_figure(const std::filesystem::path& p) {
  if (p.extension() == ".svg") return outputs::first_line_is(kSvgMark)(p);
  if (p.extension() != ".png") return false;
  std::ifstream in(p, std::ios::binary);
  char magic[8] = {};
  if (!in.read(magic, 8) || std::string(magic, 8) != "\x89PNG\r\n\x1a\n") return false;
  std::filesystem::path svg = p;
  svg.replace_extension(".svg");
  return outputs::first_line_is(kSvgMark)(svg);
}

std::vector<std::filesystem::path> write_figures(const std::filesystem::path& report, const std::vector<Figure>& figs,
                                                 std::vector<std::string>& notes) {
  std::vector<std::filesystem::path> written;
  for (const Figure& fig : figs) {
    const std::filesystem::path svg = figure_file(report, fig, ".svg");
    outputs::write_file_atomically(svg, fig.svg);
    written.push_back(svg);
    const std::filesystem::path png = figure_file(report, fig, ".png");
    outputs::PendingOutput file(png);
    if (const std::string why = svg_to_png(fig.svg, file.fd()); why.empty()) {
      file.commit();
      written.push_back(png);
    } else {
      notes.push_back(png.string() + " not written: " + why);
    }
  }
  return written;
}

}  // namespace psi::report
