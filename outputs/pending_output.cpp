#include "outputs/pending_output.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>

#include "engine/error.h"
#include "engine/input_file.h"
#include "engine/interrupt.h"
#include "outputs/output_path.h"

namespace fs = std::filesystem;

namespace psi::outputs {

namespace {

// Both names in the folder held open.
int rename2(int dir_fd, const char* from, const char* to, unsigned flags) {
  return ::renameat2(dir_fd, from, dir_fd, to, flags);
}

std::string errno_text(int e) { return std::strerror(e); }

bool same_file(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

}  // namespace

std::string temporary_leaf(const std::string& leaf) {
  std::random_device rd;
  char tail[48];
  std::snprintf(tail, sizeof tail, ".tmp.%d.%08x%08x", int(::getpid()), unsigned(rd()), unsigned(rd()));
  std::string head = leaf;
  const std::size_t room = NAME_MAX - std::strlen(tail);
  if (head.size() > room) {
    head.resize(room);
    // Not inside a UTF-8 sequence: drop continuation bytes and the lead byte they follow.
    while (!head.empty() && (static_cast<unsigned char>(head.back()) & 0xC0) == 0x80) head.pop_back();
    if (!head.empty() && static_cast<unsigned char>(head.back()) >= 0xC0) head.pop_back();
  }
  return head + tail;
}

PendingOutput::PendingOutput(const fs::path& out) : out_(out) {
  const OutputDecision d = output_decision(out);
  dir_ = d.target.parent_path();
  // The folder the output rule held when it first checked `out`: not what the path names now.
  dir_fd_ = d.folder->open_folder(d.target.string());
  fd_ = ::openat(dir_fd_, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0666);
  if (fd_ < 0) {
    // No unnamed files here (an old kernel, NFS, FAT): a named temporary, made exclusively so
    // that it never truncates anything, and registered for the second-signal exit.
    for (int attempt = 0; attempt < 8 && fd_ < 0; ++attempt) {
      temp_leaf_ = temporary_leaf(d.target.filename().string());
      fd_ = ::openat(dir_fd_, temp_leaf_.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0666);
      if (fd_ < 0 && errno != EEXIST) break;
    }
    if (fd_ < 0) {
      const int e = errno;
      ::close(dir_fd_);
      dir_fd_ = -1;
      throw Error(out.string() + ": cannot create a file in " + dir_.string() + ": " + errno_text(e), Exit::run_failed);
    }
    register_temp_file((dir_ / temp_leaf_).string());
  }
  // Written through the descriptor's own name, so that a folder renamed meanwhile does not
  // send the data elsewhere; the folder's path where /proc is not there.
  const fs::path proc = "/proc/self/fd/" + std::to_string(fd_);
  struct stat a {}, b {};
  if (::stat(proc.c_str(), &a) == 0 && ::fstat(fd_, &b) == 0 && same_file(a, b))
    write_path_ = proc;
  else if (!temp_leaf_.empty())
    write_path_ = dir_ / temp_leaf_;
  else {
    close_all();
    throw Error(out.string() + ": an unnamed file cannot be written without /proc", Exit::run_failed);
  }
}

PendingOutput::PendingOutput(PendingOutput&& o) noexcept
    : out_(std::move(o.out_)), dir_(std::move(o.dir_)), write_path_(std::move(o.write_path_)),
      temp_leaf_(std::move(o.temp_leaf_)), dir_fd_(o.dir_fd_), fd_(o.fd_) {
  o.dir_fd_ = o.fd_ = -1;
  o.temp_leaf_.clear();
}

PendingOutput& PendingOutput::operator=(PendingOutput&& o) noexcept {
  if (this != &o) {
    close_all();
    out_ = std::move(o.out_);
    dir_ = std::move(o.dir_);
    write_path_ = std::move(o.write_path_);
    temp_leaf_ = std::move(o.temp_leaf_);
    dir_fd_ = o.dir_fd_;
    fd_ = o.fd_;
    o.dir_fd_ = o.fd_ = -1;
    o.temp_leaf_.clear();
  }
  return *this;
}

PendingOutput::~PendingOutput() { close_all(); }

void PendingOutput::close_all() noexcept {
  if (!temp_leaf_.empty() && dir_fd_ >= 0) {
    ::unlinkat(dir_fd_, temp_leaf_.c_str(), 0);
    release_temp_file((dir_ / temp_leaf_).string());
  }
  temp_leaf_.clear();
  if (fd_ >= 0) ::close(fd_);
  if (dir_fd_ >= 0) ::close(dir_fd_);
  fd_ = dir_fd_ = -1;
}

std::string PendingOutput::failure_cause(int e) const {
  if (e == ENOSPC || e == EDQUOT || e == EFBIG || e == EIO) return " (" + errno_text(e) + ")";
  struct statvfs fs {};
  if (fd_ >= 0 && ::fstatvfs(fd_, &fs) == 0 && (fs.f_bfree == 0 || (::geteuid() != 0 && fs.f_bavail == 0)))
    return " (" + errno_text(ENOSPC) + ")";
  return "";
}

void PendingOutput::commit() {
  // Once a signal has arrived nothing new appears under a final name.
  check_interrupt("writing " + out_.string());
  place(out_);
}

void PendingOutput::commit_partial(const fs::path& partial) { place(partial); }

void PendingOutput::place(const fs::path& out) {
  if (fd_ < 0) throw Error(out.string() + ": committed twice", Exit::run_failed);
  const OutputDecision d = output_decision(out);
  const std::string target = d.target.string();
  auto changed = [&](const std::string& what) {
    return Error(target + " " + what + " while psi was writing it; left as it is, nothing written");
  };
  // The folder held open must still be the one at its path, and be where the target is.
  HeldFolder::check_at_path(dir_fd_, d.target.parent_path(), target);
  // The output path itself: still the link it was, or still no link.
  {
    struct stat l {};
    const bool is_link = ::lstat(out.c_str(), &l) == 0 && S_ISLNK(l.st_mode);
    std::error_code ec;
    if (d.via_link && (!is_link || fs::canonical(out, ec) != d.target))
      throw Error(out.string() + " was a symbolic link to " + target + " and changed while psi was writing; nothing written");
    if (!d.via_link && is_link) throw changed(d.existed ? "became a symbolic link" : "appeared (a symbolic link)");
  }
  const std::string leaf = d.target.filename().string();
  const fs::path proc = "/proc/self/fd/" + std::to_string(fd_);
  struct stat mine {};
  if (::fstat(fd_, &mine) != 0) throw Error(target + ": " + errno_text(errno), Exit::run_failed);

  // A name for the file in the folder, for the calls that move names: the named temporary, or
  // the unnamed file linked under one (registered: a second signal removes it).
  auto named = [&]() -> std::string {
    if (!temp_leaf_.empty()) return temp_leaf_;
    for (int attempt = 0; attempt < 8; ++attempt) {
      const std::string t = temporary_leaf(leaf);
      register_temp_file((dir_ / t).string());
      if (::linkat(AT_FDCWD, proc.c_str(), dir_fd_, t.c_str(), AT_SYMLINK_FOLLOW) == 0) return temp_leaf_ = t;
      const int e = errno;
      release_temp_file((dir_ / t).string());
      if (e != EEXIST) throw Error(target + ": cannot be written: " + errno_text(e), Exit::run_failed);
    }
    throw Error(target + ": no free temporary name", Exit::run_failed);
  };
  auto done = [&] {
    if (!temp_leaf_.empty()) release_temp_file((dir_ / temp_leaf_).string());
    temp_leaf_.clear();
    output_placed(out, mine.st_dev, mine.st_ino);
    close_all();
  };

  if (!d.existed) {
    // Nothing was there: whatever is there now stays.
    int r;
    if (temp_leaf_.empty()) {
      r = ::linkat(AT_FDCWD, proc.c_str(), dir_fd_, leaf.c_str(), AT_SYMLINK_FOLLOW);
    } else {
      r = rename2(dir_fd_, temp_leaf_.c_str(), leaf.c_str(), RENAME_NOREPLACE);
      if (r != 0 && errno == EINVAL) {  // no renameat2 here: link(2) does not replace either
        r = ::linkat(dir_fd_, temp_leaf_.c_str(), dir_fd_, leaf.c_str(), 0);
        if (r == 0) ::unlinkat(dir_fd_, temp_leaf_.c_str(), 0);
      }
    }
    if (r != 0) {
      const int e = errno;
      if (e == EEXIST) {
        struct stat there {};
        const bool seen = ::fstatat(dir_fd_, leaf.c_str(), &there, AT_SYMLINK_NOFOLLOW) == 0;
        throw changed("appeared (" + (seen ? file_kind(there.st_mode) : std::string("a new entry")) + ")");
      }
      throw Error(target + ": cannot be put in place: " + errno_text(e), Exit::run_failed);
    }
    done();
    return;
  }

  // A regular file was there: swap, and keep the swap only if what came out is that file.
  const std::string t = named();
  if (rename2(dir_fd_, t.c_str(), leaf.c_str(), RENAME_EXCHANGE) == 0) {
    struct stat out_came {};
    const bool seen = ::fstatat(dir_fd_, t.c_str(), &out_came, AT_SYMLINK_NOFOLLOW) == 0;
    if (seen && S_ISREG(out_came.st_mode) && out_came.st_dev == d.dev && out_came.st_ino == d.ino) {
      ::unlinkat(dir_fd_, t.c_str(), 0);
      done();
      return;
    }
    // Not the file the rule decided on: put it back, and drop ours.
    if (rename2(dir_fd_, t.c_str(), leaf.c_str(), RENAME_EXCHANGE) != 0) {
      release_temp_file((dir_ / t).string());
      temp_leaf_.clear();  // it is not ours now: left where it is, and named
      throw Error(target + " was replaced while psi was writing it, and could not be put back: it is now " +
                  (dir_ / t).string() + " (" + errno_text(errno) + ")");
    }
    // Ours is back under the temporary name: dropped now, not when its owner goes.
    struct stat back {};
    if (::fstatat(dir_fd_, t.c_str(), &back, AT_SYMLINK_NOFOLLOW) == 0 && same_file(back, mine)) {
      ::unlinkat(dir_fd_, t.c_str(), 0);
      release_temp_file((dir_ / t).string());
      temp_leaf_.clear();
    }
    throw changed(seen && S_ISREG(out_came.st_mode) ? "was replaced by another file"
                                                     : "was replaced by " + (seen ? file_kind(out_came.st_mode) : std::string("something else")));
  }
  const int e = errno;
  if (e == ENOENT) {
    // Removed meanwhile: nothing there to lose, but nothing new may appear either.
    if (rename2(dir_fd_, t.c_str(), leaf.c_str(), RENAME_NOREPLACE) != 0) {
      if (errno == EEXIST) throw changed("appeared again");
      throw Error(target + ": cannot be put in place: " + errno_text(errno), Exit::run_failed);
    }
    done();
    return;
  }
  if (e != EINVAL) throw Error(target + ": cannot be put in place: " + errno_text(e), Exit::run_failed);
  // No exchange on this file system: the identity checked just before a plain rename.
  struct stat there {};
  if (::fstatat(dir_fd_, leaf.c_str(), &there, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(there.st_mode) ||
      there.st_dev != d.dev || there.st_ino != d.ino)
    throw changed("was replaced");
  if (::renameat(dir_fd_, t.c_str(), dir_fd_, leaf.c_str()) != 0)
    throw Error(target + ": cannot be put in place: " + errno_text(errno), Exit::run_failed);
  temp_leaf_.clear();
  done();
}

void write_file_atomically(const fs::path& path, const std::string& bytes) {
  PendingOutput file(path);
  {
    std::ofstream out(file.write_path(), std::ios::binary | std::ios::trunc);
    out << bytes;
    if (!out.flush()) throw Error(path.string() + ": cannot be written" + file.failure_cause(errno), Exit::run_failed);
  }
  file.commit();
}

}  // namespace psi::outputs
