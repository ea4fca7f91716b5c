// The cause named is the real one (issue 57, class 6): an input psi cannot read is refused with
// the system's reason — permission denied, a directory on its path that may not be entered, not a
// regular file (a directory, a fifo), no such file — and a dataset compressed with an HDF5 filter
// psi's libhdf5 lacks names the filter; none of them is "not an HDF5 file", "no such file" or
// "corrupt". Every reading command opens its inputs in the same place (engine/input_file.h,
// hdf5::File::open_read, the typed reads), so each kind of command is run on each kind of input.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/psi_command.h"

namespace fs = std::filesystem;
using psi::testing::Outcome;
using psi::testing::TempDir;

namespace {

const fs::path kLzf = fs::path(PSI_TEST_DATA) / "causes" / "lzf.h5";  // make_fixtures.py there
const fs::path kReference = fs::path(PSI_SHARED_DIR) / "reference";

// psi as a user without privileges sees the files: root reads whatever the mode says, so as root
// psi runs without the capabilities that override file modes (CAP_DAC_OVERRIDE and
// CAP_DAC_READ_SEARCH, dropped by setpriv).
Outcome run_unprivileged(const std::string& args, const TempDir& dir) {
  const std::string drop = ::geteuid() == 0 ? "setpriv --bounding-set -dac_override,-dac_read_search -- " : "";
  const fs::path out = dir / "psi.stdout", err = dir / "psi.stderr";
  const std::string cmd = "PSI_PROGRESS_SECONDS=86400 " + drop + PSI_BINARY + " " + args + " >" + out.string() + " 2>" +
                          err.string();
  const int st = std::system(cmd.c_str());
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, psi::testing::slurp(out), psi::testing::slurp(err)};
}

// Exit 2 and exactly one error line, which names `input` and `cause` and none of `wrong`.
void expect_cause(const Outcome& r, const std::string& what, const fs::path& input, const std::string& cause,
                  const std::vector<std::string>& wrong) {
  EXPECT_EQ(r.status, 2) << what << "\n" << r.out << r.err;
  EXPECT_EQ(r.err.rfind("psi: error: ", 0), 0u) << what << "\n" << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << what << ": one line\n" << r.err;
  EXPECT_NE(r.err.find(input.string() + ":"), std::string::npos) << what << "\n" << r.err;
  EXPECT_NE(r.err.find(cause), std::string::npos) << what << ": expected '" << cause << "'\n" << r.err;
  for (const std::string& w : wrong) EXPECT_EQ(r.err.find(w), std::string::npos) << what << ": says '" << w << "'\n" << r.err;
}

// Every kind of reading command, `{}` standing for the input: the report and state readers,
// the tensor-file readers of any format, the oracle's operands, psi probe's capture and
// recording, a safetensors checkpoint, a kernel configuration.
struct Reader {
  std::string name, args;
  bool takes_folders = false;  // a folder stands for files in it (ProbeFolderNamesTheCaseFilesCause)
};

std::vector<Reader> readers(const TempDir& dir) {
  const std::string other = (fs::path(PSI_TEST_DATA) / "oracle" / "eq5_h5py.h5").string();
  return {
      {"verify", "verify {}"},
      {"compare (first)", "compare {} " + other},
      {"compare (second)", "compare " + other + " {}"},
      {"oracle explain", "oracle explain --file {} --x x --w w --b b --y y --row 0 --col 0"},
      {"oracle explain FILE:NAME", "oracle explain --x {}:x --w " + other + ":w --b " + other + ":b --y " + other +
                                       ":y --row 0 --col 0"},
      {"oracle certify", "oracle certify --file {} --x x --w w --b b --y y"},
      {"probe trajectory-step (capture)", "probe trajectory-step --reference {} --step 1"},
      {"probe (recording)", "probe video-q-proj --variant dense --reference {}", true},
      {"seal", "seal {} --out " + (dir / "sealed.h5").string()},
      {"run --checkpoint", "run one-token --quick --checkpoint {} --out " + (dir / "r.h5").string()},
      {"kernels --config", "kernels shapes --config {}"},
  };
}

std::string with_input(std::string args, const fs::path& input) {
  const std::string p = input.string();
  for (std::size_t at; (at = args.find("{}")) != std::string::npos;) args.replace(at, 2, p);
  return args;
}

struct BadInput {
  fs::path path;
  std::string cause;
  std::vector<std::string> wrong;
  bool folder = false;
};

}  // namespace

