#include "engine/file_bytes.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "engine/error.h"

namespace psi {

// The file's bytes, or the system's reason it cannot be read. O_NONBLOCK: a fifo must not block
// the open; it is refused next.
std::string read_file_bytes(const std::filesystem::path& p) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw Error(p.string() + ": cannot open: " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw Error(p.string() + ": cannot stat: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw Error(p.string() + ": not a regular file");
  std::string bytes(std::size_t(st.st_size), '\0');
  std::size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t r = ::pread(fd, bytes.data() + got, std::min<std::size_t>(bytes.size() - got, 1u << 30), off_t(got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw Error(p.string() + ": read failed at byte " + std::to_string(got) + ": " + std::strerror(errno));
    if (r == 0) throw Error(p.string() + ": ends at byte " + std::to_string(got) + ", shorter than when it was opened");
    got += std::size_t(r);
  }
  return bytes;
}

}  // namespace psi
