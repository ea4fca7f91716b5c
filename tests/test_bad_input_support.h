#pragma once
// What the bad-input tests share: running the real psi binary with separate stdout/stderr,
// a scratch folder per process, and the checks every rejected input must pass (exit code,
// one stderr line naming the file and the thing, nothing left under the final name, no
// temporary files).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "engine/error.h"

extern char** environ;

namespace psi::badinput {

namespace fs = std::filesystem;

struct PsiRun {
  int status = -1;       // exit status, or -1 when the process died of a signal
  int signal = 0;        // the signal that ended it, if any
  std::string out, err;  // stdout, stderr
};

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A folder for this test process, removed at exit.
class Scratch {
 public:
  Scratch() : path_(fs::temp_directory_path() / ("psi_bad_input_" + std::to_string(::getpid()))) {
    fs::create_directories(path_);
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

inline const fs::path& scratch() {
  static const Scratch s;
  return s.path();
}

// A fresh empty folder under the scratch folder.
inline fs::path fresh_dir(const std::string& name) {
  fs::path d = scratch() / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

inline void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc).write(bytes.data(), std::streamsize(bytes.size()));
}

// Starts psi with `args`; stdout and stderr go to files in `io_dir`; `env` ("NAME=value") is set
// over this process's environment. Returns the pid.
inline pid_t spawn_psi(const std::vector<std::string>& args, const fs::path& io_dir,
                       const std::vector<std::string>& env = {}) {
  std::vector<std::string> argv_s{PSI_BINARY};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  const std::string out = (io_dir / "stdout").string(), err = (io_dir / "stderr").string();
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  // The contract checked here is the error line; progress lines are stderr too, and a run slowed
  // down (a sanitizer, a busy machine) past the 30 s period would print one before it. Progress
  // is tested on its own (test_progress.cpp).
  std::vector<std::string> env_s = env;
  env_s.emplace_back("PSI_PROGRESS_SECONDS=86400");
  const auto set_already = [&](std::string_view e) {
    for (const std::string& s : env_s)
      if (e.substr(0, e.find('=') + 1) == std::string_view(s).substr(0, s.find('=') + 1)) return true;
    return false;
  };
  for (char** e = environ; *e; ++e)
    if (!set_already(*e)) env_s.emplace_back(*e);
  std::vector<char*> envp;
  for (auto& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  return rc == 0 ? pid : -1;
}

// With a deadline, a psi still running at it is killed (SIGKILL, r.signal says so): a hang
// fails its test instead of stalling the suite.
inline PsiRun wait_psi(pid_t pid, const fs::path& io_dir,
                       std::optional<std::chrono::seconds> deadline = std::nullopt) {
  PsiRun r;
  int st = 0;
  if (pid < 0) return r;
  bool ended = false;
  if (deadline) {
    const auto end = std::chrono::steady_clock::now() + *deadline;
    while (!(ended = ::waitpid(pid, &st, WNOHANG) == pid)) {
      if (std::chrono::steady_clock::now() >= end) {
        ::kill(pid, SIGKILL);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  if (!ended && ::waitpid(pid, &st, 0) != pid) return r;
  if (WIFEXITED(st)) r.status = WEXITSTATUS(st);
  if (WIFSIGNALED(st)) r.signal = WTERMSIG(st);
  r.out = slurp(io_dir / "stdout");
  r.err = slurp(io_dir / "stderr");
  fs::remove(io_dir / "stdout");
  fs::remove(io_dir / "stderr");
  return r;
}

// Runs psi to completion from the scratch folder's "io" folder (so a default output path
// lands there too, not in the test's working directory).
inline PsiRun run_psi(const std::vector<std::string>& args, const std::vector<std::string>& env = {},
                      std::optional<std::chrono::seconds> deadline = std::nullopt) {
  static const fs::path io = fresh_dir("io");
  return wait_psi(spawn_psi(args, io, env), io, deadline);
}

inline std::string join(const std::vector<std::string>& args) {
  std::string s = "psi";
  for (const auto& a : args) s += " " + a;
  return s;
}

// Files in `dir` other than the given ones (e.g. inputs that were there before the run).
inline std::vector<std::string> leftovers(const fs::path& dir, const std::vector<std::string>& expected = {}) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    bool known = false;
    for (const auto& x : expected) known = known || x == n;
    if (!known) out.push_back(n);
  }
  return out;
}

// Counts every rejected input, so that the suite can print how many it tried.
inline int& rejected_count() {
  static int n = 0;
  return n;
}

// The contract for a rejected command line: exit `code` and exactly one stderr line
// "psi: error: ..." containing every string of `mentions` (the file, the thing).
inline void expect_rejected(const PsiRun& r, const std::vector<std::string>& args, psi::Exit code,
                            const std::vector<std::string>& mentions) {
  const std::string cmd = join(args);
  EXPECT_EQ(r.signal, 0) << cmd << " died of signal " << r.signal << "\n" << r.err;
  EXPECT_EQ(r.status, int(code)) << cmd << "\nstderr: " << r.err << "\nstdout: " << r.out;
  EXPECT_TRUE(r.err.starts_with("psi: error: ")) << cmd << "\nstderr: " << r.err;
  ASSERT_FALSE(r.err.empty()) << cmd;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << cmd << ": stderr is not one line:\n" << r.err;
  for (const auto& m : mentions) EXPECT_NE(r.err.find(m), std::string::npos) << cmd << ": stderr lacks '" << m << "':\n" << r.err;
  ++rejected_count();
}

// The same contract for a library call: a psi::Error with `code`, one line, naming `mentions`.
inline void expect_error(const std::function<void()>& f, psi::Exit code, const std::vector<std::string>& mentions,
                         const std::string& what) {
  try {
    f();
  } catch (const psi::Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(int(e.code()), int(code)) << what << ": " << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << what << ": message is not one line: " << m;
    for (const auto& s : mentions) EXPECT_NE(m.find(s), std::string::npos) << what << ": message lacks '" << s << "': " << m;
    ++rejected_count();
    return;
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": threw a non-psi exception: " << e.what();
    return;
  }
  ADD_FAILURE() << what << ": accepted";
}

// Prints the count at the end of the test program (scripts/reliability.sh collects it).
class CountPrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit CountPrinter(std::string suite) : suite_(std::move(suite)) {}
  void OnTestProgramEnd(const ::testing::UnitTest&) override {
    std::printf("psi-bad-input: %s: %d bad inputs rejected\n", suite_.c_str(), rejected_count());
  }

 private:
  std::string suite_;
};

}  // namespace psi::badinput
