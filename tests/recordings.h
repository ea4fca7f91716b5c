#pragma once
// Where the tests find the recorded official tensors (../shared/reference, as CMake found it:
// PSI_SHARED_DIR), written once. The policy for a missing recording is the same everywhere: the
// test that needs it fails, naming the file (hdf5::File::open_read's error). The suite's claims
// are claims about the recordings; a skip would let a checkout without them pass.
#include <filesystem>
#include <string>

namespace psi::test {

inline std::filesystem::path reference_dir() { return std::filesystem::path(PSI_SHARED_DIR) / "reference"; }
inline std::filesystem::path reference_file(const std::string& name) { return reference_dir() / name; }

}  // namespace psi::test
