// The output rule (outputs/output_path.h): no command that writes a file may overwrite or
// truncate a file it reads (named directly, through a symbolic link, a hard link or `..`), nor
// replace a directory, a device node or a fifo; each is refused with exit 2 and one line before
// the work starts, and the input's bytes stay as they were. Partial files (an interrupted run's
// <report>.partial.h5) are refused by psi merge and psi compare unless --allow-partial is given.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <functional>
#include <memory>
#include <thread>
#include <tuple>

#include "engine/sha256.h"
#include "experiments/experiment.h"
#include "experiments/report.h"
#include "hdf5/h5.h"
#include "hdf5/state_file.h"
#include "hdf5/unverified.h"
#include "outputs/output_path.h"
#include "outputs/pending_output.h"
#include "tests/h5_edit.h"
#include "tests/test_bad_input_support.h"

using namespace psi::badinput;
using psi::Exit;
using psi::test::edit_h5;

namespace {

const bool kCounted = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new CountPrinter("outputs"));
  return true;
}();

std::string sha256_of(const fs::path& p) {
  const std::string b = slurp(p);
  return psi::sha256_hex(b.data(), b.size());
}

// A file the command reads, with its SHA-256 at the start.
struct Input {
  fs::path path;
  std::string sha;
};

Input make_input(const fs::path& p, std::size_t bytes) {
  std::string b(bytes, '\0');
  for (std::size_t i = 0; i < bytes; ++i) b[i] = char((i * 131 + 7) % 251);
  write_bytes(p, b);
  return {p, sha256_of(p)};
}

// `out` named as an input under other names: a symbolic link, a hard link, a `..` detour.
struct Aliases {
  fs::path symlink, hardlink, dotdot;
};

Aliases aliases_of(const fs::path& input, const fs::path& dir) {
  Aliases a{dir / ("symlink_to_" + input.filename().string()), dir / ("hardlink_to_" + input.filename().string()),
            input.parent_path() / ".." / input.parent_path().filename() / input.filename()};
  fs::remove(a.symlink);
  fs::remove(a.hardlink);
  fs::create_symlink(input, a.symlink);
  fs::create_hard_link(input, a.hardlink);
  return a;
}

// Runs `args` with `out` spliced in for "OUT" and expects the one-line refusal naming `out` and
// `why`, the input unchanged and nothing new in `dir` (no report, no temporary file).
void expect_refused(std::vector<std::string> args, const fs::path& out, const std::string& why, const Input& in,
                    const fs::path& dir, const std::vector<std::string>& present) {
  for (auto& a : args)
    if (a == "OUT") a = out.string();
  expect_rejected(run_psi(args), args, Exit::bad_input, {out.string(), why});
  EXPECT_EQ(sha256_of(in.path), in.sha) << join(args) << ": the input changed";
  std::vector<std::string> left = leftovers(dir, present);
  EXPECT_EQ(left, std::vector<std::string>{}) << join(args);
}

// Every way of naming input `in` as the output `OUT` of `args`, and the non-regular targets.
void expect_every_alias_refused(const std::vector<std::string>& args, const Input& in, const fs::path& dir,
                                std::vector<std::string> present) {
  const Aliases a = aliases_of(in.path, dir);
  present.push_back(a.symlink.filename().string());
  present.push_back(a.hardlink.filename().string());
  expect_refused(args, in.path, "is the input file", in, dir, present);
  expect_refused(args, a.symlink, "is the input file", in, dir, present);
  expect_refused(args, a.hardlink, "(a hard link to it)", in, dir, present);
  expect_refused(args, a.dotdot, "is the input file", in, dir, present);
  const fs::path sub = dir / "a_directory";
  fs::create_directories(sub);
  present.push_back("a_directory");
  expect_refused(args, sub, "is a directory", in, dir, present);
  expect_refused(args, "/dev/null", "is a character device", in, dir, present);
  const fs::path fifo = dir / "a_fifo";
  if (!fs::exists(fifo)) {
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  }
  present.push_back("a_fifo");
  expect_refused(args, fifo, "is a fifo", in, dir, present);
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_TRUE(fs::is_directory(sub));
}

// A shard report of `psi run capacity --quick` (about a second).
fs::path capacity_shard(const fs::path& dir, int i) {
  const fs::path s = dir / ("shard" + std::to_string(i) + ".h5");
  if (!fs::exists(s)) {
    const std::vector<std::string> args{"run", "capacity", "--quick", "--shard", std::to_string(i) + "/2", "--out",
                                        s.string()};
    const PsiRun r = run_psi(args);
    EXPECT_EQ(r.status, 0) << join(args) << "\n" << r.err;
  }
  return s;
}

// What an interrupt of `psi run capacity --quick --shard 1/2` before its first case leaves: the
// real Report::abandon, no case finished.
fs::path capacity_partial_shard(const fs::path& dir) {
  psi::exp::Options o;
  o.quick = true;
  o.shard_index = 1;
  o.shard_count = 2;
  o.out = dir / "shard1.h5";
  psi::exp::Report report(psi::exp::find_experiment("capacity"), o, "CPU", {});
  const fs::path partial = report.partial_path();
  report.abandon(partial);
  return partial;
}

std::int64_t case_count(const fs::path& report) {
  const psi::hdf5::StateReader r(report);
  return std::int64_t(nlohmann::json::parse(r.read_text("/report/cases")).size());
}

}  // namespace

TEST(BadOutputs, RunCannotOverwriteTheRecordingsItReads) {
  // The recordings are refused as outputs before they are opened: any bytes do.
  const fs::path dir = fresh_dir("run_reference");
  const fs::path ref = dir / "reference";
  fs::create_directories(ref);
  const Input rec = make_input(ref / "block_small.h5", 4096);
  const std::vector<std::string> present{"reference"};
  expect_every_alias_refused({"run", "block-controls", "--reference", ref.string(), "--out", "OUT"}, rec, dir, present);
  // A shard of a shardable experiment too (every experiment's report is checked the same way).
  expect_refused({"run", "capacity", "--quick", "--shard", "0/2", "--reference", ref.string(), "--out", "OUT"},
                 rec.path, "is the input file", rec, dir,
                 {"reference", "symlink_to_block_small.h5", "hardlink_to_block_small.h5", "a_directory", "a_fifo"});
  EXPECT_EQ(leftovers(ref), std::vector<std::string>{"block_small.h5"});
}

TEST(BadOutputs, RunCannotOverwriteItsCheckpoint) {
  const fs::path dir = fresh_dir("run_checkpoint");
  const Input ckpt = make_input(dir / "weights.safetensors", 4096);
  expect_every_alias_refused({"run", "one-token", "--checkpoint", ckpt.path.string(), "--out", "OUT"}, ckpt, dir,
                             {"weights.safetensors"});
}

TEST(BadOutputs, RunChecksTheFilesBesideTheReportBeforeTheRun) {
  const fs::path dir = fresh_dir("run_side_files");
  const fs::path ref = dir / "reference";
  fs::create_directories(ref);
  // transport-control writes each schedule's states beside the report: one of them would be a
  // recording here. Refused before the first schedule runs (the run would take seconds).
  const Input rec = make_input(ref / "tc.reuse+prefetch.h5", 4096);
  const std::vector<std::string> args{"run", "transport-control", "--quick", "--reference", ref.string(), "--out",
                                      (ref / "tc.h5").string()};
  const auto t0 = std::chrono::steady_clock::now();
  expect_rejected(run_psi(args), args, Exit::bad_input,
                  {"file beside the report", rec.path.string(), "is the input file"});
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 2.0);
  EXPECT_EQ(sha256_of(rec.path), rec.sha);
  EXPECT_EQ(leftovers(ref), std::vector<std::string>{"tc.reuse+prefetch.h5"});
  // Where an interrupt would leave the finished cases must be writable too: a directory is not.
  fs::create_directories(dir / "r.partial.h5");
  const std::vector<std::string> partial{"run", "capacity", "--quick", "--out", (dir / "r.h5").string()};
  expect_rejected(run_psi(partial), partial, Exit::bad_input, {(dir / "r.partial.h5").string(), "is a directory"});
  EXPECT_EQ(leftovers(dir), (std::vector<std::string>{"reference", "r.partial.h5"}));
}

