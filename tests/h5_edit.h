#pragma once
// A file psi wrote, or a copy of a recording, edited in place through the HDF5 C API as another
// tool would edit it: how a test makes a file that is wrong in one place.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

#include "hdf5/h5.h"  // the HDF5 C API

namespace psi::test {

inline void edit_h5(const std::filesystem::path& file, const std::function<void(hid_t)>& edit) {
  const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0) << file;
  edit(f);
  H5Fclose(f);
}

}  // namespace psi::test
