// psi's difference figures (issue 27.9): where a tensor differs from its recording and by how
// many ULPs, drawn from numbers psi also prints.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <regex>
#include <string>

#include "engine/bf16.h"
#include "engine/diff_map.h"
#include "engine/distance.h"
#include "psi_command.h"
#include "report/diff_figures.h"
#include "report/figures.h"

namespace fs = std::filesystem;

namespace {

psi::Bf16 plus_ulps(psi::Bf16 v, int n) { return psi::Bf16{std::uint16_t(v.bits + n)}; }

}  // namespace

// Each differing element lands in the class of its ULP distance (a sign flip apart, as
// engine/distance.h counts it), the histogram sums to the differing count, and each cell holds
// the largest class among its elements.
TEST(DiffMap, ClassesHistogramAndCells) {
  const std::int64_t rows = 300, cols = 170;  // above the cell grid's limits: binned
  std::vector<psi::Bf16> ref(std::size_t(rows * cols), psi::bf16_rne(1.0f)), ours = ref;
  ours[0] = plus_ulps(ref[0], 1);                 // cell (0, 0): 1 ULP
  ours[1] = plus_ulps(ref[1], 3);                 // cell (0, 0) too: 3 ULP, class "3-4"
  ours[std::size_t(299 * cols + 169)] = psi::bf16_rne(-1.0f);  // the last cell: a sign flip
  ours[std::size_t(150 * cols)] = plus_ulps(ref[0], 2000);     // ">1024"
  const psi::DiffMap m = psi::diff_map(ours, ref, 7, rows, cols);
  EXPECT_EQ(m.differing(), psi::distance(ours, ref).differing);
  EXPECT_EQ(m.histogram[0], 1);
  EXPECT_EQ(m.histogram[2], 1);
  EXPECT_EQ(m.histogram[11], 1);
  EXPECT_EQ(m.histogram[std::size_t(psi::kSignFlipClass - 1)], 1);
  EXPECT_EQ(psi::ulp_class_label(3), "3-4");
  EXPECT_EQ(psi::ulp_class_label(12), ">1024");
  EXPECT_EQ(m.row_step, 3);  // 300 rows in at most 128 cells
  EXPECT_EQ(m.col_step, 2);  // 170 channels in at most 160
  ASSERT_EQ(m.cell_rows(), 100);
  ASSERT_EQ(m.cell_cols(), 85);
  EXPECT_EQ(m.cells[0][0], '3');
  EXPECT_EQ(m.cells[99][84], 'd');
  EXPECT_EQ(m.cells[50][0], 'c');
  EXPECT_EQ(m.cells[1][0], '0');
  EXPECT_EQ(m.first_row, 7);
}