TEST(BadOutputs, ProbeCannotOverwriteItsRecordings) {
  const fs::path dir = fresh_dir("probe");
  const Input rec = make_input(dir / "block.h5", 4096);
  const Input flash = make_input(dir / "flash.h5", 4096);
  expect_every_alias_refused({"probe", "block-small", "--reference", rec.path.string(), "--out", "OUT"}, rec, dir,
                             {"block.h5", "flash.h5"});
  expect_refused({"probe", "block-full", "--reference", rec.path.string(), "--flash-reference", flash.path.string(),
                  "--out", "OUT"},
                 flash.path, "is the input file", flash, dir,
                 {"block.h5", "flash.h5", "symlink_to_block.h5", "hardlink_to_block.h5", "a_directory", "a_fifo"});
}

TEST(BadOutputs, MergeCannotOverwriteItsShards) {
  const fs::path dir = fresh_dir("merge");
  const fs::path s0 = capacity_shard(dir, 0), s1 = capacity_shard(dir, 1);
  const Input shard{s0, sha256_of(s0)};
  expect_every_alias_refused({"merge", s0.string(), s1.string(), "--out", "OUT"}, shard, dir,
                             {"shard0.h5", "shard1.h5"});
  const Input second{s1, sha256_of(s1)};
  expect_refused({"merge", s0.string(), s1.string(), "--out", "OUT"}, s1, "is the input file", second, dir,
                 {"shard0.h5", "shard1.h5", "symlink_to_shard0.h5", "hardlink_to_shard0.h5", "a_directory", "a_fifo"});
  // The same shards merge fine into a new file.
  const std::vector<std::string> ok{"merge", s0.string(), s1.string(), "--out", (dir / "merged.h5").string()};
  const PsiRun r = run_psi(ok);
  EXPECT_EQ(r.status, 0) << join(ok) << "\n" << r.err;
  EXPECT_EQ(case_count(dir / "merged.h5"), case_count(s0) + case_count(s1));
}

TEST(BadOutputs, MergeRefusesAPartialShardUnlessAllowedAndThenMarksTheResult) {
  const fs::path dir = fresh_dir("merge_partial");
  const fs::path s0 = capacity_shard(dir, 0);
  const fs::path p1 = capacity_partial_shard(dir);
  ASSERT_EQ(p1.filename(), "shard1.partial.h5");
  ASSERT_FALSE(psi::hdf5::partial_marker(psi::hdf5::File::open_read(p1)).empty());
  const fs::path merged = dir / "merged.h5";
  const std::vector<std::string> args{"merge", s0.string(), p1.string(), "--out", merged.string()};
  expect_rejected(run_psi(args), args, Exit::bad_input, {p1.string(), "a partial report", "--allow-partial"});
  EXPECT_FALSE(fs::exists(merged));

  std::vector<std::string> allowed = args;
  allowed.push_back("--allow-partial");
  const PsiRun r = run_psi(allowed);
  ASSERT_EQ(r.status, 0) << join(allowed) << "\n" << r.err;
  EXPECT_NE(r.out.find("partial: " + p1.string() + " is a partial shard; the merged report is marked partial"),
            std::string::npos)
      << r.out;
  const std::string marker = psi::hdf5::partial_marker(psi::hdf5::File::open_read(merged));
  EXPECT_NE(marker.find("merged from partial shards (" + p1.string() + ")"), std::string::npos) << marker;
  // Only the complete shard's cases: the partial one finished none.
  EXPECT_EQ(case_count(merged), case_count(s0));
}

TEST(BadOutputs, CompareRefusesAPartialFileUnlessAllowed) {
  const fs::path dir = fresh_dir("compare_partial");
  const fs::path s0 = capacity_shard(dir, 0);
  const fs::path p1 = capacity_partial_shard(dir);
  for (const auto& args : {std::vector<std::string>{"compare", p1.string(), s0.string()},
                           std::vector<std::string>{"compare", s0.string(), p1.string(), "--json"}})
    expect_rejected(run_psi(args), args, Exit::bad_input, {p1.string(), "a partial file", "--allow-partial"});
  const std::vector<std::string> allowed{"compare", p1.string(), p1.string(), "--allow-partial"};
  const PsiRun r = run_psi(allowed);
  EXPECT_EQ(r.status, 0) << join(allowed) << "\n" << r.err;
  EXPECT_NE(r.out.find("A: " + p1.string() + " (psi-h5/1, PARTIAL: interrupted run"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("B: " + p1.string() + " (psi-h5/1, PARTIAL: interrupted run"), std::string::npos) << r.out;
  const std::vector<std::string> json_args{"compare", s0.string(), p1.string(), "--allow-partial", "--json",
                                           "--only", "^/report/options$"};
  const PsiRun j = run_psi(json_args);
  EXPECT_EQ(j.status, 1) << join(json_args) << "\n" << j.err;  // shard_index 0 vs 1
  const auto json = nlohmann::json::parse(j.out);
  EXPECT_TRUE(json["partial_a"].is_null());
  EXPECT_NE(json["partial_b"].get<std::string>().find("interrupted run"), std::string::npos) << j.out;
}

TEST(BadOutputs, SynthinitRefusesNonRegularOutputs) {
  const fs::path dir = fresh_dir("synthinit");
  const fs::path fifo = dir / "a_fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const fs::path& out : {fs::path("/dev/null"), dir, fifo}) {
    const std::vector<std::string> args{"synthinit", "x.weight", "--shape", "4", "4", "--out", out.string()};
    expect_rejected(run_psi(args), args, Exit::bad_input, {"synthinit: --out " + out.string(), "not a regular file"});
  }
  EXPECT_EQ(leftovers(dir), std::vector<std::string>{"a_fifo"});
  EXPECT_TRUE(fs::is_fifo(fifo));
}

TEST(BadOutputs, OracleCertifyListCannotOverwriteItsInput) {
  // --list is checked before the operands are read: any bytes do.
  const fs::path dir = fresh_dir("oracle");
  const Input in = make_input(dir / "operands.h5", 4096);
  expect_every_alias_refused({"oracle", "certify", "--file", in.path.string(), "--x", "x", "--w", "w", "--y", "y",
                              "--list", "OUT"},
                             in, dir, {"operands.h5"});
}

TEST(BadOutputs, DeviceSummaryCannotOverwriteTheCheckFolder) {
  for (const std::string option : {"--out", "--json"}) {
    const fs::path dir = fresh_dir("device_summary" + option);
    write_bytes(dir / "steps.tsv", "tests\t0\t1.5\n");
    const Input in{dir / "steps.tsv", sha256_of(dir / "steps.tsv")};
    expect_every_alias_refused({"device", "summary", dir.string(), option, "OUT"}, in, dir, {"steps.tsv"});
  }
}

TEST(BadOutputs, TheRenameDoesNotReplaceATargetThatStoppedBeingAFile) {
  const fs::path dir = fresh_dir("rename");
  // Checked at create, then the target becomes a fifo while the file is being written.
  const fs::path target = dir / "r.h5";
  {
    psi::hdf5::File f = psi::hdf5::File::create(target);
    f.write_text("/t", "x");
    ASSERT_EQ(::mkfifo(target.c_str(), 0600), 0);
    expect_error([&] { f.commit(); }, Exit::bad_input, {target.string(), "appeared (a fifo)", "left as it is"}, "commit");
  }
  EXPECT_TRUE(fs::is_fifo(target));
  EXPECT_EQ(leftovers(dir), std::vector<std::string>{"r.h5"});  // the temporary file is gone
  // The text files (figures, lists, summaries) take the same path.
  fs::remove(target);
  fs::create_directories(target);
  expect_error([&] { psi::outputs::write_file_atomically(target, "x"); }, Exit::bad_input,
               {target.string(), "appeared (a directory)"}, "write_file_atomically");
  EXPECT_EQ(leftovers(dir), std::vector<std::string>{"r.h5"});
  EXPECT_TRUE(fs::is_directory(target));
}

