// Unknown names and impossible settings: experiments, model configs, feature profiles,
// backends, probe cases, numerics variants, output formats, shards on the command line; arena,
// page and workspace sizes (zero, negative, not a multiple of the alignment, not fitting) and
// unknown backends through the runtime's API (no command-line option sets them). Each is
// refused with a one-line error naming the setting and the value, before any work is done.
#include <bit>
#include <cstdint>
#include <limits>

#include "engine/environment.h"
#include "engine/real_number.h"
#include "engine/runtime/arena.h"
#include "engine/runtime/runtime.h"
#include "engine/measure/sizes.h"
#include "tests/test_bad_input_support.h"

namespace rt = psi::rt;
using namespace psi::badinput;
using psi::Exit;

namespace {

const bool kCounted = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new CountPrinter("names and sizes"));
  return true;
}();

struct BadArgs {
  std::vector<std::string> args;
  std::vector<std::string> mentions;
};

}  // namespace

TEST(BadNames, CommandLineRefusesUnknownNamesWithoutWritingAnything) {
  const fs::path out = fresh_dir("names_out");
  const std::string report = (out / "r.h5").string();
  const std::vector<BadArgs> bad = {
      {{"run", "no-such-experiment", "--out", report}, {"unknown experiment 'no-such-experiment'", "one-token"}},
      {{"run", "One-Token", "--out", report}, {"unknown experiment 'One-Token'"}},
      // A misspelled option names the nearest one; an unknown variant names what psi probe takes.
      {{"run", "scheduling", "--quik", "--out", report}, {"psi run has no option --quik; did you mean --quick?"}},
      {{"kernels", "search", "--stpe", "3"}, {"psi kernels search has no option --stpe; did you mean --step?"}},
      {{"run", "scheduling", "--zzzzzz", "--out", report}, {"psi run has no option --zzzzzz (psi run --help lists them)"}},
      {{"probe", "block-small", "--variant", "nope", "--out", report},
       {"unknown numerics variant 'nope'", "psi probe also takes all (every variant) and float64"}},
      {{"device", "summary", out.string()}, {"not a device-check folder"}},
      {{"run", "", "--out", report}, {"unknown experiment ''"}},
      {{"run", "one-token", "--model", "huge", "--out", report}, {"unknown model config 'huge'", "tiny"}},
      {{"run", "one-token", "--model", "", "--out", report}, {"unknown model config ''"}},
      {{"run", "one-token", "--profile", "ltx3", "--out", report}, {"unknown feature profile 'ltx3'", "ltx25"}},
      {{"run", "one-token", "--backend", "tpu", "--out", report}, {"backend \"tpu\" is not one of auto, cpu, cuda"}},
      {{"run", "one-token", "--backend", "CPU", "--out", report}, {"backend \"CPU\""}},
      {{"run", "one-token", "--shard", "1/1", "--out", report}, {"--shard '1/1'"}},
      {{"run", "one-token", "--shard", "-1/2", "--out", report}, {"--shard '-1/2'"}},
      {{"run", "one-token", "--shard", "0/0", "--out", report}, {"--shard '0/0'"}},
      {{"run", "one-token", "--shard", "0/2x", "--out", report}, {"--shard '0/2x'"}},
      {{"run", "one-token", "--shard", "0/2", "--out", report}, {"experiment 'one-token' cannot be sharded"}},
      // Shard counts past 32 bits used to wrap (4294967298 read as 2).
      {{"run", "capacity", "--shard", "0/4294967298", "--out", report}, {"--shard '0/4294967298'"}},
      {{"run", "capacity", "--shard", "4294967296/4294967298", "--out", report}, {"--shard '4294967296/4294967298'"}},
      {{"run", "capacity", "--shard", "+0/2", "--out", report}, {"--shard '+0/2'"}},
      {{"run", "capacity", "--shard", "0/2/3", "--out", report}, {"--shard '0/2/3'"}},
      // A shape whose element count passes 2^63 (or 2^64) used to hash nothing with exit 0.
      {{"synthinit", "transformer_blocks.0.attn1.to_q.weight", "--shape", "4294967296", "4294967296"},
       {"--shape [4294967296, 4294967296] has more than 2^63 - 1 elements"}},
      {{"synthinit", "transformer_blocks.0.attn1.to_q.weight", "--shape", "3037000500", "3037000500"},
       {"more than 2^63 - 1 elements"}},
      {{"synthinit", "transformer_blocks.0.attn1.to_q.weight", "--shape", "1048576", "1048576"},
       {"more than this machine's memory"}},
      // A rank past HDF5's 32 dimensions was computed, then refused as "cannot create dataset
      // (exists already?)".
      {{"synthinit", "input.other.x", "--shape", "1", "1", "1", "1", "1", "1", "1", "1", "1", "1", "1", "1", "1", "1", "1",
        "1", "1", "1", "1", "1", "1", "1", "1", "1", "1", "1", "1", "1", "1", "1", "1", "1", "1", "--out", report},
       {"synthinit: --out: a tensor of rank 33 cannot be written (HDF5 holds at most 32 dimensions)"}},
      {{"run", "one-token", "--chaos", "many", "--out", report}, {"--chaos"}},
      {{"run", "one-token", "--seed", "ten", "--out", report}, {"--seed"}},
      // Numbers that CLI11 alone wrapped (-1 became 2^64 - 1) or saturated.
      {{"run", "one-token", "--seed", "-1", "--out", report}, {"--seed", "'-1' is not a whole number"}},
      {{"run", "one-token", "--seed", "99999999999999999999999", "--out", report},
       {"--seed", "'99999999999999999999999' is not a whole number from 0 to 18446744073709551615"}},
      {{"run", "one-token", "--seed", "+3", "--out", report}, {"--seed", "'+3'"}},
      {{"run", "transport-control", "--chaos", "-5", "--out", report}, {"--chaos", "'-5' is not a whole number"}},
      {{"probe", "audio-ff-up", "--threads", "-2", "--out", report}, {"--threads", "'-2'"}},
      {{"synthinit", "x", "--shape", "4", "-1"}, {"--shape", "'-1'"}},
      // One word for two dimensions: the error says the form psi takes.
      {{"synthinit", "x", "--shape", "4096,4096"}, {"--shape", "'4096,4096': give the dimensions as separate words, e.g. --shape 4096 4096"}},
      {{"synthinit", "x", "--shape", "4x4"}, {"--shape", "'4x4': give the dimensions as separate words, e.g. --shape 4 4"}},
      {{"synthinit", "x", "--shape", "4", "--head", "99999999999"}, {"--head", "'99999999999'"}},
      {{"oracle", "explain", "--file", report, "--x", "x", "--w", "w", "--row", "-1", "--col", "0"}, {"--row", "'-1'"}},
      {{"run", "one-token", "--no-such-option", "--out", report}, {"--no-such-option"}},
      {{"probe", "no-such-probe", "--out", report}, {"unknown probe case 'no-such-probe'", "audio-ff-up"}},
      {{"probe", "audio-ff-up", "--variant", "fast", "--out", report}, {"unknown numerics variant 'fast'", "dense"}},
      {{"report", report, "--format", "xml"}, {"unknown format 'xml'"}},
      {{"compare", report, report, "--as", "bf32"}, {"--as", "bf32 not in {bf16}"}},
      {{"compare", report, report, "--differences", "0"}, {"--differences", "'0' is neither a whole number from 1 nor 'all'"}},
      {{"compare", report, report, "--differences", "-1"}, {"--differences", "'-1' is neither"}},
      {{"compare", report, report, "--differences", "99999999999999999999"}, {"--differences", "'99999999999999999999' is neither"}},
      {{"compare", report, report, "--differences", "some"}, {"--differences", "'some' is neither"}},
      {{"compare", report, report, "--list", ""}, {"--list", "an empty path names no file"}},
      {{"oracle", "certify", "--file", report, "--x", "x", "--w", "w", "--y", "y", "--threads", "0"}, {"--threads"}},
      {{"oracle", "frobnicate"}, {"unknown command 'frobnicate'", "certify, explain"}},
      {{"no-such-command"}, {"unknown command 'no-such-command'", "compare"}},
      {{}, {"A subcommand is required"}},
  };
  for (const BadArgs& b : bad) {
    expect_rejected(run_psi(b.args), b.args, Exit::bad_input, b.mentions);
    EXPECT_EQ(leftovers(out), std::vector<std::string>{}) << join(b.args);
  }
}

