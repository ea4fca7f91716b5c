#include "outputs/output_path.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>

#include "engine/error.h"
#include "engine/input_file.h"
#include "outputs/link_allowance.h"

namespace fs = std::filesystem;

namespace psi::outputs {

namespace {

// stat() follows symbolic links: a link to a directory is a directory here, as for the rename.
std::optional<struct stat> stat_of(const fs::path& p) {
  struct stat st;
  if (::stat(p.c_str(), &st) != 0) return std::nullopt;
  return st;
}

fs::path resolved(const fs::path& p) {
  std::error_code ec;
  fs::path r = fs::weakly_canonical(fs::absolute(p, ec), ec);
  return ec ? p.lexically_normal() : r;
}

std::atomic<bool> g_force{false};

// check_output's decisions by output path (absolute, lexically normal), the outputs declared with
// a `what` (which must be distinct files), and the folders held, shared while still in place.
std::mutex g_decisions_mutex;
std::map<std::string, OutputDecision> g_decisions;
struct Declared {
  std::string what;
  fs::path path, resolved;
};
std::vector<Declared> g_declared;
std::map<std::string, std::weak_ptr<HeldFolder>> g_folders;
std::map<std::string, std::shared_ptr<HeldFolder>> g_pinned;  // hold_output_folder's, held to the end

bool same_node(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

// What a lookup's errno means for a path, in a message.
std::string lookup_failure(int e) {
  switch (e) {
    case ENOENT: return "it is gone (ENOENT)";
    case ENOTDIR: return "a part of its path is not a folder (ENOTDIR)";
    case ELOOP: return "a symbolic link loop (ELOOP)";
    case EACCES: return "permission denied (EACCES)";
    default: return std::strerror(e);
  }
}

std::string decision_key(const fs::path& out) {
  std::error_code ec;
  return fs::absolute(out, ec).lexically_normal().string();
}

std::string first_line(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::string line;
  char c;
  while (line.size() < 4096 && in.get(c) && c != '\n') line += c;
  return line;
}

}  // namespace

Recognizer first_line_is(std::string line) {
  return [line = std::move(line)](const fs::path& p) { return first_line(p) == line; };
}

Recognizer first_line_starts_with(std::string prefix) {
  return [prefix = std::move(prefix)](const fs::path& p) { return first_line(p).starts_with(prefix); };
}

void set_force_replace(bool on) { g_force = on; }

fs::path write_target(const fs::path& out) {
  std::error_code ec;
  if (!fs::is_symlink(fs::symlink_status(out, ec))) return out;
  const fs::path target = fs::canonical(out, ec);
  if (ec == std::errc::too_many_symbolic_link_levels)
    throw Error(out.string() + " is a symbolic link loop (ELOOP); not written through");
  if (ec) throw Error(out.string() + " is a symbolic link to a missing file (" + fs::read_symlink(out, ec).string() +
                      "); not written through");
  return target;
}

void check_output(const fs::path& out, const std::vector<fs::path>& inputs, const std::string& what,
                  const Recognizer& mine) {
  const std::string name = (what.empty() ? "" : what + " ") + out.string();
  if (out.empty()) throw Error((what.empty() ? std::string("output") : what) + ": an empty path");
  // The names and the folder it goes in, before any work: these used to fail late, as an
  // internal error from creating the folder or the file.
  for (const fs::path& part : out)
    if (part.native().size() > NAME_MAX)
      throw Error(name.substr(0, 200) + "...: a name of " + std::to_string(part.native().size()) + " bytes, longer than " +
                  std::to_string(NAME_MAX) + " (ENAMETOOLONG)");
  if (out.native().size() >= PATH_MAX)
    throw Error(name.substr(0, 200) + "...: a path of " + std::to_string(out.native().size()) + " bytes, " +
                std::to_string(PATH_MAX) + " or longer (ENAMETOOLONG)");
  if (const fs::path leaf = out.filename(); leaf.empty() || leaf == "." || leaf == "..")
    throw Error(name + ": names a folder (it ends in '" + (leaf.empty() ? "/" : leaf.string()) + "'), not a file");
  // Checked again (a writer checks the path it is given): the folder held since the first check
  // is what counts, and says first what became of it.
  {
    std::shared_ptr<HeldFolder> held;
    {
      std::lock_guard<std::mutex> lock(g_decisions_mutex);
      if (const auto it = g_decisions.find(decision_key(out)); it != g_decisions.end()) held = it->second.folder;
    }
    if (held) held->check(out.string());
  }
  {
    std::error_code ec;
    for (fs::path up = fs::absolute(out, ec).parent_path(); !up.empty(); up = up.parent_path()) {
      struct stat st;
      if (::stat(up.c_str(), &st) == 0) {
        if (!S_ISDIR(st.st_mode)) throw Error(name + ": " + up.string() + " is not a directory (ENOTDIR)");
        break;
      }
      // Missing (or under a file, found further up): made when the file is written. Anything else
      // (a loop, no permission) no folder can be made under.
      if (errno != ENOENT && errno != ENOTDIR) throw Error(name + ": " + up.string() + ": " + lookup_failure(errno));
      if (up == up.parent_path()) break;
    }
  }
  const fs::path target = write_target(out);  // refuses a dangling link
  const std::string via = target == out ? "" : " (a symbolic link to " + target.string() + ")";
  const auto so = stat_of(out);
  if (so && !S_ISREG(so->st_mode))
    throw Error(name + via + " is " + file_kind(so->st_mode) + ", not a regular file; not replaced");
  const fs::path out_resolved = resolved(out);
  auto same = [&](const fs::path& other, std::string& how) {
    const auto si = stat_of(other);
    const bool same_inode = so && si && same_node(*si, *so);
    const bool same_path = resolved(other) == out_resolved;
    how = out == other ? "" : same_path ? " (the same file by another path)" : " (a hard link to it)";
    return same_inode || same_path;
  };
  // Files external links were allowed to lead to are read as much as the named inputs are.
  std::vector<fs::path> read = inputs;
  for (fs::path& linked : allowed_link_targets()) read.push_back(std::move(linked));
  std::string how;
  for (const fs::path& in : read)
    if (!in.empty() && same(in, how)) throw Error(name + " is the input file " + in.string() + how + "; not overwritten");
  std::lock_guard<std::mutex> lock(g_decisions_mutex);
  // Two outputs of one command at one file: one of them would be lost.
  if (!what.empty())
    for (const Declared& d : g_declared)
      if (d.what != what && same(d.path, how))
        throw Error(name + " is also " + d.what + " " + d.path.string() + how + "; one file cannot be two outputs");
  if (so && !g_force && !(mine && mine(target)))
    throw Error(name + via + " exists and is not a file psi wrote of this kind (a recording, or someone else's "
                "file); not replaced (--force replaces it)");
  if (!what.empty() &&
      std::none_of(g_declared.begin(), g_declared.end(), [&](const Declared& d) { return d.what == what && d.path == out; }))
    g_declared.push_back({what, out, out_resolved});
  if (g_decisions.contains(decision_key(out))) return;  // the first decision stands
  OutputDecision d;
  std::error_code ec;
  d.target = fs::absolute(target, ec).lexically_normal();
  d.via_link = target != out;
  d.existed = so.has_value();
  if (so) {
    d.dev = so->st_dev;
    d.ino = so->st_ino;
  }
  const std::string dir = d.target.parent_path().string();
  if (const auto pinned = g_pinned.find(dir); pinned != g_pinned.end()) d.folder = pinned->second;
  else if (auto held = g_folders[dir].lock(); held && held->still_there()) d.folder = std::move(held);
  else g_folders[dir] = d.folder = std::make_shared<HeldFolder>(d.target.parent_path(), name);
  g_decisions.emplace(decision_key(out), std::move(d));
}

void hold_output_folder(const fs::path& dir, const std::string& what) {
  std::error_code ec;
  const fs::path abs = fs::absolute(dir, ec).lexically_normal();
  const std::string key = (abs.has_filename() ? abs : abs.parent_path()).string();
  std::lock_guard<std::mutex> lock(g_decisions_mutex);
  if (g_pinned.contains(key)) return;
  auto held = std::make_shared<HeldFolder>(fs::path(key), what + " " + dir.string());
  g_folders[key] = held;
  g_pinned.emplace(key, std::move(held));
}

HeldFolder::HeldFolder(fs::path dir, const std::string& name) : dir_(std::move(dir)), held_(dir_) {
  for (;;) {
    fd_ = ::open(held_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd_ >= 0) break;
    const int e = errno;
    if ((e != ENOENT && e != ENOTDIR) || held_ == held_.parent_path())
      throw Error(name + ": its folder " + held_.string() + " cannot be opened: " + lookup_failure(e));
    held_ = held_.parent_path();
  }
}

HeldFolder::~HeldFolder() { ::close(fd_); }

bool HeldFolder::still_there() const {
  std::lock_guard<std::mutex> lock(mutex_);
  struct stat held {}, now {};
  return ::fstat(fd_, &held) == 0 && ::stat(held_.c_str(), &now) == 0 && same_node(held, now);
}

void HeldFolder::check_at_path(int fd, const fs::path& dir, const std::string& writing) {
  struct stat held {}, now {};
  if (::fstat(fd, &held) != 0) throw Error(dir.string() + ": " + std::strerror(errno), Exit::run_failed);
  if (::stat(dir.c_str(), &now) == 0 && same_node(held, now)) return;
  const int e = errno;
  const std::string is_now = ::stat(dir.c_str(), &now) != 0 ? lookup_failure(e)
                             : S_ISDIR(now.st_mode)         ? "another folder is there now"
                                                            : "it is " + file_kind(now.st_mode) + " now";
  throw Error(dir.string() + ": the folder was moved or replaced while psi was writing " + writing + " (" + is_now +
              "); nothing written");
}

void HeldFolder::check(const std::string& writing) {
  std::lock_guard<std::mutex> lock(mutex_);
  check_at_path(fd_, held_, writing);
}

int HeldFolder::open_folder(const std::string& writing) {
  std::lock_guard<std::mutex> lock(mutex_);
  check_at_path(fd_, held_, writing);
  // The missing parts, each made and opened inside the one before: none may be a link.
  for (const fs::path& part : dir_.lexically_relative(held_)) {
    if (part == ".") continue;
    if (::mkdirat(fd_, part.c_str(), 0777) != 0 && errno != EEXIST)
      throw Error(writing + ": cannot make the folder " + (held_ / part).string() + ": " + std::strerror(errno),
                  Exit::run_failed);
    const int next = ::openat(fd_, part.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0) {
      const int e = errno;
      struct stat st {};
      const std::string is_now = ::fstatat(fd_, part.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0
                                     ? "it is " + file_kind(st.st_mode) + " now"
                                     : lookup_failure(e);
      throw Error((held_ / part).string() + ": the folder was replaced while psi was writing " + writing + " (" +
                  is_now + "); nothing written");
    }
    ::close(fd_);
    fd_ = next;
    held_ /= part;
  }
  const int fd = ::fcntl(fd_, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) throw Error(writing + ": " + std::strerror(errno), Exit::run_failed);
  return fd;
}

OutputDecision output_decision(const fs::path& out) {
  {
    std::lock_guard<std::mutex> lock(g_decisions_mutex);
    if (const auto it = g_decisions.find(decision_key(out)); it != g_decisions.end()) return it->second;
  }
  check_output(out, {}, "", {});
  std::lock_guard<std::mutex> lock(g_decisions_mutex);
  return g_decisions.at(decision_key(out));
}

void output_placed(const fs::path& out, dev_t dev, ino_t ino) {
  std::lock_guard<std::mutex> lock(g_decisions_mutex);
  const auto it = g_decisions.find(decision_key(out));
  if (it == g_decisions.end()) return;
  it->second.existed = true;
  it->second.dev = dev;
  it->second.ino = ino;
}

}  // namespace psi::outputs
