#include "outputs/output_path.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>

#include "engine/error.h"
#include "outputs/link_allowance.h"
#include "outputs/pending_output.h"

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

// check_output's decisions by output path (absolute, lexically normal).
std::mutex g_decisions_mutex;
std::map<std::string, OutputDecision> g_decisions;

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

std::string file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a fifo";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISREG(mode)) return "a regular file";
  return "not a regular file";
}

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
  {
    std::error_code ec;
    for (fs::path up = fs::absolute(out, ec).parent_path(); !up.empty(); up = up.parent_path()) {
      const fs::file_status st = fs::status(up, ec);
      if (fs::exists(st)) {
        if (!fs::is_directory(st)) throw Error(name + ": " + up.string() + " is not a directory (ENOTDIR)");
        break;
      }
      if (up == up.parent_path()) break;
    }
  }
  const fs::path target = write_target(out);  // refuses a dangling link
  const std::string via = target == out ? "" : " (a symbolic link to " + target.string() + ")";
  const auto so = stat_of(out);
  if (so && !S_ISREG(so->st_mode))
    throw Error(name + via + " is " + file_kind(so->st_mode) + ", not a regular file; not replaced");
  const fs::path out_resolved = resolved(out);
  // Files external links were allowed to lead to are read as much as the named inputs are.
  std::vector<fs::path> read = inputs;
  for (fs::path& linked : allowed_link_targets()) read.push_back(std::move(linked));
  for (const fs::path& in : read) {
    if (in.empty()) continue;
    const auto si = stat_of(in);
    const bool same_inode = so && si && si->st_dev == so->st_dev && si->st_ino == so->st_ino;
    const bool same_path = resolved(in) == out_resolved;
    if (!same_inode && !same_path) continue;
    const std::string how = out == in   ? ""
                            : same_path ? " (the same file by another path)"
                                        : " (a hard link to it)";
    throw Error(name + " is the input file " + in.string() + how + "; not overwritten");
  }
  if (so && !g_force && !(mine && mine(target)))
    throw Error(name + via + " exists and is not a file psi wrote of this kind (a recording, or someone else's "
                "file); not replaced (--force replaces it)");
  OutputDecision d;
  std::error_code ec;
  d.target = fs::absolute(target, ec).lexically_normal();
  d.via_link = target != out;
  d.existed = so.has_value();
  if (so) {
    d.dev = so->st_dev;
    d.ino = so->st_ino;
  }
  std::lock_guard<std::mutex> lock(g_decisions_mutex);
  g_decisions.try_emplace(decision_key(out), std::move(d));  // the first decision stands
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

void write_file_atomically(const fs::path& path, const std::string& bytes) {
  PendingOutput file(path);
  {
    std::ofstream out(file.write_path(), std::ios::binary | std::ios::trunc);
    out << bytes;
    if (!out.flush()) throw Error(path.string() + ": cannot be written", Exit::run_failed);
  }
  file.commit();
}

}  // namespace psi::outputs
