// psi oracle certify / explain: on the recorded probe (a few rows), on operand files written
// with hdf5/h5.h and with h5py (tests/data/oracle/fixture.h5), on a recording made with the
// H200 tensor-core model (certify --json / --list, explain --trace), and on bad input.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>

#include "engine/error.h"
#include "engine/official/tensor_core.h"
#include "engine/sha256.h"
#include "engine/synthinit.h"
#include "hdf5/h5.h"
#include "oracle/certify.h"
#include "oracle/exact_gmp.h"
#include "oracle/explain.h"
#include "oracle/f32_orders.h"
#include "oracle/fixed_dot.h"
#include "oracle/operands.h"
#include "oracle/rounding.h"
#include "tests/recordings.h"
#include "tests/hashed.h"

namespace fs = std::filesystem;
namespace po = psi::oracle;
using psi::Bf16;

namespace {

const fs::path kProbes = psi::test::reference_file("probes_linear.h5");
const fs::path kFixture = fs::path(PSI_TEST_DATA) / "oracle" / "fixture.h5";

struct CliRun {
  int rc = -1;
  std::string out, err;
};

// A directory for this process's files, removed when the process exits.
struct ScratchDir {
  fs::path path = fs::temp_directory_path() / ("psi_test_oracle_" + std::to_string(::getpid()));
  ScratchDir() { fs::create_directories(path); }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

fs::path scratch() {
  static const ScratchDir dir;
  return dir.path;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

CliRun psi_run(const std::string& args) {
  const fs::path out = scratch() / "stdout.txt", err = scratch() / "stderr.txt";
  const std::string cmd = std::string(PSI_BINARY) + " " + args + " >" + out.string() + " 2>" + err.string();
  int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
}

// The number after `label` on its line of certify's output.
std::int64_t count_after(const std::string& text, const std::string& label) {
  auto pos = text.find(label);
  if (pos == std::string::npos) return -1;
  return std::stoll(text.substr(pos + label.size()));
}

void expect_bad_input(const CliRun& r, const std::string& mention) {
  EXPECT_EQ(r.rc, 2) << r.out << r.err;
  EXPECT_TRUE(r.err.starts_with("psi: error: ")) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line: " << r.err;
  EXPECT_NE(r.err.find(mention), std::string::npos) << "should mention '" << mention << "': " << r.err;
}

std::vector<Bf16> random_bf16(std::mt19937_64& rng, std::size_t n, double scale) {
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<Bf16> v(n);
  for (auto& x : v) x = psi::bf16_rne(float(u(rng) * scale));
  return v;
}

// The correctly rounded projection through GMP, the reference the CLI results are checked with.
psi::Bf16Tensor gmp_linear(const psi::Bf16Tensor& x, const psi::Bf16Tensor& w, const psi::Bf16Tensor& b,
                           const psi::Shape& out_shape) {
  const std::int64_t K = w.shape[1], N = w.shape[0], rows = x.numel() / K;
  psi::Bf16Tensor y(out_shape);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < N; ++c)
      y.data[r * N + c] = po::round_to_bf16(po::exact_dot_gmp(std::span(x.data).subspan(r * K, K),
                                                              std::span(w.data).subspan(c * K, K), b.data[c]));
  return y;
}

// "p/2^q" or "p/d" as a rational.
mpq_class parse_fraction(const std::string& s) {
  const auto pow = s.find("/2^");
  if (pow == std::string::npos) return mpq_class(s);
  mpq_class v(mpz_class(s.substr(0, pow)));
  mpq_div_2exp(v.get_mpq_t(), v.get_mpq_t(), std::stoul(s.substr(pow + 3)));
  return v;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  for (;;) {
    const auto next = s.find(sep, pos);
    out.push_back(s.substr(pos, next - pos));
    if (next == std::string::npos) return out;
    pos = next + 1;
  }
}

// Operands whose k in [24, 48) cancel k in [0, 24) exactly (x repeats, W negated), so that the
// exact value is the 16 small products at the end while the accumulator is large in between;
// recorded with the tensor-core model: many elements are not correctly rounded, and every one
// of them is the model's. Element (kPlantedRow, kPlantedCol) is then recorded 1,000 ULPs from its
// correctly rounded value, which no order gives.
constexpr std::int64_t kTcRows = 24, kTcN = 16, kTcK = 64, kPlantedRow = 5, kPlantedCol = 3;

struct TcRecording {
  fs::path file;
  psi::Bf16Tensor X, W, B, Y;
};

std::span<const Bf16> row_of(const psi::Bf16Tensor& t, std::int64_t r, std::int64_t len) {
  return std::span<const Bf16>(t.data).subspan(std::size_t(r * len), std::size_t(len));
}

Bf16 tc_correct(const TcRecording& r, std::int64_t i, std::int64_t c) {
  return po::round_to_bf16(po::exact_dot_gmp(row_of(r.X, i, kTcK), row_of(r.W, c, kTcK), r.B.data[c]));
}

const TcRecording& tc_recording() {
  static const TcRecording rec = [] {
    std::mt19937_64 rng(31);
    std::uniform_real_distribution<double> u(-1, 1);
    TcRecording r{scratch() / "tc_recording.h5", psi::Bf16Tensor({kTcRows, kTcK}), psi::Bf16Tensor({kTcN, kTcK}),
                  psi::Bf16Tensor({kTcN}), psi::Bf16Tensor({kTcRows, kTcN})};
    constexpr std::int64_t h = 24;
    for (std::int64_t i = 0; i < kTcRows; ++i) {
      for (std::int64_t k = 0; k < h; ++k)
        r.X.data[i * kTcK + k] = r.X.data[i * kTcK + k + h] = psi::bf16_rne(float(u(rng)));
      for (std::int64_t k = 2 * h; k < kTcK; ++k) r.X.data[i * kTcK + k] = psi::bf16_rne(float(u(rng)));
    }
    for (std::int64_t c = 0; c < kTcN; ++c) {
      for (std::int64_t k = 0; k < h; ++k) {
        r.W.data[c * kTcK + k] = psi::bf16_rne(float(u(rng)));
        r.W.data[c * kTcK + k + h] = psi::bf16_rne(-r.W.data[c * kTcK + k].to_float());
      }
      for (std::int64_t k = 2 * h; k < kTcK; ++k)
        r.W.data[c * kTcK + k] = psi::bf16_rne(float(std::ldexp(u(rng), -14)));
      r.B.data[c] = psi::bf16_rne(float(std::ldexp(u(rng), -16)));
    }
    for (std::int64_t i = 0; i < kTcRows; ++i)
      for (std::int64_t c = 0; c < kTcN; ++c)
        r.Y.data[i * kTcN + c] =
            psi::bf16_rne(psi::official::tc::dot(row_of(r.X, i, kTcK), row_of(r.W, c, kTcK)) + r.B.data[c].to_float());
    const Bf16 right = tc_correct(r, kPlantedRow, kPlantedCol);
    r.Y.data[kPlantedRow * kTcN + kPlantedCol] = Bf16::from_bits(std::uint16_t(right.bits + 1000));
    auto out = psi::hdf5::File::create(r.file);
    out.write_bf16("/x", r.X, psi::test::hashed(r.X));
    out.write_bf16("/w", r.W, psi::test::hashed(r.W));
    out.write_bf16("/b", r.B, psi::test::hashed(r.B));
    out.write_bf16("/y", r.Y, psi::test::hashed(r.Y));
    out.commit();
    return r;
  }();
  return rec;
}

}  // namespace

TEST(OracleCertify, RecordedVideoQProbeRowsAreConsistent) {
  const auto f = psi::hdf5::File::open_read(kProbes);
  const auto p = po::load_probe(f, "probe_video_q_proj");
  ASSERT_EQ(p.K, 4096);
  ASSERT_EQ(p.N, 4096);
  const auto choice = po::choose_probe_output(f, p, "");
  ASSERT_EQ(choice.dataset, "/probe_video_q_proj/q");
  const auto y = po::load_output(f, choice.dataset, p);
  const po::CertifyReport rep = po::certify(p, y, {0, 2, 2});
  ASSERT_EQ(rep.checked, 2 * 4096);

  // Recount element by element with the single-element exact path, and check a sample of the
  // verdicts (and the worst element) against GMP.
  std::int64_t not_cr = 0;
  std::map<std::int64_t, std::int64_t> hist;
  for (std::int64_t r = 0; r < 2; ++r)
    for (std::int64_t c = 0; c < p.N; ++c) {
      const Bf16 cr = po::exact_dot_fixed(p.x_row(r), p.w_row(c), p.bias(c)).round_bf16();
      const Bf16 rec = y.data[r * p.N + c];
      const std::int64_t d = psi::bf16_ulp_distance(rec, cr);
      if (d) ++not_cr, ++hist[d];
      if ((r * p.N + c) % 61 == 0) {
        const Bf16 g = po::round_to_bf16(po::exact_dot_gmp(p.x_row(r), p.w_row(c), p.bias(c)));
        ASSERT_EQ(g.bits, cr.bits) << r << "," << c;
      }
    }
  EXPECT_EQ(rep.not_correctly_rounded, not_cr);
  EXPECT_EQ(rep.ulp_histogram, hist);
  ASSERT_GT(not_cr, 0);  // cuBLAS's float32 accumulation is not correctly rounded everywhere
  ASSERT_TRUE(rep.worst.has_value());
  const auto& w = *rep.worst;
  EXPECT_EQ(w.ulps, hist.rbegin()->first);
  EXPECT_EQ(w.recorded, y.data[w.row * p.N + w.col]);
  EXPECT_EQ(w.exact, po::exact_dot_gmp(p.x_row(w.row), p.w_row(w.col), p.bias(w.col)));
  EXPECT_EQ(w.correct, po::round_to_bf16(w.exact));
  std::int64_t by_order_total = rep.reproduced_by_none;
  for (auto n : rep.reproduced_by_order) {
    EXPECT_LE(n, not_cr);
    by_order_total += n;
  }
  EXPECT_GE(by_order_total, not_cr);

  // The CLI prints the same counts, whatever the thread count.
  for (const char* threads : {"1", "3"}) {
    const CliRun run = psi_run("oracle certify --file " + kProbes.string() +
                            " --probe probe_video_q_proj --rows 0:2 --threads " + threads);
    ASSERT_EQ(run.rc, 0) << run.err;
    EXPECT_EQ(count_after(run.out, "elements checked"), 8192);
    EXPECT_EQ(count_after(run.out, "not correctly rounded"), not_cr) << run.out;
    EXPECT_NE(run.out.find("worst element (row " + std::to_string(w.row) + ", col " + std::to_string(w.col) + ")"),
              std::string::npos)
        << run.out;
  }
}

TEST(OracleCertify, AudioProbePicksTheProjectionNotTheActivation) {
  const auto f = psi::hdf5::File::open_read(kProbes);
  const auto p = po::load_probe(f, "probe_audio_ff_up");
  EXPECT_EQ(po::choose_probe_output(f, p, "").dataset, "/probe_audio_ff_up/proj_out");
  EXPECT_EQ(po::choose_probe_output(f, p, "gelu_out").dataset, "/probe_audio_ff_up/gelu_out");
}

TEST(OracleCertify, SynthInitProbeFileWrittenWithH5) {
  // A probe group as the recorder writes one: x, weights_json, two candidate outputs.
  const fs::path file = scratch() / "probe.h5";
  const std::string wname = "blocks.0.proj.weight", bname = "blocks.0.proj.bias";
  const std::int64_t seed = 7;
  const auto W = psi::synthinit::make(wname, {5, 16}, seed);
  const auto B = psi::synthinit::make(bname, {5}, seed);
  const auto X = psi::synthinit::make("input.test.x", {1, 3, 16}, seed);
  const auto good = gmp_linear(X, W, B, {1, 3, 5});
  psi::Bf16Tensor act = good;
  for (auto& v : act.data) v = psi::bf16_rne(std::max(v.to_float(), 0.0f) * 0.5f + 0.3f);
  auto entry = [](const std::string& n, const psi::Bf16Tensor& t, const std::string& sha) {
    return nlohmann::json{{"name", n}, {"shape", t.shape}, {"sha256", sha}};
  };
  {
    auto out = psi::hdf5::File::create(file);
    out.set_attr("/", "synthinit_global_seed", seed);
    for (const char* g : {"/probe_t", "/probe_bad"}) {
      out.write_bf16(std::string(g) + "/x", X, psi::test::hashed(X));
      out.write_bf16(std::string(g) + "/proj", good, psi::test::hashed(good));
      out.write_bf16(std::string(g) + "/act", act, psi::test::hashed(act));
    }
    out.write_text("/probe_t/weights_json",
                   nlohmann::json::array({entry(wname, W, psi::sha256_hex(W)), entry(bname, B, psi::sha256_hex(B))}).dump());
    out.write_text("/probe_bad/weights_json",
                   nlohmann::json::array({entry(wname, W, std::string(64, '0')), entry(bname, B, psi::sha256_hex(B))}).dump());
    out.commit();
  }
  const auto f = psi::hdf5::File::open_read(file);
  const auto p = po::load_probe(f, "probe_t");
  EXPECT_EQ(p.source.seed, seed);
  EXPECT_EQ(po::choose_probe_output(f, p, "").dataset, "/probe_t/proj");

  CliRun run = psi_run("oracle certify --file " + file.string() + " --probe probe_t");
  ASSERT_EQ(run.rc, 0) << run.err;
  EXPECT_EQ(count_after(run.out, "elements checked"), 15);
  EXPECT_EQ(count_after(run.out, "not correctly rounded"), 0);
  EXPECT_NE(run.out.find("output   /probe_t/proj"), std::string::npos) << run.out;

  // An output that is not the projection's (here an activation after it) is refused: every
  // element would only be "not correctly rounded".
  expect_bad_input(psi_run("oracle certify --file " + file.string() + " --probe probe_t --output act"),
                   "--output act: /probe_t/act is not the output of the projection");
  run = psi_run("oracle certify --file " + file.string() + " --probe probe_t --output proj");
  ASSERT_EQ(run.rc, 0) << run.err;
  EXPECT_EQ(count_after(run.out, "elements checked"), 15);

  run = psi_run("oracle explain --json --file " + file.string() + " --probe probe_t --row 2 --col 4");
  ASSERT_EQ(run.rc, 0) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["source"]["probe"], "probe_t");
  EXPECT_EQ(j["source"]["synthinit_seed"], seed);
  EXPECT_EQ(j["source"]["w"], wname);
  EXPECT_EQ(j["candidates"][0]["name"], "official");
  EXPECT_EQ(j["candidates"][0]["ulp_distance"], 0);
  EXPECT_EQ(j["correctly_rounded"]["bits"], po::bf16_hex(good.data[2 * 5 + 4]));