// A write that fails part-way (here the file size limit, `ulimit -f`, with SIGXFSZ ignored so
// that the write returns EFBIG): one line, exit 3, nothing left. psi used to print the error
// and then die of SIGSEGV inside libhdf5's exit handler, which closed the failed file again.
TEST(BadOutputs, AFailedWriteEndsCleanly) {
  const fs::path dir = fresh_dir("out_write_fails"), io = fresh_dir("out_write_fails_io");
  const fs::path out = dir / "r.h5";
  // No progress line before the error in a slowed run (a sanitizer, a busy machine).
  const std::string cmd = "bash -c \"trap '' XFSZ; ulimit -f 64; PSI_PROGRESS_SECONDS=86400 exec '" + std::string(PSI_BINARY) +
                          "' run projection-oracle --out '" + out.string() + "'\" >'" + (io / "stdout").string() +
                          "' 2>'" + (io / "stderr").string() + "'";
  const int st = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(st));
  const std::string err = slurp(io / "stderr");
  EXPECT_EQ(WEXITSTATUS(st), 3) << err;  // bash passes a signal death on as 128 + N
  EXPECT_TRUE(err.starts_with("psi: error: " + out.string() + ":")) << err;
  EXPECT_NE(err.find("write failed"), std::string::npos) << err;
  EXPECT_EQ(err.find('\n'), err.size() - 1) << "not one line: " << err;
  EXPECT_EQ(leftovers(dir), std::vector<std::string>{});
}

// Shards whose /report/options or /report/cases are not what psi writes (a wrong type, not a
// list, a case without its index): refused naming the shard, never an escaped JSON exception
// ("internal error", exit 3).
TEST(BadOutputs, MergeRefusesShardsWithMalformedJson) {
  const fs::path dir = fresh_dir("out_merge_json");
  const std::string good_options =
      R"({"model":"tiny","profile":"ltx25","backend":"cpu","seed":0,"checkpoint":"","quick":false,"chaos_seed":0,"shard_index":0,"shard_count":1})";
  struct Bad {
    std::string name, options, cases, mention;
    std::string after_shard = ": ";  // what follows the shard's name in the message
  };
  const std::vector<Bad> bad = {
      {"count_text", R"({"shard_count":"one"})", "[]", "is not what psi writes"},
      {"options_list", "[1, 2]", "[]", "not a JSON object"},
      {"cases_object", good_options, R"({"index": 0})", "/report/cases is not a JSON list"},
      {"case_without_index", good_options, R"([{"case": "x"}])", "is not what psi writes"},
      {"model_number", R"({"model":7,"profile":"ltx25","backend":"cpu","seed":0,"checkpoint":"","quick":false,"chaos_seed":0,"shard_count":1})",
       "[]", "/report/options is not what psi writes"},
      {"cases_not_tabulated", good_options, R"([{"index": 0, "case": "x", "rows": [{"differing": "many"}]}])", "holds cases psi cannot tabulate"},
      // Nested 100,000 deep: refused by the one JSON reader (engine/json_read.h), naming the dataset.
      {"deep_options", std::string(100000, '['), "[]", "nested deeper than 64 levels", ":/report/options: "},
      {"deep_cases", good_options, std::string(100000, '['), "nested deeper than 64 levels", ":/report/cases: "},
      // A misspelt experiment option would read as absent and merge at its default.
      {"unknown_option", good_options.substr(0, good_options.size() - 1) + R"(,"pool_byts":1})", "[]",
       "unknown key 'pool_byts' (not one psi writes)", ":/report/options: "},
  };
  for (const Bad& b : bad) {
    const fs::path shard = dir / (b.name + ".h5");
    {
      psi::hdf5::RunInfo info;
      info.experiment = "probes";
      info.model_config = "tiny/ltx25";
      info.backend = "cpu";
      info.device_name = "cpu";
      psi::hdf5::StateWriter w(shard, info);
      w.write_text("/report/options", b.options);
      w.write_text("/report/cases", b.cases);
      w.commit();
    }
    const std::vector<std::string> args{"merge", shard.string(), "--out", (dir / "merged.h5").string()};
    expect_rejected(run_psi(args), args, Exit::bad_input, {shard.string() + b.after_shard, b.mention});
    EXPECT_FALSE(fs::exists(dir / "merged.h5")) << b.name;
  }
}

// An existing output is replaced only if psi wrote it (class 2 of the round-three trust issue):
// `psi run scheduling --out <a recording>` used to replace the recording with exit 0. A file psi
// did not write (an HDF5 file without psi's schema, a text file, a CSV that is not psi's list)
// is refused before the run, unchanged, with nothing left beside it; --force replaces it; a file
// psi wrote is replaced as before. A symbolic link at the output is written through (the link
// stays, the file it names is replaced, under the same rule); a dangling one is refused.
TEST(BadOutputs, OnlyFilesPsiWroteAreReplaced) {
  const fs::path dir = fresh_dir("foreign");
  // A recording-like HDF5 file: a dataset, no psi schema.
  {
    psi::hdf5::File f = psi::hdf5::File::create(dir / "recording.h5");
    f.write_text("/probe/x", "official tensor");
    f.commit();
  }
  const Input recording{dir / "recording.h5", sha256_of(dir / "recording.h5")};
  const Input notes = make_input(dir / "notes.txt", 100);
  const std::vector<std::string> present{"recording.h5", "notes.txt"};
  for (const Input* in : {&recording, &notes})
    expect_refused({"run", "scheduling", "--quick", "--out", "OUT"}, in->path, "is not a file psi wrote", *in, dir,
                   present);
  expect_refused({"synthinit", "transformer_blocks.0.attn1.to_q.bias", "--shape", "8", "--out", "OUT"},
                 recording.path, "is not a file psi wrote", recording, dir, present);
  expect_refused({"probe", "audio-ff-up", "--variant", "dense", "--out", "OUT"}, recording.path,
                 "is not a file psi wrote", recording, dir, present);

  // A symbolic link to the recording: refused the same way, the link and the recording kept.
  const fs::path link = dir / "link.h5";
  fs::create_symlink(recording.path, link);
  std::vector<std::string> with_link = present;
  with_link.push_back("link.h5");
  expect_refused({"run", "scheduling", "--quick", "--out", "OUT"}, link, "a symbolic link to " + recording.path.string(),
                 recording, dir, with_link);
  EXPECT_TRUE(fs::is_symlink(link));
  const fs::path dangling = dir / "dangling.h5";
  fs::create_symlink(dir / "missing.h5", dangling);
  with_link.push_back("dangling.h5");
  expect_refused({"run", "scheduling", "--quick", "--out", "OUT"}, dangling, "a symbolic link to a missing file",
                 recording, dir, with_link);

  // psi's own report is replaced, also through a link, which stays a link.
  const fs::path report = dir / "r.h5";
  ASSERT_EQ(run_psi({"run", "capacity", "--quick", "--out", report.string()}).status, 0);
  ASSERT_EQ(run_psi({"run", "capacity", "--quick", "--out", report.string()}).status, 0);
  const fs::path to_report = dir / "to_report.h5";
  fs::create_symlink(report, to_report);
  const std::string before = sha256_of(report);
  const PsiRun through = run_psi({"run", "capacity", "--quick", "--out", to_report.string()});
  EXPECT_EQ(through.status, 0) << through.err;
  EXPECT_TRUE(fs::is_symlink(to_report));
  EXPECT_NE(sha256_of(report), before);  // a new run id: the file the link names was rewritten

  // --force replaces the recording (a copy of it).
  fs::copy_file(recording.path, dir / "copy.h5");
  const PsiRun forced = run_psi({"run", "capacity", "--quick", "--force", "--out", (dir / "copy.h5").string()});
  EXPECT_EQ(forced.status, 0) << forced.err;
  EXPECT_TRUE(psi::hdf5::is_psi_h5(dir / "copy.h5"));
  EXPECT_EQ(sha256_of(recording.path), recording.sha);

  // The text outputs: psi's own kinds only (a CSV list, a summary) — anyone else's file is refused.
  EXPECT_FALSE(psi::outputs::first_line_is("row,col")(notes.path));
  write_bytes(dir / "list.csv", "row,col,recorded,correctly_rounded,ulps,exact,exact_fraction,orders\n1,2\n");
  EXPECT_TRUE(psi::outputs::first_line_is("row,col,recorded,correctly_rounded,ulps,exact,exact_fraction,orders")(
      dir / "list.csv"));
}