// psi probe --figures writes a map and a histogram per differing comparison as SVG and PNG, and
// prints the histogram's numbers, which add up to the differing count of its row.
TEST(DiffFigures, ProbeWritesCheckableFigures) {
  const fs::path dir = fs::temp_directory_path() / ("psi_diff_figures_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const auto r = psi::testing::run_psi_in("probe audio-ff-up --variant dense --variant official-h200 --figures " +
                                              (dir / "figs").string(), dir);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  for (const std::string tensor : {"proj_out", "gelu_out"}) {
    std::smatch row, hist;
    ASSERT_TRUE(std::regex_search(r.out, row, std::regex("\ndense +" + tensor + " +official all +differs (\\d+)/")))
        << r.out;
    ASSERT_TRUE(std::regex_search(r.out, hist, std::regex("figures dense\\." + tensor + "\\.official: ULP classes \\(elements\\): ([^;]*); sum (\\d+)")))
        << r.out;
    std::int64_t sum = 0;
    const std::string counts = hist[1];
    const std::regex count(": (\\d+)");
    for (auto it = std::sregex_iterator(counts.begin(), counts.end(), count); it != std::sregex_iterator(); ++it)
      sum += std::stoll((*it)[1]);
    EXPECT_EQ(sum, std::stoll(row[1])) << hist[0];
    EXPECT_EQ(hist[2], row[1]);
    for (const std::string kind : {"ulp-map", "ulp-histogram"}) {
      const fs::path stem = dir / "figs" / ("audio-ff-up.dense." + tensor + ".official." + kind);
      const std::string svg = psi::testing::slurp(fs::path(stem) += ".svg");
      EXPECT_EQ(svg.rfind("<!-- psi figure -->\n<svg xmlns='http://www.w3.org/2000/svg'", 0), 0u) << stem;
      EXPECT_NE(svg.find("</svg>\n"), std::string::npos) << stem;
      // The map keeps the numbers it draws (XML-escaped in its <desc>): the same histogram line.
      if (kind == "ulp-map") {
        const std::string line = std::regex_replace(hist[0].str().substr(hist[0].str().find("ULP classes")),
                                                    std::regex(">"), "&gt;");
        EXPECT_NE(svg.find(line), std::string::npos) << line;
      }
      const std::string png = psi::testing::slurp(fs::path(stem) += ".png");
      EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8)) << stem;
    }
  }
  // official-h200 reproduces the recording: nothing differs, nothing is drawn.
  EXPECT_EQ(r.out.find("official-h200.proj_out"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir / "figs" / "audio-ff-up.official-h200.proj_out.official.ulp-map.svg"));
  fs::remove_all(dir);
}

// A --figures path that is a file is refused before any work, in one line, exit 2.
TEST(DiffFigures, AFileIsNoFiguresFolder) {
  const fs::path dir = fs::temp_directory_path() / ("psi_diff_figures_bad_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  { std::ofstream(dir / "file") << "x"; }
  const auto r = psi::testing::run_psi_in("probe audio-ff-up --variant dense --figures " + (dir / "file").string(), dir);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--figures " + (dir / "file").string() + ": not a folder"), std::string::npos) << r.err;
  fs::remove_all(dir);
}

// The PNG converter never reads a file name as an option (issue 41.6): a --figures folder whose
// relative name starts with '-' gave rsvg-convert "-figs/....png" after -o and "-figs/....svg",
// which it took for options, and no PNG was written.
TEST(DiffFigures, AFolderNamedLikeAnOptionGetsItsPngs) {
  const fs::path dir = fs::temp_directory_path() / ("psi_diff_figures_dash_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path cwd = fs::current_path();
  fs::current_path(dir);  // the name is relative: psi runs in `dir`
  const auto r = psi::testing::run_psi_in("probe audio-ff-up --variant dense --figures=-figs", dir);
  fs::current_path(cwd);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  for (const std::string kind : {"ulp-map", "ulp-histogram"}) {
    const fs::path png = dir / "-figs" / ("audio-ff-up.dense.proj_out.official." + kind + ".png");
    EXPECT_EQ(psi::testing::slurp(png).substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8)) << png << "\n" << r.out;
  }
  fs::remove_all(dir);
}

namespace {

// The texts of an SVG's <text> elements whose attributes contain `attr`.
std::vector<std::string> texts(const std::string& svg, const std::string& attr = "") {
  std::vector<std::string> out;
  const std::regex text("<text([^>]*)>([^<]*)</text>");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), text); it != std::sregex_iterator(); ++it)
    if ((*it)[1].str().find(attr) != std::string::npos) out.push_back((*it)[2]);
  return out;
}

int svg_width(const std::string& svg) {
  std::smatch m;
  EXPECT_TRUE(std::regex_search(svg, m, std::regex("<svg [^>]*width='(\\d+)'")));
  return std::stoi(m[1]);
}

}  // namespace

