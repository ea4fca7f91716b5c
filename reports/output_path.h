#pragma once
// The output rule of every psi command that writes a file (docs/reliability.md, "Outputs").
// An output path is refused with a one-line psi::Error (exit 2), before the command's work
// starts, when it exists and is not a regular file (a directory, a device node, a fifo, a
// socket: the final rename would replace it), or when it is one of the command's inputs under
// any name: the same file (st_dev/st_ino, which covers symbolic and hard links) or the same path
// once `..` and symbolic links are resolved. Files are written under a temporary name beside
// the target and moved over it by rename_into_place, which looks at the target again first.
#include <filesystem>
#include <string>
#include <vector>

namespace psi::reports {

// `what` names the output in the message (e.g. "run: --out"); empty: the path alone.
void check_output(const std::filesystem::path& out, const std::vector<std::filesystem::path>& inputs,
                  const std::string& what);

// A name beside `path` for writing it, unique to this process and call.
std::filesystem::path temp_name(const std::filesystem::path& path);

// Renames `temp` over `target`, unless `target` has become something other than a regular file
// since it was checked (psi::Error, exit 2) or a signal has arrived (engine/interrupt.h: exit
// 130). `temp` is the caller's to remove on an error.
void rename_into_place(const std::filesystem::path& temp, const std::filesystem::path& target);
// The same for the `.partial.h5` an interrupted run leaves: it goes into place after the signal.
void rename_partial_into_place(const std::filesystem::path& temp, const std::filesystem::path& target);

// Writes `bytes` to `path` under temp_name(path), then rename_into_place: never a half-written
// file, and nothing left behind on an error.
void write_file_atomically(const std::filesystem::path& path, const std::string& bytes);

}  // namespace psi::reports