TEST(BadSizes, ArenaSettingsAreCheckedOneByOne) {
  constexpr std::int64_t K = 1024;
  constexpr std::int64_t A = std::int64_t(rt::kAlignment);
  struct Bad {
    std::int64_t arena, page, workspace;
    std::vector<std::string> mentions;
  };
  const std::vector<Bad> bad = {
      {0, 4 * K, 4 * K, {"arena_bytes must be positive (got 0)"}},
      {-64 * K, 4 * K, 4 * K, {"arena_bytes must be positive (got -65536)"}},
      {std::numeric_limits<std::int64_t>::min(), 4 * K, 4 * K, {"arena_bytes must be positive"}},
      {64 * K, 0, 4 * K, {"page_bytes must be positive (got 0)"}},
      {64 * K, -A, 4 * K, {"page_bytes must be positive (got -256)"}},
      {64 * K, 4 * K, 0, {"workspace_bytes must be positive (got 0)"}},
      {64 * K, 4 * K, -1, {"workspace_bytes must be positive (got -1)"}},
      {64 * K + 1, 4 * K, 4 * K, {"arena_bytes 65537 is not a multiple of the 256-byte alignment"}},
      {64 * K, A - 1, 4 * K, {"page_bytes 255 is not a multiple"}},
      {64 * K, A + 1, 4 * K, {"page_bytes 257 is not a multiple"}},
      {64 * K, 4 * K, 1000, {"workspace_bytes 1000 is not a multiple"}},
      {std::numeric_limits<std::int64_t>::max(), 4 * K, 4 * K, {"arena_bytes 9223372036854775807 is not a multiple"}},
      {64 * K, 32 * K, A, {"leave no scratch"}},
      {64 * K, 33 * K, A, {"leave no scratch"}},
      {64 * K, 16 * K, 32 * K, {"leave no scratch"}},
      {64 * K, A, 64 * K, {"leave no scratch"}},
      // 2P + W wraps around 2^64 if computed naively.
      {64 * K, std::int64_t(1) << 62, A, {"leave no scratch"}},
  };
  for (const Bad& b : bad) {
    const std::string what = "arena " + std::to_string(b.arena) + " page " + std::to_string(b.page) + " workspace " +
                             std::to_string(b.workspace);
    expect_error([&] { rt::ArenaLayout::make(b.arena, b.page, b.workspace); }, Exit::bad_input, b.mentions, what);
    rt::RuntimeConfig c;
    c.arena_bytes = b.arena;
    c.page_bytes = b.page;
    c.workspace_bytes = b.workspace;
    c.live_bytes = A;
    expect_error([&] { rt::Runtime r(c); }, Exit::bad_input, b.mentions, "Runtime " + what);
  }
  // The smallest legal layout: one alignment unit each, and one left for scratch.
  const rt::ArenaLayout l = rt::ArenaLayout::make(4 * A, A, A);
  EXPECT_EQ(l.scratch, std::uint64_t(A));
}

