#include "hdf5/output_path.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <climits>
#include <limits>
#include <cstdio>
#include <fstream>
#include <optional>
#include <random>

#include "engine/error.h"
#include "engine/interrupt.h"
#include "engine/whole_number.h"
#include "hdf5/h5.h"
#include "hdf5/link_allowance.h"

namespace fs = std::filesystem;

namespace psi::hdf5 {

namespace {

// stat() follows symbolic links: a link to a directory is a directory here, as for the rename.
std::optional<struct stat> stat_of(const fs::path& p) {
  struct stat st;
  if (::stat(p.c_str(), &st) != 0) return std::nullopt;
  return st;
}

std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a fifo";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

fs::path resolved(const fs::path& p) {
  std::error_code ec;
  fs::path r = fs::weakly_canonical(fs::absolute(p, ec), ec);
  return ec ? p.lexically_normal() : r;
}

std::atomic<bool> g_force{false};

std::string first_line(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::string line;
  char c;
  while (line.size() < 4096 && in.get(c) && c != '\n') line += c;
  return line;
}

}  // namespace

bool is_psi_h5(const fs::path& p) {
  try {
    const auto schema = h5::File::open_read(p).attr("/", "schema");
    return schema && std::holds_alternative<std::string>(*schema) &&
           std::get<std::string>(*schema).starts_with("psi-");
  } catch (const Error&) {
    return false;  // not HDF5, unreadable, or links elsewhere: not a file psi wrote
  }
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
    throw Error(name + via + " is " + kind_of(so->st_mode) + ", not a regular file; not replaced");
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
}

namespace {

// This machine's name as it goes into a temporary's name: no dots or slashes, so that the name
// splits unambiguously.
std::string host_tag() {
  char host[HOST_NAME_MAX + 1] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || !host[0]) return "host";
  std::string s;
  for (const char* c = host; *c; ++c) s += std::isalnum(static_cast<unsigned char>(*c)) || *c == '-' ? *c : '_';
  return s;
}

bool all_of_kind(std::string_view s, std::size_t n, bool hex) {
  if (s.size() < 1 || (n && s.size() != n)) return false;
  for (char c : s)
    if (!(std::isdigit(static_cast<unsigned char>(c)) || (hex && c >= 'a' && c <= 'f'))) return false;
  return true;
}

void remove_stale_temps(const fs::path& target, const std::string& host) {
  const std::string prefix = target.filename().string() + ".tmp." + host + ".";
  std::error_code ec;
  fs::directory_iterator it(target.parent_path().empty() ? fs::path(".") : target.parent_path(), ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with(prefix)) continue;
    const std::string_view rest = std::string_view(name).substr(prefix.size());
    const auto dot = rest.find('.');
    if (dot == std::string_view::npos || !all_of_kind(rest.substr(0, dot), 0, false) ||
        !all_of_kind(rest.substr(dot + 1), 8, true))
      continue;
    const auto pid = parse_whole(rest.substr(0, dot), 1, std::uint64_t(std::numeric_limits<pid_t>::max()));
    struct stat st;
    if (!pid || ::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) continue;
    if (::kill(pid_t(*pid), 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to ask about
    std::error_code rm;
    fs::remove(it->path(), rm);
  }
}

}  // namespace

fs::path temp_name(const fs::path& path) {
  const std::string host = host_tag();
  fs::path t = write_target(path);
  remove_stale_temps(t, host);
  std::random_device rd;
  char buf[32];
  std::snprintf(buf, sizeof buf, ".%d.%08x", int(::getpid()), unsigned(rd()));
  t += ".tmp." + host + buf;
  return t;
}

void rename_partial_into_place(const fs::path& temp, const fs::path& out) {
  const fs::path target = write_target(out);
  if (const auto st = stat_of(target); st && !S_ISREG(st->st_mode))
    throw Error(target.string() + " became " + kind_of(st->st_mode) + " while it was being written; not replaced");
  std::error_code ec;
  fs::rename(temp, target, ec);
  if (ec) throw Error(target.string() + ": cannot rename from " + temp.string() + ": " + ec.message(), Exit::run_failed);
}

void rename_into_place(const fs::path& temp, const fs::path& target) {
  // Once a signal has arrived nothing new appears under a final name.
  check_interrupt("writing " + target.string());
  rename_partial_into_place(temp, target);
}

void write_file_atomically(const fs::path& path, const std::string& bytes) {
  const fs::path tmp = temp_name(path);
  register_temp_file(tmp.string());
  std::error_code ec;
  try {
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out << bytes;
      if (!out.flush()) throw Error(path.string() + ": cannot be written", Exit::run_failed);
    }
    rename_into_place(tmp, path);
  } catch (...) {
    fs::remove(tmp, ec);
    release_temp_file(tmp.string());
    throw;
  }
  release_temp_file(tmp.string());
}

}  // namespace psi::hdf5
