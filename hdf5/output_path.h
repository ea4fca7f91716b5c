#pragma once
// The output rule of every psi command that writes a file (docs/reliability.md, "Outputs").
// An output path is refused with a one-line psi::Error (exit 2), before the command's work
// starts, when
//   - it exists and is not a regular file (a directory, a device node, a fifo, a socket: the
//     final rename would replace it);
//   - it exists and is not a file psi wrote (a psi-h5 file, or the text, figure or list file of
//     the kind the command writes, as its `mine` recognizes it), unless the command was given
//     --force (set_force_replace): psi never replaces a recording or anyone else's file;
//   - it is a symbolic link whose target is missing; a link to an existing file is written
//     through (the file it names is replaced, the link stays), under the same rules;
//   - it is one of the command's inputs under any name: the same file (st_dev/st_ino, which
//     covers symbolic and hard links) or the same path once `..` and symbolic links are
//     resolved. The files --allow-link-to names are inputs too (hdf5/link_allowance.h).
// Files are written under a temporary name beside the file they replace and moved over it by
// rename_into_place, which looks at the target again first.
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace psi::hdf5 {

// Whether an existing file is one psi wrote, of the kind an output is.
using Recognizer = std::function<bool(const std::filesystem::path&)>;
// An HDF5 file whose root `schema` attribute is psi's (psi-h5/1 for reports, states and probe
// outputs, psi-synthinit/1 for psi synthinit's tensor files): every HDF5 file psi writes.
bool is_psi_h5(const std::filesystem::path& p);
// A file whose first line is exactly `line` (a CSV header, a Markdown title psi writes).
Recognizer first_line_is(std::string line);
// A file whose first line starts with `prefix`.
Recognizer first_line_starts_with(std::string prefix);

// --force: replace an existing regular file at an output path even if psi did not write it.
void set_force_replace(bool on);

// `what` names the output in the message (e.g. "run: --out"); empty: the path alone. `mine`
// recognizes the existing files of this output's kind that psi wrote.
void check_output(const std::filesystem::path& out, const std::vector<std::filesystem::path>& inputs,
                  const std::string& what, const Recognizer& mine = is_psi_h5);

// The file an output path writes: the path itself, or what a symbolic link at it names.
std::filesystem::path write_target(const std::filesystem::path& out);

// A name beside write_target(path) for writing it, unique to this process and call:
// "<file>.tmp.<host>.<pid>.<8 hex digits>". First removes what a killed psi left of the same
// output: regular files of that form, this user's, whose process is gone (same host, no such
// pid). A temporary of a live process, of another host (a shared folder on a cluster), a link or
// anything else is left alone.
std::filesystem::path temp_name(const std::filesystem::path& path);

// Renames `temp` over write_target(target), unless it has become something other than a
// regular file since it was checked (psi::Error, exit 2) or a signal has arrived
// (engine/interrupt.h: exit 130). `temp` is the caller's to remove on an error.
void rename_into_place(const std::filesystem::path& temp, const std::filesystem::path& target);
// The same for the `.partial.h5` an interrupted run leaves: it goes into place after the signal.
void rename_partial_into_place(const std::filesystem::path& temp, const std::filesystem::path& target);

// Writes `bytes` to `path` under temp_name(path), then rename_into_place: never a half-written
// file, and nothing left behind on an error.
void write_file_atomically(const std::filesystem::path& path, const std::string& bytes);

}  // namespace psi::hdf5