TEST(BadSizes, RuntimeRefusesUndeclaredOrOversizedLiveStateAndUnknownBackends) {
  constexpr std::int64_t K = 1024;
  auto config = [] {
    rt::RuntimeConfig c;
    c.arena_bytes = 64 * K;
    c.page_bytes = 4 * K;
    c.workspace_bytes = 4 * K;
    c.live_bytes = 4 * K;
    return c;
  };
  struct Bad {
    std::function<void(rt::RuntimeConfig&)> edit;
    std::vector<std::string> mentions;
  };
  const std::vector<Bad> bad = {
      {[](rt::RuntimeConfig& c) { c.live_bytes = 0; }, {"live_bytes (S_live) must be declared and positive (got 0)"}},
      {[](rt::RuntimeConfig& c) { c.live_bytes = -5; }, {"live_bytes (S_live) must be declared and positive (got -5)"}},
      {[](rt::RuntimeConfig& c) { c.live_bytes = 52 * K + 1; }, {"live_bytes 53249 exceeds the scratch capacity 53248"}},
      {[](rt::RuntimeConfig& c) { c.eps_bytes = -1; }, {"eps_bytes must not be negative (got -1)"}},
      {[](rt::RuntimeConfig& c) { c.backend = "tpu"; }, {"backend \"tpu\" is not one of auto, cpu, cuda"}},
      {[](rt::RuntimeConfig& c) { c.backend = ""; }, {"backend \"\" is not one of auto, cpu, cuda"}},
      // This machine has no CUDA device (and the sanitizer builds have no CUDA backend).
      {[](rt::RuntimeConfig& c) { c.backend = "cuda"; }, {"backend cuda requested"}},
  };
  for (std::size_t i = 0; i < bad.size(); ++i) {
    rt::RuntimeConfig c = config();
    bad[i].edit(c);
    expect_error([&] { rt::Runtime r(c); }, Exit::bad_input, bad[i].mentions, "runtime config case " + std::to_string(i));
  }
  rt::RuntimeConfig ok = config();
  rt::Runtime r(ok);
  EXPECT_EQ(r.layout().scratch, std::uint64_t(52 * K));
}

