#pragma once
// NumPy .npy files (format versions 1.0, 2.0 and 3.0): the magic, a header holding a Python dict
// literal ({'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }) and the elements, all
// checked against the file before anything is used. Plain numeric arrays only: an object array
// holds pickled Python objects, which psi never unpickles, and a structured dtype has no one
// element type.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tensor.h"

namespace psi {

// The element types psi reads from .npy, in either byte order: float32, float64, uint8,
// uint16 (BF16 bits, when the user says so), int64.
enum class NpyType { f32, f64, u8, u16, i64 };

struct NpyArray {
  std::string descr;  // as the header gives it: "<f4", ">u2", "|u1", ...
  NpyType type = NpyType::f32;
  Shape shape;                     // () for a 0-d array
  std::vector<std::uint8_t> data;  // the elements in C (row-major) order, little-endian
};

// Whether the file starts with the .npy magic (false for one that cannot be read).
bool is_npy_file(const std::filesystem::path& p);

// Reads an .npy file. A file that cannot be read (the system's reason), a malformed or lying
// header, a dtype psi does not read, or data shorter or longer than the header declares is a
// psi::Error (exit 2) naming the file and the cause.
NpyArray read_npy(const std::filesystem::path& p);

// The same from a file's bytes (`name` for the messages): what read_npy and the fuzz target run.
NpyArray parse_npy(std::string_view bytes, const std::string& name);

}  // namespace psi
