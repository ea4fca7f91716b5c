#pragma once
// psi verify: one HDF5 file checked on its own, before anyone trusts it — a psi report or state
// file, or a recording someone sent. Everything psi's readers check on the way, applied to every
// dataset at once: the file is HDF5 and holds only what is stored in it (no soft or external
// links, no external storage, no virtual datasets: refused, exit 2, by the h5 layer); every
// integrity attribute is well-formed (hdf5::read_integrity, exit 2 otherwise); every dataset
// stored whole that records a sha256_full hashes to it; every tensor records one (a tensor with
// nothing to check it against is `unverifiable`, or under --allow-unverified a note marked
// UNVERIFIED; text datasets, JSON metadata, are not hashed by psi or the recordings); a dataset's
// `dtype` label matches its stored type; a float dataset's non-finite elements match its
// nonfinite_count where it records one; a psi file is of this psi's schema and not partial. Each
// failed check is a problem named by the dataset.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace psi::hdf5 {

struct VerifyReport {
  std::filesystem::path file;
  std::string format;               // "psi-h5/1 (<experiment>)", "a recording (no psi schema)", ...
  std::int64_t datasets = 0;        // read
  std::int64_t hashes_checked = 0;  // sha256_full compared with the data
  std::int64_t unchecked = 0;       // datasets whose type psi does not read (named in notes)
  std::int64_t nonfinite = 0;       // NaN and ±Inf elements over the float datasets
  std::int64_t unverifiable = 0;    // of the problems: tensors with nothing to check them against
  std::vector<std::string> problems;
  std::vector<std::string> notes;
  bool ok() const { return problems.empty(); }
};

// psi::Error (exit 2) for a file psi cannot read as a whole; problems for checks that fail.
VerifyReport verify_file(const std::filesystem::path& file);

}  // namespace psi::hdf5
