#pragma once
// --allow-link-to: the files an HDF5 external link may lead to. psi reads only what is stored in
// the file it opened (hdf5/h5.h) unless the user names, on the command line, each file a
// link leads to. A named file is then one of the command's inputs too, so the output rule
// (outputs/output_path.h) never lets an output replace it.
#include <sys/types.h>

#include <filesystem>
#include <vector>

namespace psi::outputs {

// Records `file` (an existing regular file, checked by the caller) as a file external links may
// lead to, by its device and inode as well as by name.
void allow_link_target(const std::filesystem::path& file);
// Whether `candidate` is one of those files (the same device and inode): a path, a hard link or
// a symbolic link to it all count, a file put in its place since does not.
bool link_target_allowed(const std::filesystem::path& candidate);
bool link_target_allowed(dev_t dev, ino_t ino);
// The files allowed so far, as named.
std::vector<std::filesystem::path> allowed_link_targets();

}  // namespace psi::outputs
