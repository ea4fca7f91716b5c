#pragma once
// Internal to hdf5/h5*.cpp: what the wrapper's files share (h5.cpp the files' lifecycle and the
// isolated check, h5_links.cpp where a path may lead, h5_read.cpp typed reads, h5_write.cpp
// writes).
#include <string>

#include "engine/error.h"
#include "hdf5/h5_handle.h"

namespace psi::hdf5::detail {

// Every refusal of a file's content is bad input (exit 2).
inline Error h5_error(const std::string& what) { return Error(what, Exit::bad_input); }

// Opens the object at `path` of `file`, or refuses it naming `where` (defined in h5_links.cpp).
Handle open_object(hid_t file, const std::string& path, const std::string& where);

}  // namespace psi::hdf5::detail
