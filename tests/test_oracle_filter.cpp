// The float64 filter in front of the exact path (oracle/float64_filter.h): its verdicts are the
// exact path's, element for element, on both recorded projections and on crafted worst cases
// (exact midpoints and values a hair beside them, heavy cancellation, subnormal and zero
// results, overflow, a huge K), and it sends the undecidable ones to the exact path.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <vector>

#include "engine/error.h"
#include "hdf5/h5.h"
#include "oracle/fixed_dot.h"
#include "oracle/float64_filter.h"
#include "oracle/operands.h"
#include "tests/recordings.h"

namespace po = psi::oracle;
using psi::Bf16;

namespace {

Bf16 b16(double v) { return psi::bf16_rne(float(v)); }

struct Case {
  std::vector<Bf16> x, w, b;
  std::int64_t K = 0;
};

void expect_filter_is_exact(const Case& c, int threads, std::int64_t* sent_exact = nullptr) {
  const std::int64_t rows = std::int64_t(c.x.size()) / c.K;
  const po::CertifiedLinear f = po::certified_linear(c.x, c.w, c.b, c.K, 0, rows, threads);
  const psi::Bf16Tensor e = po::correctly_rounded_linear(c.x, c.w, c.b, c.K, 0, rows, threads);
  ASSERT_EQ(f.correct.numel(), e.numel());
  for (std::int64_t i = 0; i < e.numel(); ++i)
    ASSERT_EQ(f.correct.data[std::size_t(i)].bits, e.data[std::size_t(i)].bits) << "element " << i;
  EXPECT_EQ(f.decided_by_filter + f.sent_exact, e.numel());
  if (sent_exact) *sent_exact = f.sent_exact;
}

}  // namespace

TEST(OracleFilter, RecordedProjectionsGiveTheExactVerdicts) {
  const auto file = psi::test::reference_file("probes_linear.h5");
  auto f = psi::hdf5::File::open_read(file);
  for (const char* probe : {"probe_audio_ff_up", "probe_video_q_proj"}) {
    const po::LinearProblem p = po::load_probe(f, probe);
    const po::CertifiedLinear c = po::certified_linear(p.x.data, p.w.data, p.bias_span(), p.K, 0, p.rows, 2);
    const psi::Bf16Tensor e = po::correctly_rounded_linear(p.x.data, p.w.data, p.bias_span(), p.K, 0, p.rows, 2);
    std::int64_t differ = 0;
    for (std::int64_t i = 0; i < e.numel(); ++i) differ += c.correct.data[std::size_t(i)].bits != e.data[std::size_t(i)].bits;
    EXPECT_EQ(differ, 0) << probe;
    // Nearly everything is far from a rounding boundary.
    EXPECT_GT(c.decided_by_filter, e.numel() * 999 / 1000) << probe;
  }
}

TEST(OracleFilter, MidpointsAndTheirNeighboursGoExact) {
  // x·w + b lands exactly on a BF16 midpoint (1 + 2^-8 between 1 and 1 + 2^-7; ties to even),
  // and a product of 2^-40 moves it a hair either way; the filter cannot decide those.
  Case c;
  c.K = 3;
  for (double tail : {0.0, 0x1p-40, -0x1p-40, 0x1p-60})
    for (double base : {1.0, 1.0 + 0x1p-7}) {
      c.x.insert(c.x.end(), {b16(base), b16(0x1p-8), b16(tail == 0 ? 0.0 : std::copysign(1.0, tail))});
    }
  for (double tail : {0x1p-40, 0x1p-60}) c.w.insert(c.w.end(), {b16(1.0), b16(1.0), b16(tail)});
  std::int64_t sent = 0;
  expect_filter_is_exact(c, 1, &sent);
  EXPECT_GE(sent, 8);
  c.b = {b16(0.5), b16(-3.0)};
  expect_filter_is_exact(c, 2);
}

TEST(OracleFilter, CancellationSubnormalsZerosAndOverflow) {
  Case c;
  c.K = 4;
  // heavy cancellation leaving a small exact rest
  c.x.insert(c.x.end(), {b16(0x1p100), b16(-0x1p100), b16(1.5), b16(0x1p-20)});
  // a subnormal result
  c.x.insert(c.x.end(), {b16(0x1p-70), b16(0x1p-71), b16(0.0), b16(0.0)});
  // exactly zero
  c.x.insert(c.x.end(), {b16(2.0), b16(-2.0), b16(0.0), b16(0.0)});
  // beyond the largest BF16
  c.x.insert(c.x.end(), {b16(0x1.fep127), b16(0x1.fep127), b16(0.0), b16(0.0)});
  c.w.insert(c.w.end(), {b16(1.0), b16(1.0), b16(1.0), b16(1.0)});
  c.w.insert(c.w.end(), {b16(0x1p-70), b16(0x1p-70), b16(1.0), b16(0.25)});
  expect_filter_is_exact(c, 1);
}

TEST(OracleFilter, RandomAndHugeK) {
  std::mt19937 g(7);
  std::normal_distribution<double> n(0.0, 1.0);
  for (std::int64_t K : {1, 16, 1000, 100000}) {
    Case c;
    c.K = K;
    const std::int64_t rows = K > 1000 ? 2 : 9, cols = K > 1000 ? 3 : 11;
    for (std::int64_t i = 0; i < rows * K; ++i) c.x.push_back(b16(n(g) * std::exp2(int(n(g) * 4))));
    for (std::int64_t i = 0; i < cols * K; ++i) c.w.push_back(b16(n(g)));
    for (std::int64_t i = 0; i < cols; ++i) c.b.push_back(b16(n(g)));
    expect_filter_is_exact(c, 2);
  }
}

TEST(OracleFilter, NonFiniteOperandsTakeTheExactPathsError) {
  Case c;
  c.K = 2;
  c.x = {b16(1.0), Bf16::from_bits(0x7fc0)};
  c.w = {b16(1.0), b16(1.0)};
  EXPECT_THROW(po::certified_linear(c.x, c.w, c.b, c.K, 0, 1, 1), psi::Error);
}
