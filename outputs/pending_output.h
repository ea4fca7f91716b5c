#pragma once
// A file being written for an output path, and the one step that puts it there
// (docs/reliability/output-places.md). Nothing here knows of HDF5.
//
// The file has no name while it is written: an unnamed file (O_TMPFILE) in the folder of the
// file it replaces, so a psi killed at any moment, by any signal, leaves nothing behind. Where
// the file system has no unnamed files it is a named temporary, removed on every exit path
// psi sees. commit() puts the file at its name only if what is there is still what the output
// rule decided on when the command started (check_output, outputs/output_path.h):
//   - nothing was there: the file is linked in with no-replace semantics (linkat, or
//     renameat2(RENAME_NOREPLACE)); a file, link or folder that appeared meanwhile stays and
//     the commit is refused;
//   - a regular file was there: it is swapped out with renameat2(RENAME_EXCHANGE), and what
//     came out is checked to be that same file (device and inode); if it is not, the swap is
//     undone and the commit refused. Where the file system cannot exchange, the identity is
//     checked just before a plain rename;
//   - the folder, or a symbolic link the output path was, must still be what it was.
// The folder is the one the output rule held open at its first check of the path (HeldFolder,
// outputs/output_path.h), so a folder swapped for a link, removed or replaced meanwhile cannot
// redirect the file elsewhere: the file is made and renamed relative to it, and it must still be
// the folder at the path at the rename.
#include <sys/types.h>

#include <filesystem>
#include <string>

namespace psi::outputs {

class PendingOutput {
 public:
  // Starts the file for output path `out` (creating its folder if needed). The output rule
  // must have been applied to `out` already, or is applied now with no inputs.
  explicit PendingOutput(const std::filesystem::path& out);
  PendingOutput(PendingOutput&& o) noexcept;
  PendingOutput& operator=(PendingOutput&& o) noexcept;
  PendingOutput(const PendingOutput&) = delete;
  PendingOutput& operator=(const PendingOutput&) = delete;
  // Not committed: the file is gone with it.
  ~PendingOutput();

  // A name through which a library that opens files by name (libhdf5's stdio driver,
  // std::ofstream) writes this file: /proc/self/fd/N, or the named temporary where /proc is not
  // mounted. (libhdf5's default driver takes the real path of a link, which an unnamed file has
  // not.)
  const std::filesystem::path& write_path() const { return write_path_; }
  int fd() const { return fd_; }
  const std::filesystem::path& out() const { return out_; }

  // Why a write to the file failed, as " (cause)": the errno `e` it left where that is an I/O
  // error, else the file system's free space; empty when neither tells. A library that writes
  // (libhdf5) reports only that its write failed.
  std::string failure_cause(int e) const;
  // Puts the file at `out` as described above; refuses once a signal has arrived
  // (engine/interrupt.h). psi::Error (exit 2) when what is there changed, exit 3 on an I/O
  // failure.
  void commit();
  // The same at another output path (an interrupted run's `.partial.h5`), also after a signal.
  void commit_partial(const std::filesystem::path& partial);

 private:
  void place(const std::filesystem::path& out);
  void close_all() noexcept;

  std::filesystem::path out_;
  std::filesystem::path dir_;        // the folder, as a path, at the start
  std::filesystem::path write_path_;
  std::string temp_leaf_;            // the named temporary's name in dir_, if there is one
  int dir_fd_ = -1;
  int fd_ = -1;
};

// A name for a temporary of `leaf` in its folder: "<leaf>.tmp.<pid>.<16 hex digits>", the leaf
// cut (at a character boundary) so that the whole name fits the file system's NAME_MAX.
std::string temporary_leaf(const std::string& leaf);

// Writes `bytes` to `path` through a PendingOutput: never a half-written file, nothing left
// behind on an error.
void write_file_atomically(const std::filesystem::path& path, const std::string& bytes);

}  // namespace psi::outputs