  expect_bad_input(psi_run("oracle certify --file " + file.string() + " --probe probe_bad"), "SHA-256");
  expect_bad_input(psi_run("oracle certify --file " + file.string() + " --probe nope"),
                   "no such probe group (projection probes in this file: ");
}

// psi probe's case names name the same recordings as the group names, with the same result.
TEST(OracleCertify, AcceptsPsiProbeCaseNames) {
  const CliRun by_case = psi_run("oracle certify --json --rows 0:2 --file " + kProbes.string() + " --probe audio-ff-up");
  const CliRun by_group =
      psi_run("oracle certify --json --rows 0:2 --file " + kProbes.string() + " --probe probe_audio_ff_up");
  ASSERT_EQ(by_case.rc, 0) << by_case.out;
  ASSERT_EQ(by_group.rc, 0) << by_group.out;
  const auto a = nlohmann::json::parse(by_case.out), b = nlohmann::json::parse(by_group.out);
  EXPECT_EQ(a["not_correctly_rounded"], b["not_correctly_rounded"]);
  EXPECT_EQ(a["elements"], 2 * 8192);
  const CliRun unknown = psi_run("oracle certify --file " + kProbes.string() + " --probe nope");
  EXPECT_EQ(unknown.rc, 2);
  EXPECT_NE(unknown.err.find("probe_audio_ff_up"), std::string::npos) << unknown.err;
  EXPECT_NE(unknown.err.find("probe_video_q_proj"), std::string::npos) << unknown.err;
  // The GELU after the recorded projection is not a projection output: refused, not certified.
  expect_bad_input(psi_run("oracle certify --rows 0:2 --file " + kProbes.string() + " --probe audio-ff-up --output gelu_out"),
                   "/probe_audio_ff_up/gelu_out is not the output of the projection");
  const CliRun proj =
      psi_run("oracle certify --json --rows 0:2 --file " + kProbes.string() + " --probe audio-ff-up --output proj_out");
  ASSERT_EQ(proj.rc, 0) << proj.err;
  EXPECT_EQ(nlohmann::json::parse(proj.out)["not_correctly_rounded"], a["not_correctly_rounded"]);
}