TEST(InputCauses, EveryReaderNamesTheSystemsReason) {
  const TempDir dir("psi_input_causes");
  // A readable copy first, then its mode taken away.
  const fs::path unreadable = dir / "unreadable.h5";
  fs::copy_file(kLzf, unreadable);
  fs::permissions(unreadable, fs::perms::none);
  const fs::path locked = dir / "locked";
  fs::create_directories(locked);
  fs::copy_file(kLzf, locked / "inside.h5");
  fs::permissions(locked, fs::perms::owner_read | fs::perms::owner_write);  // listed, never entered
  const fs::path folder = dir / "folder.h5";
  fs::create_directories(folder);
  const fs::path fifo = dir / "fifo.h5";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::vector<BadInput> inputs = {
      {unreadable, "permission denied (the file may not be read)", {"HDF5", "no such", "corrupt"}},
      {locked / "inside.h5", "permission denied (a directory on its path may not be entered)", {"no such", "HDF5"}},
      {folder, "not a regular file (a directory)", {"no such", "HDF5"}, true},
      {fifo, "not a regular file (a fifo)", {"no such", "HDF5"}},
      {dir / "missing.h5", "no such file", {"HDF5", "permission"}},
  };
  for (const Reader& r : readers(dir))
    for (const BadInput& in : inputs)
      if (!(in.folder && r.takes_folders))
        expect_cause(run_unprivileged(with_input(r.args, in.path), dir), r.name + " on " + in.path.string(), in.path,
                   in.cause, in.wrong);
  fs::permissions(locked, fs::perms::owner_all);  // for TempDir to remove it
}

// A folder of recordings stands for the case's file in it; that file's own cause is named.
TEST(InputCauses, ProbeFolderNamesTheCaseFilesCause) {
  const TempDir dir("psi_input_causes");
  fs::create_directories(dir / "recordings" / "probes_linear.h5");
  const fs::path file = dir / "recordings" / "probes_linear.h5";
  expect_cause(run_unprivileged("probe video-q-proj --variant dense --reference " + (dir / "recordings").string(), dir),
               "probe on a folder", file, "not a regular file (a directory)", {"no such"});
}

// h5py's LZF (registered filter 32000) is no filter of libhdf5's, and psi loads no plugins: the
// data cannot be read, and the refusal says which filter, not "truncated or corrupt".
TEST(InputCauses, MissingHdf5FilterIsNamed) {
  const TempDir dir("psi_input_causes");
  for (const Reader& r : readers(dir)) {
    if (r.name.starts_with("probe") || r.name.starts_with("run") || r.name.starts_with("kernels")) continue;  // not HDF5 tensors
    const Outcome o = run_unprivileged(with_input(r.args, kLzf), dir);
    expect_cause(o, r.name + " on lzf.h5", kLzf, "HDF5 filter lzf (id 32000) not available", {"corrupt", "truncated"});
  }
  EXPECT_FALSE(fs::exists(dir / "sealed.h5"));
}

// A folder psi reads files from (psi run's folder of recordings, a device-check folder) is
// refused for its own cause too; these ended in an internal error (exit 3) when a directory on
// the path could not be entered.
TEST(InputCauses, EveryFolderReaderNamesTheSystemsReason) {
  const TempDir dir("psi_input_causes");
  const fs::path locked = dir / "locked";
  fs::create_directories(locked / "inside");
  fs::permissions(locked, fs::perms::owner_read | fs::perms::owner_write);  // listed, never entered
  const fs::path unreadable = dir / "unreadable";
  fs::create_directories(unreadable);
  fs::permissions(unreadable, fs::perms::none);
  const fs::path file = dir / "file";
  std::FILE* made = std::fopen(file.c_str(), "w");
  ASSERT_NE(made, nullptr);
  std::fclose(made);
  const std::vector<BadInput> inputs = {
      {locked / "inside", "permission denied (a directory on its path may not be entered)", {"internal", "no such"}},
      {unreadable, "permission denied (the folder may not be read)", {"internal", "no such"}},
      {file, "not a folder (a regular file)", {"internal", "no such"}},
      {dir / "missing", "no such folder", {"internal", "permission"}},
  };
  for (const Reader& r : std::vector<Reader>{{"run --reference", "run one-token --quick --reference {} --out " + (dir / "r.h5").string()},
                                             {"device summary", "device summary {}"}})
    for (const BadInput& in : inputs)
      expect_cause(run_unprivileged(with_input(r.args, in.path), dir), r.name + " on " + in.path.string(), in.path,
                   in.cause, in.wrong);
  fs::permissions(locked, fs::perms::owner_all);  // for TempDir to remove them
  fs::permissions(unreadable, fs::perms::owner_all);
}
