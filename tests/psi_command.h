#pragma once
// Running the real psi binary from a test with its stdout and stderr kept apart: what the
// command-line tests that check exit codes, help texts and messages share.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

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

// A fresh folder for one test's files, removed with everything in it when the test ends.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "psi_test")
      : dir_(std::filesystem::temp_directory_path() /
             (prefix + "_" + std::to_string(::getpid()) + "_" + std::to_string(n_++))) {
    std::filesystem::create_directories(dir_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::filesystem::path operator/(const std::string& s) const { return dir_ / s; }
  const std::filesystem::path& path() const { return dir_; }

 private:
  static inline int n_ = 0;
  std::filesystem::path dir_;
};

}  // namespace psi::testing
