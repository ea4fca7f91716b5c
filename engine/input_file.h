#pragma once
// A file named as an input, and the real reason it cannot be read: every reader (HDF5, .npy,
// .npz, safetensors, captures, configurations) opens its input here, so that a permission
// denied is never called "not an HDF5 file", a folder on the path that cannot be entered is
// never "no such file", and a folder or fifo is "not a regular file" wherever it is given.
#include <sys/types.h>

#include <filesystem>
#include <string>

namespace psi {

// "a directory", "a fifo", "a symbolic link", … for messages, inputs' and outputs' alike.
std::string file_kind(mode_t mode);

// Why `p` cannot be read as an input file, in words naming the cause ("no such file",
// "permission denied (...)", "not a regular file (a directory)", ...), or "" when it is a regular
// file this process may open for reading.
std::string input_file_problem(const std::filesystem::path& p);

// Throws psi::Error (exit 2) "<p>: <cause>" when input_file_problem(p) is not empty.
void check_input_file(const std::filesystem::path& p);

// The same for a folder psi reads files from (a folder of recordings, a device-check folder):
// "no such folder", "not a folder (a regular file)", "permission denied (...)", or "".
std::string input_folder_problem(const std::filesystem::path& p);

// A descriptor open for reading on the regular file `p` (O_NONBLOCK: a fifo is refused, not
// waited on), or psi::Error (exit 2) "<p>: <cause>". The caller closes it.
int open_input_file(const std::filesystem::path& p);

}  // namespace psi
