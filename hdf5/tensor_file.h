#pragma once
// A file of tensors in any format psi reads, as an hdf5::File, so that every command reads a
// user's tensors by one API: an HDF5 file is opened as it is (File::open_read); a NumPy .npy
// file (engine/npy.h) is read into an HDF5 image in memory holding its array as the dataset
// /<file name less .npy>, with the root attribute format='numpy-npy'; a safetensors file
// (engine/checkpoint/safetensors.h, any numeric dtype) likewise, each tensor as the dataset of its
// name ('/' in a name separating groups), with format='safetensors'; a NumPy .npz archive
// (engine/zip.h) likewise, each member NAME.npy as the dataset /NAME, with format='numpy-npz'
// (a torch.save file, also a zip, is refused). The kind of file is told by its first bytes,
// never by its name.
#include <filesystem>
#include <string>
#include <vector>

#include "hdf5/h5.h"

namespace psi::hdf5 {

inline constexpr const char* kNpyFormat = "numpy-npy";
inline constexpr const char* kNpzFormat = "numpy-npz";
inline constexpr const char* kSafetensorsFormat = "safetensors";

// The file, or a psi::Error (exit 2) naming it and why it cannot be read: no such file, not a
// regular file, the system's reason, or none of HDF5, .npy, .npz and safetensors.
File open_tensor_file(const std::filesystem::path& p);

// Arrays a caller holds in memory (the Python module's), as a file of the format kArraysFormat
// built as a safetensors file's is: each array the dataset of its name, names checked alike.
// `data` points at the array's elements, little-endian and row-major, of its kind.
inline constexpr const char* kArraysFormat = "arrays";
struct ArrayView {
  std::string name;
  ElemKind kind = ElemKind::other;
  Shape shape;
  const void* data = nullptr;
};
File arrays_file(const std::string& shown_as, const std::vector<ArrayView>& arrays);

// Whether `f` came from a file holding one unnamed array (an .npy file): its one dataset pairs
// with the other side's one dataset whatever their names.
bool single_array_file(const File& f);

}  // namespace psi::hdf5
