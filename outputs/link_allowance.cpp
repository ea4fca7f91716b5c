#include "outputs/link_allowance.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "engine/error.h"

namespace fs = std::filesystem;

namespace psi::outputs {

namespace {

struct Allowed {
  fs::path name;
  dev_t dev;
  ino_t ino;
};

std::mutex g_mutex;
std::vector<Allowed> g_allowed;

}  // namespace

void allow_link_target(const fs::path& file) {
  struct stat st;
  if (::stat(file.c_str(), &st) != 0)
    throw Error("--allow-link-to " + file.string() + ": " + std::strerror(errno), Exit::bad_input);
  if (!S_ISREG(st.st_mode)) throw Error("--allow-link-to " + file.string() + ": not a regular file", Exit::bad_input);
  std::lock_guard<std::mutex> lock(g_mutex);
  g_allowed.push_back({file, st.st_dev, st.st_ino});
}

bool link_target_allowed(const fs::path& candidate) {
  struct stat st;
  return ::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && link_target_allowed(st.st_dev, st.st_ino);
}

bool link_target_allowed(dev_t dev, ino_t ino) {
  std::lock_guard<std::mutex> lock(g_mutex);
  for (const Allowed& a : g_allowed)
    if (a.dev == dev && a.ino == ino) return true;
  return false;
}

std::vector<fs::path> allowed_link_targets() {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::vector<fs::path> out;
  for (const Allowed& a : g_allowed) out.push_back(a.name);
  return out;
}

}  // namespace psi::outputs
