#pragma once
// The environment variables psi reads, each read and checked here like an option: a value that
// is empty, not a number, out of range, `inf` or `nan` is a psi::Error naming the variable
// (exit 2), never a silent default. main() checks them all before a command starts
// (check_environment), so a bad one is refused up front rather than deep inside a run.
#include <cstdint>
#include <filesystem>
#include <optional>

namespace psi {

// PSI_THREADS: threads of parallel_for, 1..1024; nullopt when unset.
std::optional<int> env_threads();
// PSI_PROGRESS_SECONDS: seconds between plain progress lines, 0..1e6 (0: every step); nullopt
// when unset (the default period, with an early first line).
std::optional<double> env_progress_seconds();
// PSI_H5_CHECK_SECONDS: whole seconds a child may take to read an HDF5 file, 1..3600; default 20.
std::uint64_t env_h5_check_seconds();
// PSI_ISA, the vector level psi's kernels use, is read by engine/cpu_features.h's env_isa,
// beside the level it sets; check_environment checks it with the others.
// PSI_SHARED: the shared folder (recordings, facts); nullopt when unset.
std::optional<std::filesystem::path> env_shared();

// Reads every variable above; the first bad one is thrown.
void check_environment();

}  // namespace psi
