#include "hdf5/h5.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <tuple>

#include "engine/environment.h"
#include "engine/error.h"
#include "engine/input_file.h"
#include "hdf5/h5_detail.h"
#include "outputs/isolated.h"
#include "outputs/output_path.h"

namespace fs = std::filesystem;

namespace psi::hdf5 {

using detail::h5_error;

void quiet_errors() {
  static const bool once = [] {
    // No library shutdown at exit: after a failed write the file cannot be closed, and
    // libhdf5 1.10's exit handler then crashes closing it again (SIGSEGV in H5F__close_cb). psi
    // closes every file it writes itself; nothing is left for the handler to flush.
    H5dont_atexit();
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    // A dataset naming a filter libhdf5 lacks would make it load a shared object from the
    // plugin folders (HDF5_PLUGIN_PATH): a file psi reads never runs code. psi's files and the
    // recordings use the built-in filters only.
    H5PLset_loading_state(0);
    return true;
  }();
  (void)once;
}

std::string_view kind_name(ElemKind k) {
  switch (k) {
    case ElemKind::bf16: return "bfloat16";
    case ElemKind::f32: return "float32";
    case ElemKind::f64: return "float64";
    case ElemKind::u8: return "uint8";
    case ElemKind::u16: return "uint16";
    case ElemKind::i64: return "int64";
    case ElemKind::other: return "other";
  }
  return "other";
}

bool is_psi_h5(const std::filesystem::path& p) {
  try {
    const auto schema = hdf5::File::open_read(p).attr("/", "schema");
    return schema && std::holds_alternative<std::string>(*schema) &&
           std::get<std::string>(*schema).starts_with("psi-");
  } catch (const Error&) {
    return false;  // not HDF5, unreadable, or links elsewhere: not a file psi wrote
  }
}

namespace {

// A file as it was when checked: the same inode, size and times, or it is another file.
using FileKey = std::tuple<dev_t, ino_t, off_t, std::int64_t, std::int64_t>;

FileKey key_of(const struct stat& st) {
  return {st.st_dev, st.st_ino, st.st_size, std::int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec,
          std::int64_t(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec};
}

std::mutex g_checked_mutex;
// Files a child has read: "" if it came through, else why the file is refused (asked again, the
// same file is refused again without another child).
std::map<FileKey, std::string> g_checked;

// How long a child may take to read a file's structure: PSI_H5_CHECK_SECONDS, default 20.
std::chrono::milliseconds check_limit() {
  static const std::chrono::milliseconds limit(1000 * env_h5_check_seconds());
  return limit;
}

}  // namespace

File File::open_unchecked(const fs::path& p) {
  File f;
  f.final_path_ = p;
  f.file_ = Handle(H5Fopen(p.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!f.file_) throw h5_error(p.string() + ": cannot open as HDF5 (corrupt or truncated?)");
  return f;
}

namespace {

// What reading a file's structure may cost the child, beyond which libhdf5 is taken to be
// allocating for what a corrupt file claims (a vlen string of gigabytes in a 12 KB file) and the
// file is refused. psi's attributes are a few hundred bytes; a dataset's elements are read into
// one buffer, and libhdf5 may hold a chunk as large beside it.
constexpr std::uint64_t kAttributeMemory = std::uint64_t(64) << 20;
constexpr std::uint64_t kDatasetMemorySlack = std::uint64_t(256) << 20;

std::string mib(std::uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

}  // namespace

std::string File::walk_structure() const {
  const auto quietly = [](const auto& step) {
    try {
      step();
    } catch (...) {
    }
  };
  // psi's readers ask for attributes by name ("schema", "sha256_full", ...), and libhdf5 can hang
  // or allocate without bound reading one the child never reached: an object whose attribute
  // list libhdf5 cannot read is refused, and every attribute on the list is read.
  std::set<std::string> listed;
  const auto read_attributes = [&](const std::string& object) -> std::string {
    if (!listed.insert(object).second) return "";
    bool unlisted = false;
    quietly([&] {
      Handle o = detail::open_object(file_.get(), object, where(object));
      hsize_t idx = 0;
      auto each = [](hid_t, const char*, const H5A_info_t*, void*) -> herr_t { return 0; };
      unlisted = H5Aiterate2(o.get(), H5_INDEX_NAME, H5_ITER_INC, &idx, each, nullptr) < 0;
    });
    if (unlisted) return "libhdf5 cannot list the attributes of " + object;
    const outputs::MemoryGrowth growth;
    quietly([&] { attrs(object); });
    if (growth.bytes() > kAttributeMemory)
      return "libhdf5 needed " + mib(growth.bytes()) + " to read the attributes of " + object;
    return "";
  };
  // What psi's readers do with a file, in their order (libhdf5's state after a corrupt read
  // depends on what came before): list the datasets (every link and storage checked), the root's
  // attributes, then each dataset's attributes, layout and, while they are few (a recording is
  // megabytes; a state file can be more), its elements; then every object's attributes.
  std::vector<DatasetInfo> datasets;
  quietly([&] { datasets = list_datasets("/"); });
  if (std::string r = read_attributes("/"); !r.empty()) return r;
  std::uint64_t budget = std::uint64_t(512) << 20;
  for (const DatasetInfo& d : datasets) {
    if (std::string r = read_attributes(d.path); !r.empty()) return r;
    const std::uint64_t size = d.kind == ElemKind::u8 ? 1 : d.kind == ElemKind::bf16 ? 2 : d.kind == ElemKind::f32 ? 4 : 8;
    const std::uint64_t bytes = std::uint64_t(psi::numel(d.shape)) * size;
    if (bytes > budget) continue;
    budget -= bytes;
    const outputs::MemoryGrowth growth;
    quietly([&] {
      switch (d.kind) {
        case ElemKind::bf16: read_bf16(d.path); break;
        case ElemKind::f32: read_f32(d.path); break;
        case ElemKind::f64: read_f64(d.path); break;
        case ElemKind::u8: read_u8(d.path); break;
        default: break;
      }
    });
    if (growth.bytes() > 2 * bytes + kDatasetMemorySlack)
      return "libhdf5 needed " + mib(growth.bytes()) + " to read the " + std::to_string(bytes) + " bytes of " + d.path;
  }
  // Every object hard links reach, whatever psi's link rules make of the file (a reader may ask
  // for one by its path): one libhdf5 cannot enumerate may hold what the child never read.
  std::vector<std::string> objects;
  auto cb = [](hid_t, const char* name, const H5O_info_t*, void* op) -> herr_t {
    static_cast<std::vector<std::string>*>(op)->push_back(name);
    return 0;
  };
  quietly([&] { check_stored_here("/"); });
  if (H5Ovisit2(file_.get(), H5_INDEX_NAME, H5_ITER_INC, cb, &objects, H5O_INFO_BASIC) < 0)
    return "libhdf5 cannot list the objects in the file";
  for (const std::string& o : objects)
    if (o != ".")
      if (std::string r = read_attributes("/" + o); !r.empty()) return r;
  return "";
}

File File::open_read(const fs::path& p) {
  quiet_errors();
  // The system's reason first: an unreadable file is not "not an HDF5 file".
  check_input_file(p);
  if (H5Fis_hdf5(p.c_str()) <= 0) throw h5_error(p.string() + ": not an HDF5 file");
  struct stat before;
  if (::stat(p.c_str(), &before) != 0) throw h5_error(p.string() + ": cannot stat: " + std::strerror(errno));
  const FileKey key = key_of(before);
  std::optional<std::string> refusal;
  {
    std::lock_guard<std::mutex> lock(g_checked_mutex);
    if (const auto it = g_checked.find(key); it != g_checked.end()) refusal = it->second;
  }
  // libhdf5 parses the file format itself, and a corrupt file can crash it, make it loop or
  // allocate without bound: it reads the file first in a child process, and psi opens the file
  // only if the child came through.
  if (!refusal) {
    const outputs::IsolatedOutcome o =
        outputs::run_isolated([&] { return open_unchecked(p).walk_structure(); }, check_limit(), std::uint64_t(4) << 30);
    refusal = o.kind == outputs::IsolatedOutcome::Kind::refused ? o.detail + " (in a child process reading it first)"
              : o.kind == outputs::IsolatedOutcome::Kind::crashed
                  ? "libhdf5 crashed (" + o.detail + ") reading the file in a child process"
              : o.kind == outputs::IsolatedOutcome::Kind::timed_out
                  ? "libhdf5 did not finish reading the file in a child process (" + o.detail +
                        "; PSI_H5_CHECK_SECONDS sets the limit)"
                  : "";
    std::lock_guard<std::mutex> lock(g_checked_mutex);
    g_checked.emplace(key, *refusal);
  }
  if (!refusal->empty()) throw h5_error(p.string() + ": " + *refusal + "; refused (a corrupt or hostile HDF5 file)");
  File f = open_unchecked(p);
  // The file opened must be the one the child read, not one put in its place meanwhile.
  void* handle = nullptr;
  struct stat opened;
  if (H5Fget_vfd_handle(f.file_.get(), H5P_DEFAULT, &handle) < 0 || !handle || ::fstat(*static_cast<int*>(handle), &opened) != 0 ||
      key_of(opened) != key)
    throw h5_error(p.string() + ": changed while it was being checked; not read");
  return f;
}

File File::create(const fs::path& final_path) {
  quiet_errors();
  // The part of the output rule that needs no inputs; commands check their inputs before.
  outputs::check_output(final_path, {}, "", hdf5::is_psi_h5);
  File f;
  f.final_path_ = final_path;
  f.pending_.emplace(final_path);
  // The stdio driver opens the name it is given (/proc/self/fd/N, the pending file's own) as it
  // is; TRUNC: that file is empty.
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (!fapl || H5Pset_fapl_stdio(fapl.get()) < 0) throw Error(final_path.string() + ": cannot create HDF5 file", Exit::run_failed);
  f.file_ = Handle(H5Fcreate(f.pending_->write_path().c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), H5Fclose);
  if (!f.file_)
    throw Error(final_path.string() + ": cannot create HDF5 file" + f.pending_->failure_cause(errno), Exit::run_failed);
  // What libhdf5 opened must be the pending file, not one put at its name meanwhile (the stdio
  // driver's handle is its FILE*'s address).
  void* handle = nullptr;
  struct stat opened {}, pending {};
  if (H5Fget_vfd_handle(f.file_.get(), H5P_DEFAULT, &handle) < 0 || !handle ||
      ::fstat(::fileno(*static_cast<FILE**>(handle)), &opened) != 0 || ::fstat(f.pending_->fd(), &pending) != 0 ||
      opened.st_dev != pending.st_dev || opened.st_ino != pending.st_ino)
    throw Error(final_path.string() + ": the file being written was replaced while it was opened; nothing written");
  f.writable_ = true;
  return f;
}

File File::in_memory(const fs::path& shown_as) {
  quiet_errors();
  static std::atomic<std::uint64_t> count{0};
  File f;
  f.final_path_ = shown_as;
  // backing_store false: nothing is read from or written to a file of that name.
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (!fapl || H5Pset_fapl_core(fapl.get(), std::size_t(1) << 20, false) < 0)
    throw Error(shown_as.string() + ": cannot make an HDF5 image in memory", Exit::run_failed);
  const std::string name = "psi-in-memory-" + std::to_string(::getpid()) + "-" + std::to_string(count++);
  f.file_ = Handle(H5Fcreate(name.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), H5Fclose);
  if (!f.file_) throw Error(shown_as.string() + ": cannot make an HDF5 image in memory", Exit::run_failed);
  f.writable_ = true;
  f.in_memory_ = true;
  return f;
}

File::File(File&& o) noexcept
    : file_(std::move(o.file_)), final_path_(std::move(o.final_path_)), pending_(std::move(o.pending_)),
      in_memory_(o.in_memory_), writable_(o.writable_) {
  o.writable_ = false;
  o.pending_.reset();
}

File& File::operator=(File&& o) noexcept {
  if (this != &o) {
    this->~File();
    new (this) File(std::move(o));
  }
  return *this;
}

File::~File() {
  // libhdf5 closes its descriptor first; the pending file then goes with ours.
  file_ = Handle();
  pending_.reset();
}

void File::commit() {
  if (!writable_ || !pending_) throw Error(final_path_.string() + ": commit on a read-only or in-memory file", Exit::run_failed);
  if (H5Fflush(file_.get(), H5F_SCOPE_GLOBAL) < 0)
    throw Error(final_path_.string() + ": flush failed" + pending_->failure_cause(errno), Exit::run_failed);
  file_ = Handle();
  pending_->commit();
  pending_.reset();
  writable_ = false;
}

void File::abandon_to(const fs::path& partial) {
  if (!writable_ || !pending_) throw Error(final_path_.string() + ": abandon on a read-only or in-memory file", Exit::run_failed);
  H5Fflush(file_.get(), H5F_SCOPE_GLOBAL);
  file_ = Handle();
  pending_->commit_partial(partial);
  pending_.reset();
  writable_ = false;
}

std::string File::where(const std::string& object) const { return final_path_.string() + ":" + object; }

}  // namespace psi::hdf5
