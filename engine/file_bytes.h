#pragma once
// A regular file's whole contents, as the readers of whole-file formats (.npy, .npz) take them.
#include <filesystem>
#include <string>

namespace psi {

// The file's bytes; a psi::Error (exit 2) naming the file and the system's reason when it
// cannot be opened, is not a regular file (a fifo is refused, not waited on), or shrinks while
// it is read.
std::string read_file_bytes(const std::filesystem::path& p);

}  // namespace psi