// An arena the machine cannot hold is a clean run failure (exit 3), not a crash: the layout is
// legal, the one allocation fails.
TEST(BadSizes, AnArenaTooLargeForTheMachineFailsTheRunCleanly) {
  rt::RuntimeConfig c;
  c.arena_bytes = std::int64_t(1) << 56;  // 64 PiB
  c.page_bytes = 4096;
  c.workspace_bytes = 4096;
  c.live_bytes = 4096;
  expect_error([&] { rt::Runtime r(c); }, Exit::run_failed, {"cannot allocate an arena of 72057594037927936 bytes"},
               "64 PiB arena");
}

// Integer options are decimal (issue 41.4): CLI11 converts an option's text with base detection,
// so "--shape 010" made a tensor of 8 elements even though the check read ten. The text is
// rewritten to decimal digits before CLI11 converts it; another base is refused.
TEST(BadNames, IntegerOptionsAreDecimal) {
  for (const std::string shape : {"010", "10"}) {
    const std::vector<std::string> args{"synthinit", "x", "--shape", shape};
    const PsiRun r = run_psi(args);
    EXPECT_NE(r.err.find("of shape [10]"), std::string::npos) << join(args) << ": " << r.err;
  }
  const auto sha = [](const std::string& seed) {
    const PsiRun r = run_psi({"synthinit", "transformer_blocks.0.attn1.to_q.weight", "--shape", "4", "4", "--seed", seed});
    EXPECT_EQ(r.status, 0) << r.err;
    return r.out;
  };
  EXPECT_EQ(sha("010"), sha("10"));
  EXPECT_NE(sha("010"), sha("8"));
  const std::vector<BadArgs> bad = {
      {{"synthinit", "x", "--shape", "0x10"}, {"--shape", "'0x10' is not a whole number"}},
      {{"synthinit", "x", "--shape", "4", "--seed", "0x10"}, {"--seed", "'0x10'"}},
      {{"synthinit", "x", "--shape", "4", "--seed", "0b11"}, {"--seed", "'0b11'"}},
      {{"kernels", "shapes", "--context", "0x400"}, {"--context", "'0x400'"}},
      {{"synthinit", "x", "--shape", std::string(400, '9')}, {"--shape", "is not a whole number"}},
  };
  for (const BadArgs& b : bad) expect_rejected(run_psi(b.args), b.args, Exit::bad_input, b.mentions);
}

// An empty value where a file, a folder or a dataset is named is refused (issue 41.4): several
// were read as the option's default ("--reference ''" ran on the shared recordings, "--pool ''"
// on the default pool).
TEST(BadNames, EmptyPathsAreRefused) {
  const fs::path out = fresh_dir("empty_paths");
  const std::string report = (out / "r.h5").string();
  const std::vector<std::vector<std::string>> bad = {
      {"run", "one-token", "--checkpoint", "", "--out", report},
      {"run", "block-controls", "--reference", "", "--out", report},
      {"run", "scheduling", "--kernel-config", "", "--out", report},
      {"run", "capacity", "--shard", "", "--out", report},
      {"run", "fixed-budget", "--pool", "", "--out", report},
      {"run", "scheduling", "--row-tile", "", "--out", report},
      {"run", "one-token", "--allow-link-to", "", "--out", report},
      {"probe", "audio-ff-up", "--reference", "", "--out", report},
      {"probe", "block-full", "--flash-reference", "", "--out", report},
      {"report", ""},
      {"merge", "", "--out", report},
      {"compare", "", report},
      {"compare", report, ""},
      {"verify", ""},
      {"oracle", "certify", "--file", ""},
      {"oracle", "certify", "--file", report, "--probe", ""},
      {"oracle", "certify", "--file", report, "--x", "", "--w", "w", "--y", "y"},
      {"oracle", "certify", "--file", report, "--x", "x", "--w", "w", "--b", "", "--y", "y"},
      {"oracle", "certify", "--file", report, "--x", "x", "--w", "w", "--y", "y", "--rows", ""},
      {"oracle", "explain", "--file", report, "--x", "x", "--w", "w", "--row", "0", "--col", "0", "--trace", ""},
      {"device", "summary", ""},
      {"kernels", "shapes", "--reference", ""},
      {"kernels", "confirm", "--config", ""},
  };
  for (const auto& args : bad) {
    expect_rejected(run_psi(args), args, Exit::bad_input, {"an empty "});
    EXPECT_EQ(leftovers(out), std::vector<std::string>{}) << join(args);
  }
}