// Output that is lost silently (class 7): `psi report`, `psi compare --json`, `psi synthinit`
// writing to a full device exited 0 with their output gone. Every command now checks that its
// standard output was delivered: exit 3 and one line. An empty output path (`--out ''`, which
// meant "the default" or "no output" without a word) is refused by every writing option.
TEST(BadOutputs, LostStandardOutputAndEmptyPathsAreErrors) {
  const fs::path dir = fresh_dir("lost_stdout");
  if (fs::exists("/dev/full")) {
    for (const std::string args : {"list", "synthinit transformer_blocks.0.attn1.to_q.bias --shape 8"}) {
      const std::string cmd = std::string(PSI_BINARY) + " " + args + " >/dev/full 2>" + (dir / "err").string();
      const int st = std::system(cmd.c_str());
      EXPECT_EQ(WEXITSTATUS(st), int(Exit::run_failed)) << cmd;
      const std::string err = slurp(dir / "err");
      EXPECT_TRUE(err.starts_with("psi: error: the output could not be written to standard output")) << err;
      EXPECT_EQ(err.find('\n'), err.size() - 1) << err;
    }
  }
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"run", "scheduling", "--quick", "--out", ""},
        std::vector<std::string>{"probe", "audio-ff-up", "--out", ""},
        std::vector<std::string>{"synthinit", "transformer_blocks.0.attn1.to_q.bias", "--shape", "8", "--out", ""},
        std::vector<std::string>{"merge", "a.h5", "--out", ""}})
    expect_rejected(run_psi(args), args, Exit::bad_input, {"--out", "an empty path"});
}

// An output path whose folder is a regular file, or with a name longer than the filesystem
// takes (class 5): an internal error (exit 3) from creating the folder or the file, after the
// work; now one line naming the cause (ENOTDIR, ENAMETOOLONG), exit 2, before it.
TEST(BadOutputs, UnusableOutputPathsAreNamedBeforeTheWork) {
  const fs::path dir = fresh_dir("unusable_out");
  write_bytes(dir / "a_file", "x");
  const std::string under_file = (dir / "a_file" / "sub" / "r.h5").string();
  const std::string too_long = (dir / (std::string(300, 'n') + ".h5")).string();
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"run", "capacity", "--quick", "--out", under_file},
        std::vector<std::string>{"synthinit", "transformer_blocks.0.attn1.to_q.bias", "--shape", "8", "--out", under_file},
        std::vector<std::string>{"probe", "audio-ff-up", "--variant", "dense", "--out", under_file}})
    expect_rejected(run_psi(args), args, Exit::bad_input, {(dir / "a_file").string() + " is not a directory (ENOTDIR)"});
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"run", "capacity", "--quick", "--out", too_long},
        std::vector<std::string>{"synthinit", "transformer_blocks.0.attn1.to_q.bias", "--shape", "8", "--out", too_long}})
    expect_rejected(run_psi(args), args, Exit::bad_input, {"a name of 303 bytes, longer than 255 (ENAMETOOLONG)"});
  EXPECT_EQ(leftovers(dir), std::vector<std::string>{"a_file"});
}

// A killed psi leaves nothing (round four, classes 1 and 5): what it writes has no name until
// it is complete (an unnamed file in the output's folder), so SIGKILL at any moment of a run
// leaves the folder as it was. And psi removes no file because of its name: files named like
// temporaries, of dead processes or not, stay.
TEST(BadOutputs, AKilledRunLeavesNothing) {
  for (int delay_ms : {0, 20, 150, 600}) {
    const fs::path dir = fresh_dir("out_killed_" + std::to_string(delay_ms)), io = fresh_dir("out_killed_io");
    const pid_t pid = spawn_psi({"run", "one-token", "--out", (dir / "r.h5").string()}, io);
    ASSERT_GT(pid, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_EQ(leftovers(dir), std::vector<std::string>{}) << "killed after " << delay_ms << " ms";
  }
}

TEST(BadOutputs, FilesNamedLikeTemporariesAreNeverRemoved) {
  const fs::path dir = fresh_dir("out_temp_names");
  const fs::path out = dir / "t.h5";
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ASSERT_GT(dead, 0);
  ::waitpid(dead, nullptr, 0);
  char host[256] = {};
  ASSERT_EQ(::gethostname(host, sizeof host - 1), 0);
  const std::vector<std::string> look_alike{"t.h5.tmp." + std::string(host) + "." + std::to_string(dead) + ".0badf00d",
                                            "t.h5.tmp." + std::to_string(dead) + ".0badf00d0badf00d",
                                            "t.h5.tmp." + std::to_string(::getpid()) + ".0123456789abcdef"};
  for (const auto& n : look_alike) std::ofstream(dir / n) << "a user's file";
  const std::vector<std::string> args{"synthinit", "transformer_blocks.0.attn1.to_q.bias", "--shape", "8", "--out",
                                      out.string()};
  for (int i = 0; i < 2; ++i) ASSERT_EQ(run_psi(args).status, 0);  // a new file, then a replacement
  std::vector<std::string> expected = look_alike;
  expected.push_back("t.h5");
  std::sort(expected.begin(), expected.end());
  std::vector<std::string> left = leftovers(dir);
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, expected);
  for (const auto& n : look_alike) EXPECT_EQ(slurp(dir / n), "a user's file");
}

namespace {

// A psi file at `p` (what the output rule lets psi replace), with `text` in it.
void psi_file(const fs::path& p, const std::string& text) {
  psi::hdf5::File f = psi::hdf5::File::create(p);
  f.write_text("/t", text);
  f.set_attrs("/", {{"schema", std::string("psi-h5/1")}});
  f.commit();
}

}  // namespace

// The output rule is applied when the file is put in place, not only when the run starts
// (round four, class 1): what appears at the output path meanwhile, or replaces the file the
// rule allowed, is left as it is, and psi's file is dropped; a symbolic link swapped in is not
// written through (as root it would have replaced the file the link names).
TEST(BadOutputs, WhatChangesAtTheOutputDuringTheRunIsLeftAsItIs) {
  const fs::path dir = fresh_dir("out_changes");
  const fs::path victim = dir / "victim", out = dir / "r.h5";
  write_bytes(victim, "not psi's");
  const std::string victim_sha = sha256_of(victim);
  struct Change {
    std::string name;
    bool existed;                     // a psi file was at the output when the write started
    std::function<void()> make;       // what happens at the output meanwhile
    std::vector<std::string> mention;
  };
  const std::vector<Change> changes = {
      {"a file appears", false, [&] { write_bytes(out, "someone's"); }, {"appeared", "a regular file", "left as it is"}},
      {"a link appears", false, [&] { fs::create_symlink(victim, out); }, {"appeared", "a symbolic link", "left as it is"}},
      {"a folder appears", false, [&] { fs::create_directory(out); }, {"appeared", "a directory", "left as it is"}},
      {"the file is replaced", true,
       [&] {
         write_bytes(dir / "other", "someone's");
         fs::rename(dir / "other", out);
       },
       {"was replaced by another file", "left as it is"}},
      {"the file becomes a link", true,
       [&] {
         fs::remove(out);
         fs::create_symlink(victim, out);
       },
       {"became a symbolic link"}},
  };
  for (const Change& c : changes) {
    fs::remove_all(out);
    if (c.existed) psi_file(out, "psi's earlier file");
    psi::hdf5::File f = psi::hdf5::File::create(out);
    f.write_text("/t", "the new report");
    c.make();
    const auto before = fs::symlink_status(out).type();
    const std::string before_bytes = fs::is_regular_file(fs::symlink_status(out)) ? slurp(out) : "";
    expect_error([&] { f.commit(); }, Exit::bad_input, [&] {
      std::vector<std::string> m = c.mention;
      m.push_back(out.string());
      return m;
    }(), c.name);
    EXPECT_EQ(fs::symlink_status(out).type(), before) << c.name;
    if (!before_bytes.empty()) {
      EXPECT_EQ(slurp(out), before_bytes) << c.name;
    }
    EXPECT_EQ(sha256_of(victim), victim_sha) << c.name << ": the link's target was written";
    std::vector<std::string> left = leftovers(dir);
    std::sort(left.begin(), left.end());
    EXPECT_EQ(left, (std::vector<std::string>{"r.h5", "victim"})) << c.name;
  }
  // The control: nothing changes, and psi's earlier file is replaced.
  fs::remove_all(out);
  psi_file(out, "psi's earlier file");
  psi_file(out, "the new report");
  EXPECT_EQ(psi::hdf5::File::open_read(out).read_text("/t"), "the new report");
}