// Figures a reader learns from (issue 43.5): a bar chart whose values change sign draws a zero
// line where its zero tick is, its ticks are round numbers sharing one power of ten named beside
// the axis (not 1.28e-06 / -2.33e-05 at each tick), a long title is broken into lines that fit,
// the legend's longest label fits in the width, and log counts tick at powers of ten.
TEST(Figures, ReadableAxesTitlesAndLegends) {
  psi::report::BarChart d;
  d.title = "Δ = modified − baseline, video endpoint relative L2 to dense, per case (the table's Δ video), "
            "with a title long enough to need a second line";
  d.y_label = "Δ relative L2";
  const double v[] = {1.28e-06, -2.33e-05, 4.1e-06, -7.7e-06, 1.5e-05};
  for (int i = 0; i < 5; ++i) d.bars.push_back({"case " + std::to_string(i), "modified − baseline, a long series label", v[i]});
  const std::string svg = psi::report::render_svg(d);
  const int width = svg_width(svg);
  // Ticks: -3, -2, ..., 2 (× 10⁻⁵), zero among them.
  std::vector<std::string> ticks = texts(svg, "text-anchor='end'");
  EXPECT_EQ(ticks, (std::vector<std::string>{"-3", "-2", "-1", "0", "1", "2"}));
  EXPECT_NE(svg.find(">Δ relative L2 (× 10⁻⁵)</text>"), std::string::npos) << svg;
  // The zero line lies where the 0 tick's grid line does.
  std::smatch zero, grid;
  ASSERT_TRUE(std::regex_search(svg, zero, std::regex("<line x1='\\d+' y1='([0-9.]+)' x2='\\d+' y2='[0-9.]+' stroke='black' stroke-width='1.2'/>")))
      << svg;
  ASSERT_TRUE(std::regex_search(svg, grid, std::regex("y1='([0-9.]+)' x2='\\d+' y2='[0-9.]+' stroke='#ddd'/>\\n<text [^>]*>0</text>")))
      << svg;
  EXPECT_EQ(zero[1], grid[1]);
  // The title on two lines, each within the width (15 px text, at most 9 px a character).
  const auto title = texts(svg, "font-size='15'");
  ASSERT_EQ(title.size(), 2u) << svg;
  for (const auto& t : title) EXPECT_LE(double(t.size()) * 9.0, width) << t;
  // The legend's label ends inside the figure (12 px text, at most 7.2 px a character).
  std::smatch legend;
  ASSERT_TRUE(std::regex_search(svg, legend, std::regex("<text x='(\\d+)' y='\\d+'>modified − baseline, a long series label</text>")));
  EXPECT_LE(std::stod(legend[1]) + 7.2 * 40, width);

  psi::report::BarChart counts;
  counts.log_y = true;
  counts.y_label = "elements";
  for (const auto& [label, n] : std::vector<std::pair<std::string, double>>{{"1", 62709}, {"2", 8093}, {"3-4", 0}, {"sign flip", 1}})
    counts.bars.push_back({label, "differing elements", n});
  EXPECT_EQ(texts(psi::report::render_svg(counts), "text-anchor='end'"),
            (std::vector<std::string>{"1", "10", "100", "1000", "10⁴", "10⁵"}));
}

// The difference map's title counts its cells' tokens and channels in words that agree: "1
// token x 4 channels", not "1 tokens".
TEST(Figures, DiffMapTitleSaysOneToken) {
  std::vector<psi::Bf16> ref(8 * 4, psi::Bf16::from_bits(0x3f80)), ours = ref;
  ours[5] = plus_ulps(ours[5], 1);
  const psi::DiffMap m = psi::diff_map(ours, ref, 0, 8, 4);
  ASSERT_EQ(m.row_step, 1);
  const auto figs = psi::report::diff_figures("x", "dense q vs the recording", m);
  EXPECT_NE(figs[0].svg.find("per cell of 1 token x 1 channel"), std::string::npos) << figs[0].svg;
  EXPECT_EQ(figs[0].svg.find("1 tokens"), std::string::npos);
}