// psi's environment variables are checked like options (issue 41.4), before any command runs:
// before, PSI_THREADS=abc and PSI_H5_CHECK_SECONDS=inf fell back to defaults without a word and
// PSI_PROGRESS_SECONDS=nan or 1e400 was taken as a period.
TEST(BadNames, EnvironmentVariablesAreCheckedLikeOptions) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> bad = {
      {"PSI_THREADS", {"abc", "0", "-2", "inf", "nan", "1e400", "2.5", "0x10", "", "99999999999999999999999"}},
      {"PSI_PROGRESS_SECONDS", {"inf", "nan", "1e400", "1e999", "-1e999", "1e-400", "-1", "abc", "5s", "", "0x10",
                                std::string(400, '9')}},
      {"PSI_H5_CHECK_SECONDS", {"inf", "nan", "1e400", "-1", "0", "abc", "", "2.5"}},
      {"PSI_SHARED", {""}},
      {"PSI_ISA", {"avx9", "AVX2", "", "sse2", "avx2 ", "x86-64-v3"}},
  };
  for (const auto& [name, values] : bad)
    for (const std::string& v : values)
      expect_rejected(run_psi({"list"}, {name + "=" + v}), {name + "='" + v + "'", "list"}, Exit::bad_input,
                      {"environment variable " + name});
  // The values they take.
  for (const auto& [name, v] : std::vector<std::pair<std::string, std::string>>{
           {"PSI_THREADS", "010"}, {"PSI_PROGRESS_SECONDS", "0"}, {"PSI_PROGRESS_SECONDS", "2.5"},
           {"PSI_H5_CHECK_SECONDS", "30"}, {"PSI_ISA", "portable"}}) {
    const PsiRun r = run_psi({"list"}, {name + "=" + v});
    EXPECT_EQ(r.status, 0) << name << "=" << v << ": " << r.err;
  }
  // Read lazily inside the library (a thread count, a progress period), a bad value is the same
  // psi::Error, which a command reports, not an exception that ends psi with std::terminate.
  ::setenv("PSI_THREADS", "many", 1);
  expect_error([] { psi::env_threads(); }, Exit::bad_input, {"PSI_THREADS='many'"}, "env_threads");
  ::unsetenv("PSI_THREADS");
  ::setenv("PSI_PROGRESS_SECONDS", "inf", 1);
  expect_error([] { psi::env_progress_seconds(); }, Exit::bad_input, {"PSI_PROGRESS_SECONDS='inf'"}, "env_progress_seconds");
  ::unsetenv("PSI_PROGRESS_SECONDS");
  ::setenv("PSI_H5_CHECK_SECONDS", "1e400", 1);
  expect_error([] { psi::env_h5_check_seconds(); }, Exit::bad_input, {"PSI_H5_CHECK_SECONDS='1e400'"}, "env_h5_check_seconds");
  ::unsetenv("PSI_H5_CHECK_SECONDS");
}

// The one real-number parser (engine/real_number.h): what it reads, bit for bit, and what it
// refuses, with range errors apart from malformed text.
TEST(RealNumber, FormAndRangeAreChecked) {
  for (const auto& [text, value] : std::vector<std::pair<std::string, double>>{
           {"0", 0.0}, {"-0", -0.0}, {"0.1", 0.1}, {"1.5", 1.5}, {"-2e3", -2000.0}, {"30", 30.0}, {"1e308", 1e308},
           {"2.2250738585072014e-308", 2.2250738585072014e-308}, {"0e-400", 0.0}, {"010", 10.0}}) {
    const auto v = psi::parse_real(text);
    ASSERT_TRUE(v) << text;
    EXPECT_EQ(std::bit_cast<std::uint64_t>(*v), std::bit_cast<std::uint64_t>(value)) << text;
  }
  for (const std::string& text : std::vector<std::string>{"1e999", "-1e999", "1e-400", "-1e-400", "4.9e-324", std::string(400, '9')}) {
    std::string why;
    EXPECT_FALSE(psi::parse_real(text, &why)) << text;
    EXPECT_EQ(why, "out of the range of a double") << text;
  }
  for (const std::string text : {"", "-", "inf", "-inf", "infinity", "nan", "NaN", "+1", ".5", " 1", "1 ", "0x10", "1e",
                                 "1.5s", "1,5", "--1"}) {
    std::string why;
    EXPECT_FALSE(psi::parse_real(text, &why)) << text;
    EXPECT_EQ(why, "not a decimal number") << text;
  }
}