// The folder the output goes in, swapped for a link to another folder while psi writes: the
// file is not put in the other folder.
TEST(BadOutputs, AFolderSwappedDuringTheRunIsNotWrittenThrough) {
  const fs::path dir = fresh_dir("out_folder_swap");
  fs::create_directories(dir / "sub");
  fs::create_directories(dir / "elsewhere");
  const fs::path out = dir / "sub" / "r.h5";
  psi::hdf5::File f = psi::hdf5::File::create(out);
  f.write_text("/t", "x");
  fs::rename(dir / "sub", dir / "sub.moved");
  fs::create_directory_symlink(dir / "elsewhere", dir / "sub");
  expect_error([&] { f.commit(); }, Exit::bad_input, {(dir / "sub").string(), "moved or replaced"}, "folder swap");
  EXPECT_EQ(leftovers(dir / "elsewhere"), std::vector<std::string>{});
  EXPECT_EQ(leftovers(dir / "sub.moved"), std::vector<std::string>{});
}

namespace {

// What happens to an output's folder between the output rule's check (at the command's start)
// and the write: each is refused, the file going nowhere.
struct FolderChange {
  std::string name;
  std::function<void(const fs::path& dir)> make;  // dir holds "sub", the output's folder
  std::string mention;
};

std::vector<FolderChange> folder_changes() {
  return {
      {"swapped for a link", [](const fs::path& d) {
         fs::rename(d / "sub", d / "sub.moved");
         fs::create_directory_symlink(d / "elsewhere", d / "sub");
       }, "another folder is there now"},
      {"removed", [](const fs::path& d) { fs::remove_all(d / "sub"); }, "it is gone (ENOENT)"},
      {"replaced by a file", [](const fs::path& d) {
         fs::remove_all(d / "sub");
         write_bytes(d / "sub", "a file");
       }, "it is a regular file now"},
      {"the folder above swapped for a link", [](const fs::path& d) {
         fs::rename(d, d.string() + ".moved");
         fs::create_directories(d.string() + ".other/sub");
         fs::create_directory_symlink(d.string() + ".other", d);
       }, "another folder is there now"},
  };
}

// A fresh folder with "sub" (the output's folder) and "elsewhere" (where a link leads), and no
// leftovers of an earlier round's "the folder above" change.
fs::path folder_change_dir(const std::string& name) {
  const fs::path dir = scratch() / name;
  for (const char* suffix : {".moved", ".other"}) fs::remove_all(dir.string() + suffix);
  fresh_dir(name);
  fs::create_directories(dir / "sub");
  fs::create_directories(dir / "elsewhere");
  return dir;
}

// Every file under `dir` (and what its ".moved" and ".other" twins hold), relative names; not
// the file a change put at the output's folder.
std::vector<std::string> files_under(const fs::path& dir) {
  std::vector<std::string> files;
  for (const std::string root : {dir.string(), dir.string() + ".moved", dir.string() + ".other"}) {
    std::error_code ec;
    if (fs::is_symlink(root) || !fs::is_directory(root)) continue;
    for (auto it = fs::recursive_directory_iterator(root, ec); it != fs::recursive_directory_iterator(); ++it)
      if (!it->is_directory() && !it->is_symlink() && it->path() != dir / "sub")
        files.push_back(fs::relative(it->path(), scratch()).string());
  }
  return files;
}

// Waits until psi `pid` holds the folder `dir` open (a descriptor of /proc/<pid>/fd that names
// it): the output rule has checked the output and holds its folder. False if psi ended first.
bool wait_for_held_folder(pid_t pid, const fs::path& dir) {
  const fs::path want = fs::canonical(dir);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec))
      if (fs::read_symlink(e.path(), ec) == want) return true;
    if (::waitpid(pid, nullptr, WNOHANG) == pid) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

}  // namespace

// The folder an output goes in is held from the output rule's check, which every command makes
// at its start, to the rename (round five, class 1): the folder swapped for a link, removed,
// replaced by a file, or a folder above it swapped, after the check, and the write is refused
// (exit 2) with nothing written anywhere. Each writer: text files (lists, configurations,
// summaries), psi's HDF5 files, and the files a child writes (figures' PNGs).
TEST(BadOutputs, AnOutputGoesOnlyToTheFolderHeldAtItsCheck) {
  const std::vector<std::pair<std::string, std::function<void(const fs::path&)>>> writers = {
      {"text", [](const fs::path& out) { psi::outputs::write_file_atomically(out, "text"); }},
      {"hdf5", [](const fs::path& out) { psi_file(out, "a report"); }},
      {"pending", [](const fs::path& out) {
         psi::outputs::PendingOutput file(out);
         ASSERT_EQ(::write(file.fd(), "png", 3), 3);
         file.commit();
       }},
  };
  // A fresh folder each time: the output rule's decisions last as long as the process (one
  // command's), and these share one.
  int round = 0;
  for (const auto& entry : writers)
    for (const FolderChange& c : folder_changes()) {
      // Named copies, not structured bindings: clang 14 does not capture a binding in a lambda.
      const auto& writer = entry.first;
      const auto& write = entry.second;
      const fs::path dir = folder_change_dir("held_" + writer + std::to_string(++round));
      const fs::path out = dir / "sub" / "o";
      psi::outputs::check_output(out, {}, "test: --out", {});
      c.make(dir);
      expect_error([&] { write(out); }, Exit::bad_input, {(dir / "sub").string(), "moved or replaced", c.mention},
                   writer + ", folder " + c.name);
      EXPECT_EQ(files_under(dir), std::vector<std::string>{}) << writer << ", folder " << c.name;
    }
  // A folder that does not exist at the check is made in the folder above, held: a link put
  // there meanwhile is not followed.
  const fs::path dir = folder_change_dir("held_new");
  const fs::path out = dir / "new" / "deeper" / "o";
  psi::outputs::check_output(out, {}, "test: --out", {});
  fs::create_directory_symlink(dir / "elsewhere", dir / "new");
  expect_error([&] { psi::outputs::write_file_atomically(out, "text"); }, Exit::bad_input,
               {(dir / "new").string(), "a symbolic link now"}, "a link where the folder is to be made");
  EXPECT_EQ(files_under(dir), std::vector<std::string>{});
  // The control: made and written when nothing changes.
  const fs::path fine = dir / "made" / "deeper" / "o";
  psi::outputs::check_output(fine, {}, "test: --out", {});
  psi::outputs::write_file_atomically(fine, "text");
  EXPECT_EQ(slurp(fine), "text");
}

