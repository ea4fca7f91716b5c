#include "engine/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "engine/error.h"

namespace psi {

namespace {

// The cause of a failed stat or open in the words psi uses everywhere; `opening`: the path was
// searched already (stat succeeded), so a permission denied is the `noun`'s own ("file", "folder").
std::string cause_of(int err, const std::filesystem::path& p, bool opening, const std::string& noun = "file") {
  switch (err) {
    case ENOENT: {
      struct stat link {};
      return ::lstat(p.c_str(), &link) == 0 && S_ISLNK(link.st_mode) ? "no such " + noun + " (a symbolic link to nothing)"
                                                                      : "no such " + noun;
    }
    case ENOTDIR: return "no such " + noun + " (a part of its path is not a directory)";
    case EACCES:
    case EPERM:
      return opening ? "permission denied (the " + noun + " may not be read)"
                     : "permission denied (a directory on its path may not be entered)";
    case ELOOP: return "too many levels of symbolic links on its path";
    case ENAMETOOLONG: return "file name too long";
    default: return std::string("cannot be opened: ") + std::strerror(err);
  }
}

// The descriptor, or -1 with `why` set.
int open_checked(const std::filesystem::path& p, std::string& why) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) {
    why = cause_of(errno, p, false);
    return -1;
  }
  // A fifo or a device would block the open or never end; a directory is no file at all.
  if (!S_ISREG(st.st_mode)) {
    why = "not a regular file (" + file_kind(st.st_mode) + ")";
    return -1;
  }
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    why = cause_of(errno, p, true);
    return -1;
  }
  // What was opened may have been put at the name after the stat.
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    why = S_ISREG(st.st_mode) ? std::string("cannot stat: ") + std::strerror(errno)
                              : "not a regular file (" + file_kind(st.st_mode) + ")";
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

std::string file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a fifo";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISREG(mode)) return "a regular file";
  return "an unknown kind of file";
}

std::string input_file_problem(const std::filesystem::path& p) {
  std::string why;
  const int fd = open_checked(p, why);
  if (fd >= 0) ::close(fd);
  return why;
}

void check_input_file(const std::filesystem::path& p) {
  if (std::string why = input_file_problem(p); !why.empty()) throw Error(p.string() + ": " + why);
}

std::string input_folder_problem(const std::filesystem::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return cause_of(errno, p, false, "folder");
  if (!S_ISDIR(st.st_mode)) return "not a folder (" + file_kind(st.st_mode) + ")";
  const int fd = ::open(p.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return cause_of(errno, p, true, "folder");
  ::close(fd);
  return "";
}

int open_input_file(const std::filesystem::path& p) {
  std::string why;
  const int fd = open_checked(p, why);
  if (fd < 0) throw Error(p.string() + ": " + why);
  return fd;
}

}  // namespace psi