TEST(OracleExplain, OperandFileWrittenWithH5) {
  std::mt19937_64 rng(11);
  const fs::path file = scratch() / "operands.h5";
  psi::Bf16Tensor X({2, 3, 24}, random_bf16(rng, 2 * 3 * 24, 1.0));
  psi::Bf16Tensor W({4, 24}, random_bf16(rng, 4 * 24, 0.2));
  psi::Bf16Tensor B({4}, random_bf16(rng, 4, 0.1));
  psi::Bf16Tensor Y = gmp_linear(X, W, B, {2, 3, 4});
  // Element (row 4, col 1) recorded 2 ULPs off.
  const Bf16 right = Y.data[4 * 4 + 1];
  Y.data[4 * 4 + 1] = Bf16::from_bits(std::uint16_t(right.bits + 2));
  {
    auto out = psi::hdf5::File::create(file);
    out.write_bf16("/ops/x", X, psi::test::hashed(X));
    out.write_bf16("/ops/w", W, psi::test::hashed(W));
    out.write_bf16("/ops/b", B, psi::test::hashed(B));
    out.write_bf16("/ops/y", Y, psi::test::hashed(Y));
    const psi::Bf16Tensor w_bad({4, 23});
    out.write_bf16("/ops/w_bad", w_bad, psi::test::hashed(w_bad));
    out.commit();
  }
  const std::string ops = " --file " + file.string() + " --x ops/x --w ops/w --b ops/b";
  CliRun run = psi_run("oracle explain --json" + ops + " --y ops/y --row 4 --col 1 --candidate mine=0x" +
                    [&] { char b[8]; std::snprintf(b, 8, "%04x", right.bits); return std::string(b); }());
  ASSERT_EQ(run.rc, 0) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  const mpq_class exact =
      po::exact_dot_gmp(std::span(X.data).subspan(4 * 24, 24), std::span(W.data).subspan(24, 24), B.data[1]);
  EXPECT_EQ(j["K"], 24);
  EXPECT_EQ(j["exact"]["fraction"], po::dyadic_fraction(exact));
  EXPECT_EQ(j["correctly_rounded"]["bits"], po::bf16_hex(right));
  ASSERT_EQ(j["candidates"].size(), 2u);
  EXPECT_EQ(j["candidates"][0]["name"], "recorded");
  EXPECT_EQ(j["candidates"][0]["ulp_distance"], 2);
  EXPECT_EQ(j["candidates"][1]["name"], "mine");
  EXPECT_EQ(j["candidates"][1]["ulp_distance"], 0);
  EXPECT_EQ(j["source"]["b"], "/ops/b");

  run = psi_run("oracle certify" + ops + " --y ops/y");
  ASSERT_EQ(run.rc, 0) << run.err;
  EXPECT_EQ(count_after(run.out, "elements checked"), 24);
  EXPECT_EQ(count_after(run.out, "not correctly rounded"), 1);
  EXPECT_NE(run.out.find("2 ULP  1"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("worst element (row 4, col 1)"), std::string::npos) << run.out;

  // Bad input: one line, exit 2.
  expect_bad_input(psi_run("oracle explain" + ops + " --row 6 --col 0"), "--row 6 outside 0..5");
  expect_bad_input(psi_run("oracle explain" + ops + " --row 0 --col 4"), "--col 4 outside 0..3");
  expect_bad_input(psi_run("oracle explain --file " + file.string() + " --x ops/x --w ops/nope --row 0 --col 0"),
                   "/ops/nope");
  expect_bad_input(psi_run("oracle explain --file " + file.string() + " --x ops/x --w ops/w_bad --row 0 --col 0"),
                   "stored [out, in]");
  expect_bad_input(psi_run("oracle explain --file " + file.string() + " --x ops/x --w ops/w --b ops/x --row 0 --col 0"),
                   "bias");
  expect_bad_input(psi_run("oracle explain" + ops + " --row 0 --col 0 --candidate x=3f80"), "NAME=0xBITS");
  expect_bad_input(psi_run("oracle explain" + ops + " --probe p --row 0 --col 0"), "either --probe");
  expect_bad_input(psi_run("oracle certify" + ops), "--y");
  expect_bad_input(psi_run("oracle certify" + ops + " --y ops/y --rows 2:1"), "--rows");
  expect_bad_input(psi_run("oracle certify" + ops + " --y ops/w"), "does not fit");
  expect_bad_input(psi_run("oracle explain --file " + (scratch() / "missing.h5").string() +
                           " --x x --w w --row 0 --col 0"),
                   "no such file");
}

TEST(OracleExplain, H5pyFixtureEquation5) {
  // tests/data/oracle/fixture.h5 was written by make_fixture.py with plain h5py. Element (0, 0)
  // is eq. (5): exact 129/128, recorded bf16(bf16(257/256) + 1/256) = 1.
  const std::string ops = " --file " + kFixture.string() + " --x x --w w --b b --y y --row 0 --col 0";
  CliRun run = psi_run("oracle explain" + ops + " --candidate gpu=0x3f81");
  ASSERT_EQ(run.rc, 0) << run.err;
  EXPECT_NE(run.out.find("exact      129/2^7"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("= 1.007812500000000000000000e+00"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("correctly rounded BF16  0x3f81"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("K = 8"), std::string::npos) << run.out;

  run = psi_run("oracle explain --json" + ops + " --candidate gpu=0x3f81");
  ASSERT_EQ(run.rc, 0) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["exact"]["fraction"], "129/2^7");
  EXPECT_EQ(j["correctly_rounded"]["bits"], "0x3f81");
  EXPECT_EQ(j["candidates"][0]["name"], "recorded");
  EXPECT_EQ(j["candidates"][0]["bits"], "0x3f80");
  EXPECT_EQ(j["candidates"][0]["ulp_distance"], 1);
  EXPECT_EQ(j["candidates"][0]["signed_ulps"], -1.0);
  const auto& orders = j["candidates"][0]["orders"];
  EXPECT_NE(std::find(orders.begin(), orders.end(), "seq+bf16-before-bias"), orders.end());
  EXPECT_EQ(std::find(orders.begin(), orders.end(), "seq"), orders.end());
  EXPECT_EQ(j["candidates"][1]["name"], "gpu");
  EXPECT_EQ(j["candidates"][1]["ulp_distance"], 0);

  run = psi_run("oracle certify --file " + kFixture.string() + " --x x --w w --b b --y y");
  ASSERT_EQ(run.rc, 0) << run.err;
  EXPECT_EQ(count_after(run.out, "elements checked"), 6);
  EXPECT_EQ(count_after(run.out, "not correctly rounded"), 1);
  EXPECT_EQ(count_after(run.out, "seq+bf16-before-bias"), 1);
}

// certify --json gives the worst element two ULP numbers of different kinds (a whole distance
// to the correct rounding, a signed fraction of the exact value's step): --help says what each
// of the keys it prints is.
TEST(OracleCertify, HelpExplainsEveryUlpKeyOfTheJson) {
  const CliRun help = psi_run("oracle certify --help");
  ASSERT_EQ(help.rc, 0) << help.err;
  const TcRecording& r = tc_recording();
  const CliRun run = psi_run("oracle certify --json --file " + r.file.string() + " --x x --w w --b b --y y");
  ASSERT_EQ(run.rc, 0) << run.err;
  const auto worst = nlohmann::json::parse(run.out)["worst"];
  int keys = 0;
  for (const auto& [key, value] : worst.items()) {
    if (!key.ends_with("ulps")) continue;
    ++keys;
    EXPECT_NE(help.out.find("worst." + key), std::string::npos) << key << "\n" << help.out;
    EXPECT_NE(help.out.find("\n  " + key + " "), std::string::npos) << key << " is not explained\n" << help.out;
  }
  EXPECT_EQ(keys, 2);
}

TEST(OracleCertify, JsonAndListOnATensorCoreRecording) {
  const TcRecording& r = tc_recording();
  // The expected verdicts, element by element with GMP.
  std::set<std::pair<std::int64_t, std::int64_t>> off;
  for (std::int64_t i = 0; i < kTcRows; ++i)
    for (std::int64_t c = 0; c < kTcN; ++c)
      if (psi::bf16_ulp_distance(r.Y.data[i * kTcN + c], tc_correct(r, i, c)) != 0) off.insert({i, c});
  const auto not_cr = std::int64_t(off.size());
  ASSERT_GE(not_cr, 5);  // the cancellation makes the model's truncations visible
  ASSERT_TRUE(off.count({kPlantedRow, kPlantedCol}));

  const std::string ops = " --file " + r.file.string() + " --x x --w w --b b --y y";
  const fs::path list = scratch() / "not_cr.csv";
  const CliRun run = psi_run("oracle certify --json --list " + list.string() + ops);
  ASSERT_EQ(run.rc, 0) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["elements"], kTcRows * kTcN);
  EXPECT_EQ(j["not_correctly_rounded"], not_cr);
  EXPECT_EQ(j["N"], kTcN);
  EXPECT_EQ(j["K"], kTcK);
  EXPECT_EQ(j["rows"]["begin"], 0);
  EXPECT_EQ(j["rows"]["end"], kTcRows);
  // Every not correctly rounded element but the planted one is the model's.
  EXPECT_EQ(j["reproduced_by"]["h200-tensor-core"], not_cr - 1);
  EXPECT_EQ(j["reproduced_by_none"], 1);
  EXPECT_EQ(j["reproduced_by"].size(), po::f32_orders().size());
  EXPECT_TRUE(j["reproduced_by"].contains("seq+bf16-before-bias"));
  const auto& w = j["worst"];
  EXPECT_EQ(w["row"], kPlantedRow);
  EXPECT_EQ(w["col"], kPlantedCol);
  EXPECT_EQ(w["ulps"], 1000);
  EXPECT_EQ(w["recorded"]["bits"], po::bf16_hex(r.Y.data[kPlantedRow * kTcN + kPlantedCol]));
  const mpq_class exact = po::exact_dot_gmp(row_of(r.X, kPlantedRow, kTcK), row_of(r.W, kPlantedCol, kTcK),
                                            r.B.data[kPlantedCol]);
  EXPECT_EQ(parse_fraction(w["exact"]["fraction"]), exact);
  EXPECT_EQ(w["exact"]["decimal"], po::decimal25(exact));
  EXPECT_EQ(w["correctly_rounded"]["bits"], po::bf16_hex(po::round_to_bf16(exact)));
  for (const char* k : {"load", "exact", "compare", "total"}) EXPECT_TRUE(j["seconds"][k].is_number()) << k;
  EXPECT_EQ(j["source"]["output"], "/y");
  EXPECT_EQ(j["list"], list.string());

  // The list: a header, then one line per not correctly rounded element, in row order.
  const auto lines = split(slurp(list), '\n');
  ASSERT_EQ(lines.size(), std::size_t(not_cr + 2)) << "header, elements, empty after the last newline";
  EXPECT_EQ(lines[0], "row,col,recorded,correctly_rounded,ulps,exact,exact_fraction,orders");
  EXPECT_EQ(lines.back(), "");
  auto it = off.begin();
  for (std::size_t i = 1; i + 1 < lines.size(); ++i, ++it) {
    const auto f = split(lines[i], ',');
    ASSERT_EQ(f.size(), 8u) << lines[i];
    EXPECT_EQ(std::stoll(f[0]), it->first);
    EXPECT_EQ(std::stoll(f[1]), it->second);
    const Bf16 rec = r.Y.data[it->first * kTcN + it->second], cr = tc_correct(r, it->first, it->second);
    EXPECT_EQ(f[2], po::bf16_hex(rec));
    EXPECT_EQ(f[3], po::bf16_hex(cr));
    EXPECT_EQ(std::stoll(f[4]), psi::bf16_ulp_distance(rec, cr));
    const mpq_class v = parse_fraction(f[6]);
    EXPECT_EQ(po::round_to_bf16(v), cr);
    EXPECT_EQ(f[5], po::decimal25(v));
    const auto orders = split(f[7], ';');
    const bool planted = it->first == kPlantedRow && it->second == kPlantedCol;
    EXPECT_EQ(f[7].empty(), planted) << lines[i];
    if (!planted) {
      EXPECT_NE(std::find(orders.begin(), orders.end(), "h200-tensor-core"), orders.end()) << lines[i];
    }
  }
  // Written through a temporary name: nothing else is left beside it.
  for (const auto& e : fs::directory_iterator(scratch()))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();

  // The text form counts the order and names the list.
  const CliRun text = psi_run("oracle certify --list " + list.string() + ops);
  ASSERT_EQ(text.rc, 0) << text.err;
  EXPECT_EQ(count_after(text.out, "\n  h200-tensor-core"), not_cr - 1) << text.out;
  EXPECT_NE(text.out.find("list: " + std::to_string(not_cr) + " not correctly rounded elements written to"),
            std::string::npos)
      << text.out;

  // --list never overwrites the input (under any spelling) nor a directory.
  const std::string before = slurp(r.file);
  expect_bad_input(psi_run("oracle certify --list " + r.file.string() + ops), "is the input file");
  expect_bad_input(psi_run("oracle certify --list " + (scratch() / "." / r.file.filename()).string() + ops),
                   "is the input file");
  expect_bad_input(psi_run("oracle certify --list " + scratch().string() + ops), "is a directory");
  expect_bad_input(psi_run("oracle certify --list " + (scratch() / "nope" / "l.csv").string() + ops), "no directory");
  EXPECT_EQ(slurp(r.file), before);
}

TEST(OracleExplain, TraceH200TensorCore) {
  const TcRecording& r = tc_recording();
  // An element the model gets wrong (not the planted one).
  std::int64_t row = -1, col = -1;
  for (std::int64_t i = 0; i < kTcRows && row < 0; ++i)
    for (std::int64_t c = 0; c < kTcN && row < 0; ++c)
      if (!(i == kPlantedRow && c == kPlantedCol) &&
          psi::bf16_ulp_distance(r.Y.data[i * kTcN + c], tc_correct(r, i, c)) != 0)
        row = i, col = c;
  ASSERT_GE(row, 0);
  const std::string ops = " --file " + r.file.string() + " --x x --w w --b b --y y --row " + std::to_string(row) +
                          " --col " + std::to_string(col) + " --trace h200-tensor-core";
  CliRun run = psi_run("oracle explain --json" + ops);
  ASSERT_EQ(run.rc, 0) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  const auto& orders = j["candidates"][0]["orders"];
  EXPECT_NE(std::find(orders.begin(), orders.end(), "h200-tensor-core"), orders.end()) << j["candidates"];
  ASSERT_TRUE(j["trace"].is_array());
  ASSERT_EQ(j["trace"].size(), std::size_t(kTcK / 16));
  // The exact sum of the products = the final accumulator + every block's losses, exactly.
  mpq_class losses = 0;
  for (std::size_t s = 0; s < j["trace"].size(); ++s) {
    const auto& st = j["trace"][s];
    EXPECT_EQ(st["k0"], std::int64_t(s) * 16);
    losses += parse_fraction(st["loss_align"]["fraction"]) + parse_fraction(st["loss_norm"]["fraction"]);
    EXPECT_EQ(parse_fraction(st["deviation"]["fraction"]), losses);
  }
  const auto& sum = j["trace_summary"];
  const mpq_class products = po::exact_dot_gmp(row_of(r.X, row, kTcK), row_of(r.W, col, kTcK), std::nullopt);
  EXPECT_EQ(parse_fraction(sum["exact_products"]["fraction"]), products);
  EXPECT_EQ(mpq_class(double(sum["acc_final"]["value"].get<float>())) + losses, products);
  EXPECT_EQ(sum["result"], po::bf16_hex(r.Y.data[row * kTcN + col]));
  EXPECT_FALSE(sum["departs"].is_null());
  EXPECT_EQ(sum["targets"][0]["name"], "recorded");
  EXPECT_EQ(sum["targets"][0]["reproduced"], true);

  run = psi_run("oracle explain" + ops);
  ASSERT_EQ(run.rc, 0) << run.err;
  EXPECT_NE(run.out.find("h200-tensor-core trace"), std::string::npos) << run.out;
  for (const char* step : {"\n  0     0..15 ", "\n  1     16..31 ", "\n  2     32..47 ", "\n  3     48..63 "})
    EXPECT_NE(run.out.find(step), std::string::npos) << step << "\n" << run.out;
  EXPECT_NE(run.out.find("departs            "), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("candidate recorded " + po::bf16_hex(r.Y.data[row * kTcN + col]) + ": reproduced"),
            std::string::npos)
      << run.out;

  expect_bad_input(psi_run("oracle explain --file " + r.file.string() + " --x x --w w --row 0 --col 0 --trace seq"),
                   "valid: h200-tensor-core");
}

// An operand whose data no longer matches its sha256_full is refused: the oracle does not
// certify corrupted data.
TEST(OracleCertify, RefusesAnOperandThatDoesNotMatchItsSha256) {
  std::mt19937_64 rng(5);
  const fs::path file = scratch() / "corrupt_operands.h5";
  psi::Bf16Tensor X({2, 8}, random_bf16(rng, 16, 1.0));
  psi::Bf16Tensor W({3, 8}, random_bf16(rng, 24, 0.2));
  {
    auto out = psi::hdf5::File::create(file);
    psi::Bf16Tensor other = X;
    other.data[0] = Bf16::from_bits(std::uint16_t(other.data[0].bits ^ 1));
    out.write_bf16("/x", X, {{"sha256_full", psi::sha256_hex(other)}});
    out.write_bf16("/w", W, psi::test::hashed(W));
    const psi::Bf16Tensor y = gmp_linear(X, W, psi::Bf16Tensor({3}), {2, 3});
    out.write_bf16("/y", y, psi::test::hashed(y));
    out.commit();
  }
  CliRun run = psi_run("oracle certify --file " + file.string() + " --x x --w w --y y");
  EXPECT_EQ(run.rc, 2) << run.out;
  EXPECT_NE(run.err.find(file.string() + ":/x: "), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("sha256_full"), std::string::npos) << run.err;
}