// The same for every command that writes, end to end: once psi holds the output's folder (its
// check is done; for psi probe --figures, whose names come after the run, the folder itself), psi
// is stopped, the folder changed, and psi continued: the command ends with exit 2 and one line,
// nothing written in either folder.
TEST(BadOutputs, EveryCommandWritesOnlyToTheFolderItHeld) {
  struct Command {
    std::string name;
    std::vector<std::string> args;  // "OUT" stands for the output, "DIR" for its folder
  };
  const std::vector<Command> commands = {
      {"probe", {"probe", "audio-ff-up", "--variant", "official-h200", "--out", "OUT"}},
      {"kernels_fragile", {"kernels", "fragile", "--out", "OUT"}},
      {"kernels_where", {"kernels", "where", "--capture", "OUT"}},
      {"oracle_certify",
       {"oracle", "certify", "--probe", "audio-ff-up", "--file", std::string(PSI_SHARED_DIR) + "/reference/probes_linear.h5",
        "--list", "OUT"}},
      {"run", {"run", "one-token", "--quick", "--out", "OUT"}},
      {"probe_figures", {"probe", "audio-ff-up", "--variant", "dense", "--figures", "DIR"}},
  };
  const std::vector<FolderChange> changes = folder_changes();
  for (std::size_t i = 0; i < commands.size(); ++i) {
    const Command& c = commands[i];
    const FolderChange& change = changes[i % changes.size()];
    const fs::path dir = folder_change_dir("held_cmd_" + c.name), io = fresh_dir("held_cmd_io");
    std::vector<std::string> args = c.args;
    for (auto& a : args)
      if (a == "OUT" || a == "DIR") a = (a == "DIR" ? dir / "sub" : dir / "sub" / "o").string();
    const pid_t pid = spawn_psi(args, io);
    ASSERT_GT(pid, 0);
    ASSERT_TRUE(wait_for_held_folder(pid, dir / "sub")) << join(args) << ": psi ended before holding the folder";
    ASSERT_EQ(::kill(pid, SIGSTOP), 0);
    int st = 0;
    ASSERT_EQ(::waitpid(pid, &st, WUNTRACED), pid);
    change.make(dir);
    ASSERT_EQ(::kill(pid, SIGCONT), 0);
    expect_rejected(wait_psi(pid, io, std::chrono::seconds(600)), args, Exit::bad_input,
                    {(dir / "sub").string(), "moved or replaced", change.mention});
    EXPECT_EQ(files_under(dir), std::vector<std::string>{}) << c.name << ", folder " << change.name;
  }
}

// An output is never one of the command's inputs, nor another of its outputs (round five,
// class 2), however the path is spelled: --config is an input of every kernels subcommand, and
// two outputs of one command at one file (the same path, `..`, a hard link) are refused before
// the work, exit 2.
TEST(BadOutputs, AnOutputIsNeverAnInputOrAnotherOutput) {
  for (const auto& [sub, option] : {std::pair<std::string, std::string>{"search", "--out"}, {"fragile", "--out"},
                                    {"where", "--capture"}}) {
    const fs::path dir = fresh_dir("kernels_config_" + sub);
    const Input config = make_input(dir / "best.json", 512);
    expect_every_alias_refused({"kernels", sub, "--config", config.path.string(), option, "OUT"}, config, dir,
                               {"best.json"});
  }
  const fs::path dir = fresh_dir("two_outputs");
  fs::create_directories(dir / "d");
  const std::string dotdot = (dir / "d" / ".." / "r.h5").string();
  psi_file(dir / "old.h5", "psi's earlier report");
  fs::create_hard_link(dir / "old.h5", dir / "old_link.h5");
  const std::vector<std::string> present{"d", "old.h5", "old_link.h5"};
  for (const auto& [out, capture] : {std::pair<std::string, std::string>{(dir / "r.h5").string(), (dir / "r.h5").string()},
                                     {(dir / "r.h5").string(), dotdot},
                                     {(dir / "old.h5").string(), (dir / "old_link.h5").string()}}) {
    const std::vector<std::string> args{"run", "one-token", "--quick", "--out", out, "--capture", capture};
    expect_rejected(run_psi(args), args, Exit::bad_input,
                    {"one-token: --capture " + capture + " is also report " + out, "one file cannot be two outputs"});
    EXPECT_EQ(leftovers(dir, present), std::vector<std::string>{}) << join(args);
  }
  EXPECT_EQ(psi::hdf5::File::open_read(dir / "old.h5").read_text("/t"), "psi's earlier report");
  const fs::path check = fresh_dir("two_outputs_check");
  write_bytes(check / "steps.tsv", "tests\t0\t1.5\n");
  for (const std::string& json : {(dir / "s.md").string(), (dir / "d" / ".." / "s.md").string()}) {
    const std::vector<std::string> args{"device", "summary", check.string(), "--json", json, "--out", (dir / "s.md").string()};
    expect_rejected(run_psi(args), args, Exit::bad_input,
                    {"device summary: --out " + (dir / "s.md").string() + " is also device summary: --json " + json});
    EXPECT_EQ(leftovers(dir, present), std::vector<std::string>{}) << join(args);
  }
}

// An output path that names a folder (a trailing '/'), or whose folder cannot be looked up (a
// symbolic link loop above it, or the output a looping link itself): one line naming the cause,
// exit 2, before the work (round four: these ended in exit 3).
TEST(BadOutputs, AFolderNameOrALoopingPathIsRefusedByName) {
  const fs::path dir = fresh_dir("out_loops");
  fs::create_symlink(dir / "loop", dir / "loop");
  const std::vector<std::pair<std::string, std::string>> outs = {
      {(dir / "r.h5").string() + "/", "names a folder (it ends in '/')"},
      {(dir / "r.h5" / ".").string(), "names a folder (it ends in '.')"},
      {(dir / "loop" / "r.h5").string(), (dir / "loop").string() + ": a symbolic link loop (ELOOP)"},
      {(dir / "loop").string(), "a symbolic link loop (ELOOP)"},
  };
  for (const auto& [out, why] : outs)
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"synthinit", "transformer_blocks.0.attn1.to_q.bias", "--shape", "8", "--out", out},
          std::vector<std::string>{"run", "capacity", "--quick", "--out", out}}) {
      expect_rejected(run_psi(args), args, Exit::bad_input, {out, why});
      EXPECT_EQ(leftovers(dir, {"loop"}), std::vector<std::string>{}) << join(args);
    }
}

namespace {

bool is_whole_png(const std::string& b) {
  return b.size() >= 28 && b.starts_with(std::string("\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR", 16)) &&
         b.ends_with(std::string("\0\0\0\0IEND\xae\x42\x60\x82", 12));
}

std::vector<fs::path> pngs_in(const fs::path& dir) {
  std::vector<fs::path> found;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".png") found.push_back(e.path());
  return found;
}

}  // namespace

// What a child writes is checked before it is put in place (round five, class 5). With standard
// output closed, the pending PNG took descriptor 1, the converter lost it at exec and a 0-byte
// PNG was committed: descriptors 0-2 are now valid from psi's start (the run ends with exit 3,
// what it printed lost), and every PNG written is whole. A converter that exits 0 without a
// whole PNG, or fails, leaves no PNG, and the figure's note says why.
TEST(BadOutputs, AChildsOutputIsCheckedBeforeItIsPlaced) {
  const fs::path dir = fresh_dir("child_stdout_closed"), io = fresh_dir("child_io");
  const std::string cmd = "PSI_PROGRESS_SECONDS=86400 '" + std::string(PSI_BINARY) + "' run memory-scopes --out '" +
                          (dir / "r.h5").string() + "' >&- 2>'" + (io / "stderr").string() + "'";
  const int st = std::system(cmd.c_str());
  const std::string err = slurp(io / "stderr");
  ASSERT_TRUE(WIFEXITED(st)) << err;
  EXPECT_EQ(WEXITSTATUS(st), int(Exit::run_failed)) << err;
  EXPECT_EQ(err, "psi: error: the output could not be written to standard output (it was closed when psi started); "
                 "what was printed is lost\n");
  if (std::system("command -v rsvg-convert >/dev/null") == 0) {
    EXPECT_FALSE(pngs_in(dir).empty());
  }
  for (const fs::path& png : pngs_in(dir)) EXPECT_TRUE(is_whole_png(slurp(png))) << png << ": not a whole PNG";

  const fs::path bin = fresh_dir("child_fake_bin");
  const std::vector<std::pair<std::string, std::string>> converters = {
      {"cat >/dev/null; exit 0", "rsvg-convert exited 0 but did not write a whole PNG"},
      {"cat >/dev/null; printf '\\211PNG\\r\\n\\032\\n'; exit 0", "rsvg-convert exited 0 but did not write a whole PNG"},
      {"cat >/dev/null; exit 1", "rsvg-convert exited with status 1"},
  };
  for (const auto& [script, note] : converters) {
    write_bytes(bin / "rsvg-convert", "#!/bin/sh\n" + script + "\n");
    fs::permissions(bin / "rsvg-convert", fs::perms::owner_all);
    const fs::path out = fresh_dir("child_fake_out");
    const std::vector<std::string> args{"run", "memory-scopes", "--out", (out / "r.h5").string()};
    const PsiRun r = run_psi(args, {"PATH=" + bin.string() + ":" + std::getenv("PATH")});
    EXPECT_EQ(r.status, 0) << join(args) << "\n" << r.err;
    EXPECT_EQ(pngs_in(out), std::vector<fs::path>{}) << script;
    EXPECT_NE(r.out.find(".png not written: " + note), std::string::npos) << script << "\n" << r.out;
  }
}

