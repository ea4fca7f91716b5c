#pragma once
// What the tests of psi compare on the other file formats (test_compare_formats, test_npz)
// share: running `psi compare A B` in a scratch folder, writing a file's bytes, and the shape of
// a refusal.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/psi_command.h"

namespace psi::testing {

inline void spit(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary) << bytes;
}

inline Outcome compare(const std::filesystem::path& a, const std::filesystem::path& b, const TempDir& dir,
                       const std::string& extra = "") {
  return run_psi_in("compare " + a.string() + " " + b.string() + extra, dir.path());
}

// One `psi: error:` line naming the file, with `why` in it; exit 2.
inline void expect_refused(const Outcome& r, const std::filesystem::path& file, const std::string& why) {
  EXPECT_EQ(r.status, 2) << r.out << r.err;
  EXPECT_TRUE(r.err.starts_with("psi: error: " + file.string() + ": ")) << r.err;
  EXPECT_NE(r.err.find(why), std::string::npos) << "expected: " << why << "\n" << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
}

}  // namespace psi::testing
