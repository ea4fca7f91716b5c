#pragma once
// What psi compare reads of a file's attributes beside the data: a string attribute, and the
// file's format.
#include <string>

#include "hdf5/h5.h"

namespace psi::compare {

// A scalar string attribute of `ds`; empty when absent or of another type.
std::string string_attr(const hdf5::File& f, const std::string& ds, const char* name);

// The root attribute `schema` or `format`, or "plain HDF5".
std::string file_format(const hdf5::File& f);

}  // namespace psi::compare