// A name as long as the file system allows is a legal output, also when an earlier file is
// replaced (the replacement goes through a temporary name, which is cut to fit).
TEST(BadOutputs, TheLongestLegalNameIsWritten) {
  const fs::path dir = fresh_dir("out_long_name");
  const fs::path out = dir / (std::string(252, 'n') + ".h5");
  const std::vector<std::string> args{"synthinit", "transformer_blocks.0.attn1.to_q.bias", "--shape", "8", "--out",
                                      out.string()};
  for (int i = 0; i < 2; ++i) {
    const PsiRun r = run_psi(args);
    ASSERT_EQ(r.status, 0) << r.err;
  }
  EXPECT_EQ(leftovers(dir), std::vector<std::string>{out.filename().string()});
}

namespace {

// A copy of capacity shard `from` (its run attributes, options, cases and tables) that also holds
// a tensor at /states/<name>, written by StateWriter with its sha256_full: a shard with a state
// as the drivers save them. `edit` changes the run attributes or the options first.
fs::path shard_with_state(const fs::path& from, const fs::path& to, const std::string& name,
                          const std::function<void(psi::hdf5::RunInfo&, nlohmann::json&)>& edit = {}) {
  const psi::hdf5::StateReader r(from);
  psi::hdf5::RunInfo info = r.run_info();
  nlohmann::json options = nlohmann::json::parse(r.read_text("/report/options"));
  if (edit) edit(info, options);
  psi::Bf16Tensor t({2, 8});
  for (std::size_t i = 0; i < t.data.size(); ++i) t.data[i] = psi::Bf16::from_bits(std::uint16_t(0x3f80 + i));
  psi::hdf5::StateWriter w(to, info);
  w.write("/states/" + name, t, {"dense", "[2, 8] test state", "", {}});
  w.write_text("/report/options", options.dump());
  w.write_text("/report/cases", r.read_text("/report/cases"));
  w.write_text("/report/tables", r.read_text("/report/tables"));
  w.commit();
  return to;
}

void set_root_text(hid_t f, const char* name, const std::string& value) {
  if (H5Aexists(f, name) > 0) H5Adelete(f, name);
  const hid_t s = H5Screate(H5S_SCALAR), ty = H5Tcopy(H5T_C_S1);
  H5Tset_size(ty, value.size());
  const hid_t a = H5Acreate2(f, name, ty, s, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, ty, value.c_str());
  H5Aclose(a);
  H5Tclose(ty);
  H5Sclose(s);
}

}  // namespace

