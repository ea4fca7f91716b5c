#include "engine/file_bytes.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "engine/error.h"
#include "engine/input_file.h"

namespace psi {

std::string read_file_bytes(const std::filesystem::path& p) {
  const int fd = open_input_file(p);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw Error(p.string() + ": cannot stat: " + std::strerror(errno));
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
