#pragma once
// Running the real psi binary from a test with its stdout and stderr kept apart: what the
// command-line tests that check exit codes, help texts and messages share.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace psi::testing {

struct Outcome {
  int status = -1;  // the exit status, -1 if psi died of a signal
  std::string out, err;
};

inline std::string slurp(const std::filesystem::path& p) {
  std::string s;
  if (FILE* f = std::fopen(p.c_str(), "rb")) {
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
    std::fclose(f);
  }
  return s;
}

// Runs `psi <args>` (a shell command line) with stdout and stderr in files under `dir`. The
// tests check the error lines; progress lines are stderr too, and a run slowed down (a
// sanitizer, a busy machine) would print one first: the period is set past any run (progress
// is tested on its own, test_progress.cpp).
inline Outcome run_psi_in(const std::string& args, const std::filesystem::path& dir) {
  const std::filesystem::path out = dir / "psi.stdout", err = dir / "psi.stderr";
  const std::string cmd =
      "PSI_PROGRESS_SECONDS=86400 " + std::string(PSI_BINARY) + " " + args + " >" + out.string() + " 2>" + err.string();
  const int st = std::system(cmd.c_str());
  Outcome r{WIFEXITED(st) ? WEXITSTATUS(st) : -1, slurp(out), slurp(err)};
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return r;
}

}  // namespace psi::testing