// Merge proves what it copies (class 3 of the round-four trust issue): each state a shard holds
// is checked against its sha256_full before it is copied. A shard with one element flipped used
// to merge with exit 0, the flipped element now under a fresh, matching hash; it is refused
// naming the shard's dataset, nothing written. A state without its hash (psi always writes one)
// is refused too, or merged with --allow-unverified and the result marked (exit 4).
TEST(BadOutputs, MergeChecksEveryStateBeforeCopyingIt) {
  const fs::path dir = fresh_dir("merge_hash");
  const fs::path t0 = shard_with_state(capacity_shard(dir, 0), dir / "t0.h5", "shard0");
  const fs::path t1 = shard_with_state(capacity_shard(dir, 1), dir / "t1.h5", "shard1");
  const std::vector<std::string> present{"shard0.h5", "shard1.h5", "t0.h5", "t1.h5", "flipped.h5", "no_hash.h5"};
  const fs::path merged = dir / "merged.h5";
  const PsiRun ok = run_psi({"merge", t0.string(), t1.string(), "--out", merged.string()});
  ASSERT_EQ(ok.status, 0) << ok.err;
  EXPECT_EQ(psi::hdf5::File::open_read(merged).read_bf16("/states/shard1").data,
            psi::hdf5::File::open_read(t1).read_bf16("/states/shard1").data);
  fs::remove(merged);

  fs::copy_file(t1, dir / "flipped.h5");
  edit_h5(dir / "flipped.h5", [](hid_t f) {
    const hid_t d = H5Dopen2(f, "/states/shard1", H5P_DEFAULT);
    std::vector<std::uint16_t> v(16);
    H5Dread(d, H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
    v[5] ^= 1;
    H5Dwrite(d, H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
    H5Dclose(d);
  });
  const std::vector<std::string> flipped{"merge", t0.string(), (dir / "flipped.h5").string(), "--out", merged.string()};
  expect_rejected(run_psi(flipped), flipped, Exit::bad_input,
                  {(dir / "flipped.h5").string() + ":/states/shard1: data does not match its sha256_full", "not merged"});
  fs::copy_file(t1, dir / "no_hash.h5");
  edit_h5(dir / "no_hash.h5", [](hid_t f) {
    const hid_t d = H5Dopen2(f, "/states/shard1", H5P_DEFAULT);
    H5Adelete(d, "sha256_full");
    H5Dclose(d);
  });
  const std::vector<std::string> unhashed{"merge", t0.string(), (dir / "no_hash.h5").string(), "--out", merged.string()};
  expect_rejected(run_psi(unhashed), unhashed, Exit::bad_input,
                  {(dir / "no_hash.h5").string() + ":/states/shard1: no sha256_full", "--allow-unverified"});
  EXPECT_EQ(leftovers(dir, present), std::vector<std::string>{});

  std::vector<std::string> allowed = unhashed;
  allowed.push_back("--allow-unverified");
  const PsiRun u = run_psi(allowed);
  EXPECT_EQ(u.status, int(Exit::unverified)) << u.err;
  EXPECT_NE(u.err.find("UNVERIFIED"), std::string::npos) << u.err;
  const std::string marker = psi::hdf5::unverified_marker(psi::hdf5::File::open_read(merged));
  EXPECT_NE(marker.find((dir / "no_hash.h5").string() + ":/states/shard1: no sha256_full"), std::string::npos) << marker;
  EXPECT_NE(u.out.find("UNVERIFIED: "), std::string::npos) << u.out;  // the table's title and note
  // Merged again, the unverified report passes its mark on, or is refused.
  const std::vector<std::string> again{"merge", merged.string(), "--out", (dir / "again.h5").string()};
  expect_rejected(run_psi(again), again, Exit::bad_input, {merged.string() + ": a report resting on data read unchecked"});
}

// Shards of different runs are refused, naming the field and both values: psi version, git
// revision, experiment, model config, backend, seed, and each option. They used to be joined
// (only the experiment and the options as a whole were compared) into one report of no run.
TEST(BadOutputs, MergeRefusesShardsOfAnotherRun) {
  const fs::path dir = fresh_dir("merge_provenance");
  const fs::path s0 = capacity_shard(dir, 0), s1 = capacity_shard(dir, 1);
  using Edit = std::function<void(psi::hdf5::RunInfo&, nlohmann::json&)>;
  const std::vector<std::tuple<std::string, Edit, std::string>> runs{
      {"model", [](auto& i, auto&) { i.model_config = "small/ltx25"; }, "model_config 'small/ltx25' differs from 'tiny/ltx25'"},
      {"backend", [](auto& i, auto&) { i.backend = "cuda"; }, "backend 'cuda' differs from 'cpu'"},
      {"seed", [](auto& i, auto&) { i.seed = 7; }, "seed '7' differs from '0'"},
      {"experiment", [](auto& i, auto&) { i.experiment = "probes"; }, "experiment 'probes' differs from 'capacity'"},
      {"option", [](auto&, auto& o) { o["quick"] = false; }, "option quick 'false' differs from 'true'"},
  };
  for (const auto& [name, edit, mention] : runs) {
    const fs::path other = shard_with_state(s1, dir / (name + ".h5"), "x", edit);
    const std::vector<std::string> args{"merge", s0.string(), other.string(), "--out", (dir / "m.h5").string()};
    expect_rejected(run_psi(args), args, Exit::bad_input, {other.string() + ": ", mention, "first shard " + s0.string()});
  }
  for (const char* field : {"psi_version", "psi_git_revision"}) {
    const fs::path other = dir / (std::string(field) + ".h5");
    fs::copy_file(s1, other);
    edit_h5(other, [&](hid_t f) { set_root_text(f, field, "0.0.0-elsewhere"); });
    const std::vector<std::string> args{"merge", s0.string(), other.string(), "--out", (dir / "m.h5").string()};
    expect_rejected(run_psi(args), args, Exit::bad_input, {other.string() + ": ", std::string(field) + " '0.0.0-elsewhere' differs"});
  }
  EXPECT_FALSE(fs::exists(dir / "m.h5"));
}

// A shard count from the file is not a size to allocate or to list: a shard claiming to be one
// of 2^31 - 1 names the first ten missing and counts the rest (the loop and the message used to
// grow with the count), one of 4,000,000,000 (more than psi run writes) is refused.
TEST(BadOutputs, MergeMessagesStayBoundedForAbsurdShardCounts) {
  const fs::path dir = fresh_dir("merge_counts");
  const fs::path s0 = capacity_shard(dir, 0);
  const auto claiming = [&](const std::string& name, std::int64_t index, std::int64_t count) {
    return shard_with_state(s0, dir / name, "x", [=](auto&, nlohmann::json& o) {
      o["shard_index"] = index;
      o["shard_count"] = count;
    });
  };
  const fs::path huge = claiming("huge.h5", 5, 2147483647);
  const std::vector<std::string> args{"merge", huge.string(), "--out", (dir / "m.h5").string()};
  const PsiRun r = run_psi(args);
  expect_rejected(r, args, Exit::bad_input,
                  {"shards 0/2147483647, 1/2147483647, 2/2147483647, 3/2147483647, 4/2147483647, 6/2147483647",
                   "10/2147483647 and 2147483636 more missing (1 of 2147483647 given)"});
  EXPECT_LT(r.err.size(), 600u) << r.err;
  for (const std::int64_t count : {std::int64_t(4000000000), std::int64_t(0), std::int64_t(-1)}) {
    const fs::path bad = claiming("count_" + std::to_string(count) + ".h5", 0, count);
    const std::vector<std::string> a{"merge", bad.string(), "--out", (dir / "m.h5").string()};
    expect_rejected(run_psi(a), a, Exit::bad_input,
                    {bad.string() + ": shard_count " + std::to_string(count) + " is not what psi writes (1 to 2147483647)"});
  }
  // An index or count that is not a JSON integer (nlohmann would read 1.0, "1" and true as 1).
  const std::vector<std::tuple<std::string, const char*, nlohmann::json>> not_integers{
      {"index_float.h5", "shard_index", 1.0}, {"index_text.h5", "shard_index", "1"}, {"count_float.h5", "shard_count", 2.0}};
  for (const auto& entry : not_integers) {
    const auto& [name, key_name, json_value] = entry;
    // Plain names for the lambda below: clang 14 does not capture a structured binding.
    const std::string key = key_name;
    const nlohmann::json value = json_value;
    const fs::path bad = shard_with_state(s0, dir / name, "x", [&](auto&, nlohmann::json& o) {
      o["shard_count"] = 2;
      o[key] = value;
    });
    const std::vector<std::string> a{"merge", bad.string(), "--out", (dir / "m.h5").string()};
    expect_rejected(run_psi(a), a, Exit::bad_input,
                    {bad.string() + ": " + key + " " + value.dump() + " is not what psi writes (an integer)"});
  }
  EXPECT_FALSE(fs::exists(dir / "m.h5"));
}

// A merge that cannot write its report (here the file size limit, `ulimit -f`, SIGXFSZ ignored
// so that the write returns EFBIG; and with SIGXFSZ as it comes) ends with one line, exit 3 and
// no temporary, never a crash.
TEST(BadOutputs, MergeEndsCleanlyOnAFileSizeLimit) {
  const fs::path dir = fresh_dir("merge_fsize"), io = fresh_dir("merge_fsize_io");
  const fs::path t0 = shard_with_state(capacity_shard(dir, 0), dir / "t0.h5", "shard0");
  const fs::path t1 = shard_with_state(capacity_shard(dir, 1), dir / "t1.h5", "shard1");
  const fs::path out = dir / "merged.h5";
  for (const std::string trap : {"trap '' XFSZ; ", ""}) {
    const std::string cmd = "bash -c \"" + trap + "ulimit -f 8; PSI_PROGRESS_SECONDS=86400 exec '" + std::string(PSI_BINARY) + "' merge '" +
                            t0.string() + "' '" + t1.string() + "' --out '" + out.string() + "'\" >'" +
                            (io / "stdout").string() + "' 2>'" + (io / "stderr").string() + "'";
    const int st = std::system(cmd.c_str());
    ASSERT_TRUE(WIFEXITED(st)) << cmd;
    const std::string err = slurp(io / "stderr");
    EXPECT_NE(WEXITSTATUS(st), 0) << trap << err;
    // bash passes a signal death on as 128 + N: a crash (SIGSEGV, SIGABRT) is none of psi's statuses.
    for (const int sig : {SIGSEGV, SIGABRT, SIGBUS})
      EXPECT_NE(WEXITSTATUS(st), 128 + sig) << trap << err;
    // Ignored or not, the limit is no interruption: one line that names it, exit 3.
    EXPECT_EQ(WEXITSTATUS(st), 3) << trap << err;
    EXPECT_TRUE(err.starts_with("psi: error: " + out.string() + ":")) << err;
    EXPECT_NE(err.find("the file-size limit was reached"), std::string::npos) << trap << err;
    EXPECT_EQ(err.find('\n'), err.size() - 1) << "not one line: " << err;
    ++rejected_count();
    EXPECT_EQ(leftovers(dir, {"shard0.h5", "shard1.h5", "t0.h5", "t1.h5"}), std::vector<std::string>{}) << trap;
  }
}

// The same on a full file system (ENOSPC): a merge, a run and a text output end with one line
// naming the cause, exit 3, nothing left but what was there. A small tmpfs is the full disk:
// mounting one needs root, so these are not in the bad-input count, which must not depend on it.
TEST(BadOutputs, AFullDiskEndsCleanly) {
  const fs::path dir = fresh_dir("full_disk"), disk = fresh_dir("full_disk_mount");
  const fs::path t0 = shard_with_state(capacity_shard(dir, 0), dir / "t0.h5", "shard0");
  const fs::path t1 = shard_with_state(capacity_shard(dir, 1), dir / "t1.h5", "shard1");
  if (std::system(("mount -t tmpfs -o size=64k tmpfs '" + disk.string() + "' 2>/dev/null").c_str()) != 0)
    GTEST_SKIP() << "a tmpfs cannot be mounted here (needs root)";
  const std::shared_ptr<void> unmount(nullptr, [&](void*) { std::system(("umount '" + disk.string() + "'").c_str()); });
  write_bytes(disk / "filler", std::string(64 * 1024, 'x'));  // as much as fits: all of it
  const std::vector<std::vector<std::string>> commands = {
      {"merge", t0.string(), t1.string(), "--out", (disk / "merged.h5").string()},
      {"run", "capacity", "--quick", "--out", (disk / "r.h5").string()},
      {"compare", t0.string(), t1.string(), "--list", (disk / "l.csv").string()},
  };
  for (const auto& args : commands) {
    const PsiRun r = run_psi(args);
    EXPECT_EQ(r.signal, 0) << join(args) << "\n" << r.err;
    EXPECT_EQ(r.status, int(Exit::run_failed)) << join(args) << "\n" << r.err;
    EXPECT_TRUE(r.err.starts_with("psi: error: " + args[args.size() - 1] + ":")) << r.err;
    EXPECT_NE(r.err.find("(No space left on device)"), std::string::npos) << join(args) << "\n" << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "not one line: " << r.err;
    EXPECT_EQ(leftovers(disk, {"filler"}), std::vector<std::string>{}) << join(args);
  }
}
