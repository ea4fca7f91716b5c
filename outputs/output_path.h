#pragma once
// The output rule of every psi command that writes a file (docs/reliability/inputs-vs-outputs.md).
// An output path is refused with a one-line psi::Error (exit 2), before the command's work
// starts, when
//   - it exists and is not a regular file (a directory, a device node, a fifo, a socket: the
//     final rename would replace it);
//   - it exists and is not a file psi wrote (a psi-h5 file, or the text, figure or list file of
//     the kind the command writes, as its `mine` recognizes it; this folder knows no HDF5), unless the command was given
//     --force (set_force_replace): psi never replaces a recording or anyone else's file;
//   - it is a symbolic link whose target is missing; a link to an existing file is written
//     through (the file it names is replaced, the link stays), under the same rules;
//   - it is one of the command's inputs, or another of its outputs (another `what`), under any
//     name: the same file (st_dev/st_ino, which covers symbolic and hard links) or the same path
//     once `..` and symbolic links are resolved (canonical folder + name, for a file not there
//     yet). The files --allow-link-to names are inputs too (outputs/link_allowance.h);
//   - it names a folder (a trailing '/', '.' or '..'), or a part of its path cannot be looked up
//     (a symbolic link loop, no permission), or is a file.
// What the rule decided is kept (output_decision), with the output's folder held open from this
// first check to the rename (HeldFolder): files are written as a PendingOutput
// (outputs/pending_output.h) in that folder, put in place only if that is still what is there.
#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace psi::outputs {

// Whether an existing file is one psi wrote, of the kind an output is.
using Recognizer = std::function<bool(const std::filesystem::path&)>;
// A file whose first line is exactly `line` (a CSV header, a Markdown title psi writes).
Recognizer first_line_is(std::string line);
// A file whose first line starts with `prefix`.
Recognizer first_line_starts_with(std::string prefix);

// --force: replace an existing regular file at an output path even if psi did not write it.
void set_force_replace(bool on);

// `what` names the output in the message (e.g. "run: --out"); empty: the path alone. `mine`
// recognizes the existing files of this output's kind that psi wrote (hdf5::is_psi_h5 for
// psi's HDF5 files); an empty one: an existing file is replaced only with --force.
void check_output(const std::filesystem::path& out, const std::vector<std::filesystem::path>& inputs,
                  const std::string& what, const Recognizer& mine);

// The file an output path writes: the path itself, or what a symbolic link at it names.
std::filesystem::path write_target(const std::filesystem::path& out);

// The folder an output goes in, held open (O_PATH) from the output rule's check: the file is
// made, linked and renamed relative to this handle, never through the path again, so a folder
// (or any folder above it) swapped for a link, removed or replaced later cannot send the file
// elsewhere. A folder that does not exist yet is held through its nearest existing ancestor and
// made inside it when the file is started.
class HeldFolder {
 public:
  // `dir` absolute and lexically normal; `name` names the output in messages.
  HeldFolder(std::filesystem::path dir, const std::string& name);
  ~HeldFolder();
  HeldFolder(const HeldFolder&) = delete;
  HeldFolder& operator=(const HeldFolder&) = delete;
  const std::filesystem::path& path() const { return dir_; }
  // Whether what is at the held path now is still the folder held (a later check may share it).
  bool still_there() const;
  // psi::Error (exit 2) if the folder held (or the ancestor held for it) is no longer at its path.
  void check(const std::string& writing);
  // A new descriptor (O_PATH, the caller closes it) of the folder, its missing parts made now;
  // psi::Error (exit 2) if the folder held is no longer at its path.
  int open_folder(const std::string& writing);
  // psi::Error (exit 2) unless `fd` is the folder at `dir`: checked again at the rename.
  static void check_at_path(int fd, const std::filesystem::path& dir, const std::string& writing);

 private:
  std::filesystem::path dir_;
  std::filesystem::path held_;  // dir_, or its nearest ancestor that existed
  int fd_ = -1;
  mutable std::mutex mutex_;
};

// What check_output decided an output may replace, kept from the first check of a path until
// psi's file is in place (outputs/pending_output.h): the replacement is of that file and nothing
// else, in the folder held then. `target` is write_target(out), absolute.
struct OutputDecision {
  std::filesystem::path target;
  bool via_link = false;  // out was a symbolic link to target
  bool existed = false;   // a regular file was at target: dev/ino
  dev_t dev = 0;
  ino_t ino = 0;
  std::shared_ptr<HeldFolder> folder;  // target's folder
};
// The decision recorded for `out`; check_output(out, {}, "", {}) first when there is none.
OutputDecision output_decision(const std::filesystem::path& out);
// psi's own file (dev/ino) is now at `out`: a later write of the same path replaces it.
void output_placed(const std::filesystem::path& out, dev_t dev, ino_t ino);

// A folder whose outputs are named only later (psi probe --figures): held now, as check_output
// holds an output's folder, and each output later checked in it is written through this hold.
void hold_output_folder(const std::filesystem::path& dir, const std::string& what);

}  // namespace psi::outputs
