#include "hdf5/h5.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <map>
#include <tuple>
#include <type_traits>
#include <limits>
#include <cstdint>
#include <cstring>
#include <exception>
#include <new>

#include "engine/environment.h"
#include "engine/error.h"
#include "engine/interrupt.h"
#include "engine/memory.h"
#include "hdf5/schema.h"
#include "outputs/isolated.h"
#include "outputs/link_allowance.h"
#include "outputs/output_path.h"

namespace fs = std::filesystem;

namespace psi::h5 {

namespace {

Error h5_error(const std::string& what) { return Error(what, Exit::bad_input); }

constexpr const char* kOnlyHere = "; psi reads only what is stored in the file it opened";
// The most external links psi follows on one path: a chain or a loop of allowed links ends here.
constexpr int kMaxExternalLinks = 8;

// The file descriptor's device and inode of an open HDF5 file or of the file an object is in.
std::optional<std::pair<dev_t, ino_t>> file_identity(hid_t file_or_object) {
  Handle f(H5Iget_file_id(file_or_object), H5Fclose);
  void* fd = nullptr;
  struct stat st;
  if (!f || H5Fget_vfd_handle(f.get(), H5P_DEFAULT, &fd) < 0 || !fd || ::fstat(*static_cast<int*>(fd), &st) != 0)
    return std::nullopt;
  return std::pair{st.st_dev, st.st_ino};
}

// What a link that is not a hard link points at, for the refusal.
std::string link_description(hid_t file, const std::string& path, const H5L_info_t& li) {
  if (li.type == H5L_TYPE_SOFT || li.type == H5L_TYPE_EXTERNAL) {
    std::string val(li.u.val_size + 1, '\0');
    if (H5Lget_val(file, path.c_str(), val.data(), val.size(), H5P_DEFAULT) >= 0) {
      if (li.type == H5L_TYPE_SOFT) return "a soft link to " + std::string(val.c_str());
      const char *target_file = nullptr, *target_path = nullptr;
      if (H5Lunpack_elink_val(val.data(), val.size(), nullptr, &target_file, &target_path) >= 0)
        return "an external link to " + std::string(target_file ? target_file : "?") + ":" +
               std::string(target_path ? target_path : "?");
    }
    return li.type == H5L_TYPE_SOFT ? "a soft link" : "an external link";
  }
  return "a user-defined link";
}

// A dataset whose elements are not stored in its own file: external raw storage, or a virtual
// dataset mapped from other datasets or files (whose missing sources read as fill values).
std::optional<std::string> stored_elsewhere(hid_t dataset) {
  Handle dcpl(H5Dget_create_plist(dataset), H5Pclose);
  if (!dcpl) return "a dataset whose storage cannot be read";
  if (H5Pget_layout(dcpl.get()) == H5D_VIRTUAL) {
    std::string what = "a virtual dataset (its elements are mapped from other datasets";
    size_t count = 0;
    if (H5Pget_virtual_count(dcpl.get(), &count) >= 0 && count > 0) {
      const ssize_t n = H5Pget_virtual_filename(dcpl.get(), 0, nullptr, 0);
      if (n > 0) {
        std::string name(std::size_t(n) + 1, '\0');
        H5Pget_virtual_filename(dcpl.get(), 0, name.data(), name.size());
        what += ", the first in " + std::string(name.c_str());
      }
    }
    return what + ")";
  }
  if (const int n = H5Pget_external_count(dcpl.get()); n != 0) {
    char name[512] = {};
    off_t offset = 0;
    hsize_t size = 0;
    std::string what = "a dataset with external storage";
    if (n > 0 && H5Pget_external(dcpl.get(), 0, sizeof name, name, &offset, &size) >= 0)
      what += " (its elements live in " + std::string(name) + ")";
    return what;
  }
  // Elements never written (chunks never written, a contiguous dataset created and left empty)
  // read as fill values: they are not in the file either. HDF5's space status cannot say it for
  // compressed data (its storage is always "partly allocated"), so chunks are counted.
  Handle space(H5Dget_space(dataset), H5Sclose);
  if (!space || H5Sget_simple_extent_npoints(space.get()) <= 0) return std::nullopt;
  const auto unwritten = [](bool none) {
    return std::string("a dataset whose elements were ") + (none ? "never" : "only partly") +
           " written (HDF5 would read the rest as fill values)";
  };
  H5D_space_status_t status = H5D_SPACE_STATUS_ERROR;
  if (H5Dget_space_status(dataset, &status) >= 0 && status == H5D_SPACE_STATUS_NOT_ALLOCATED) return unwritten(true);
  const H5D_layout_t layout = H5Pget_layout(dcpl.get());
  if (layout == H5D_CHUNKED) {
    const int rank = H5Sget_simple_extent_ndims(space.get());
    std::vector<hsize_t> dims(std::size_t(std::max(rank, 0))), chunk(dims.size());
    H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
    if (H5Pget_chunk(dcpl.get(), rank, chunk.data()) != rank) return "a chunked dataset whose chunks cannot be read";
    hsize_t expected = 1;
    for (std::size_t i = 0; i < dims.size(); ++i) {
      const hsize_t per = chunk[i] == 0 ? 0 : (dims[i] + chunk[i] - 1) / chunk[i];
      expected = per != 0 && expected > std::numeric_limits<hsize_t>::max() / per ? std::numeric_limits<hsize_t>::max()
                                                                                 : expected * per;
    }
    hsize_t written = 0;
    if (H5Dget_num_chunks(dataset, space.get(), &written) < 0) return "a chunked dataset whose chunk index cannot be read";
    if (written < expected) return unwritten(written == 0);
  } else if (layout == H5D_CONTIGUOUS && status != H5D_SPACE_STATUS_ALLOCATED) {
    return unwritten(true);
  }
  return std::nullopt;
}

Handle open_object(hid_t file, const std::string& path, const std::string& where) {
  hid_t id = H5Oopen(file, path.c_str(), H5P_DEFAULT);
  if (id < 0) throw h5_error(where + ": no such object");
  return Handle(id, H5Oclose);
}

std::optional<std::string> read_string_attr(hid_t obj, const char* name) {
  if (H5Aexists(obj, name) <= 0) return std::nullopt;
  Handle a(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  Handle t(H5Aget_type(a.get()), H5Tclose);
  if (H5Tget_class(t.get()) != H5T_STRING) return std::nullopt;
  Handle space(H5Aget_space(a.get()), H5Sclose);
  if (H5Sget_simple_extent_npoints(space.get()) != 1) return std::nullopt;
  if (H5Tis_variable_str(t.get()) > 0) {
    Handle mt(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(mt.get(), H5T_VARIABLE);
    H5Tset_cset(mt.get(), H5Tget_cset(t.get()));
    char* s = nullptr;
    if (H5Aread(a.get(), mt.get(), &s) < 0) return std::nullopt;
    std::string out = s ? s : "";
    H5free_memory(s);
    return out;
  }
  std::size_t n = H5Tget_size(t.get());
  std::string out(n, '\0');
  if (H5Aread(a.get(), t.get(), out.data()) < 0) return std::nullopt;
  out.resize(std::strlen(out.c_str()));
  return out;
}

ElemKind classify_type(hid_t t, const std::string& dtype_attr) {
  H5T_class_t c = H5Tget_class(t);
  std::size_t size = H5Tget_size(t);
  if (c == H5T_INTEGER) {
    bool is_signed = H5Tget_sign(t) == H5T_SGN_2;
    if (size == 2 && !is_signed) return dtype_attr == "bfloat16" ? ElemKind::bf16 : ElemKind::u16;
    if (size == 1 && !is_signed) return ElemKind::u8;
    if (size == 8 && is_signed) return ElemKind::i64;
  } else if (c == H5T_FLOAT) {
    if (size == 4) return ElemKind::f32;
    if (size == 8) return ElemKind::f64;
  }
  return ElemKind::other;
}

void write_attr(hid_t obj, const std::string& name, const AttrValue& v) {
  if (H5Aexists(obj, name.c_str()) > 0) H5Adelete(obj, name.c_str());
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  if (auto* s = std::get_if<std::string>(&v)) {
    Handle t(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(t.get(), H5T_VARIABLE);
    H5Tset_cset(t.get(), H5T_CSET_UTF8);
    Handle a(H5Acreate2(obj, name.c_str(), t.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
    const char* p = s->c_str();
    if (!a || H5Awrite(a.get(), t.get(), &p) < 0) throw Error("hdf5: cannot write attribute " + name, Exit::run_failed);
  } else if (auto* i = std::get_if<std::int64_t>(&v)) {
    Handle a(H5Acreate2(obj, name.c_str(), H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
    if (!a || H5Awrite(a.get(), H5T_NATIVE_INT64, i) < 0) throw Error("hdf5: cannot write attribute " + name, Exit::run_failed);
  } else {
    double d = std::get<double>(v);
    Handle a(H5Acreate2(obj, name.c_str(), H5T_IEEE_F64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
    if (!a || H5Awrite(a.get(), H5T_NATIVE_DOUBLE, &d) < 0) throw Error("hdf5: cannot write attribute " + name, Exit::run_failed);
  }
}

}  // namespace

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

Handle& Handle::operator=(Handle&& o) noexcept {
  if (this != &o) {
    if (id_ >= 0 && close_) close_(id_);
    id_ = o.id_;
    close_ = o.close_;
    o.id_ = H5I_INVALID_HID;
  }
  return *this;
}

Handle::~Handle() {
  if (id_ >= 0 && close_) close_(id_);
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

void File::walk_structure() const {
  const auto quietly = [](const auto& step) {
    try {
      step();
    } catch (...) {
    }
  };
  // What psi's readers do with a file, in their order (libhdf5's state after a corrupt read
  // depends on what came before): list the datasets (every link and storage checked), the root's
  // attributes, then each dataset's attributes, layout and, while they are few (a recording is
  // megabytes; a state file can be more), its elements; then every group's attributes.
  std::vector<DatasetInfo> datasets;
  quietly([&] { datasets = list_datasets("/"); });
  quietly([&] { attrs("/"); });
  std::uint64_t budget = std::uint64_t(512) << 20;
  for (const DatasetInfo& d : datasets) {
    quietly([&] { attrs(d.path); });
    const std::uint64_t size = d.kind == ElemKind::u8 ? 1 : d.kind == ElemKind::bf16 ? 2 : d.kind == ElemKind::f32 ? 4 : 8;
    const std::uint64_t bytes = std::uint64_t(psi::numel(d.shape)) * size;
    if (bytes > budget) continue;
    budget -= bytes;
    quietly([&] {
      switch (d.kind) {
        case ElemKind::bf16: read_bf16(d.path); break;
        case ElemKind::f32: read_f32(d.path); break;
        case ElemKind::f64: read_f64(d.path); break;
        case ElemKind::u8: read_u8(d.path); break;
        default: break;
      }
    });
  }
  std::vector<std::string> groups;
  auto cb = [](hid_t, const char* name, const H5O_info_t* info, void* op) -> herr_t {
    if (info->type == H5O_TYPE_GROUP) static_cast<std::vector<std::string>*>(op)->push_back(name);
    return 0;
  };
  quietly([&] {
    check_stored_here("/");
    H5Ovisit2(file_.get(), H5_INDEX_NAME, H5_ITER_INC, cb, &groups, H5O_INFO_BASIC);
  });
  for (const std::string& g : groups)
    if (g != ".") quietly([&] { attrs("/" + g); });
}

File File::open_read(const fs::path& p) {
  quiet_errors();
  std::error_code ec;
  const fs::file_status st = fs::status(p, ec);
  if (!fs::exists(st)) throw h5_error(p.string() + ": no such file");
  // A fifo or a device would block the open or never end; a directory is no file at all.
  if (!fs::is_regular_file(st)) throw h5_error(p.string() + ": not a regular file");
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
        outputs::run_isolated([&] { open_unchecked(p).walk_structure(); }, check_limit(), std::uint64_t(4) << 30);
    refusal = o.kind == outputs::IsolatedOutcome::Kind::crashed
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

void allow_links_to(const fs::path& file) {
  File::open_read(file);
  outputs::allow_link_target(file);
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
  if (!f.file_) throw Error(final_path.string() + ": cannot create HDF5 file", Exit::run_failed);
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

File::File(File&& o) noexcept
    : file_(std::move(o.file_)), final_path_(std::move(o.final_path_)), pending_(std::move(o.pending_)),
      writable_(o.writable_) {
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
  if (!writable_) throw Error(final_path_.string() + ": commit on a read-only file", Exit::run_failed);
  if (H5Fflush(file_.get(), H5F_SCOPE_GLOBAL) < 0)
    throw Error(final_path_.string() + ": flush failed", Exit::run_failed);
  file_ = Handle();
  pending_->commit();
  pending_.reset();
  writable_ = false;
}

void File::abandon_to(const fs::path& partial) {
  if (!writable_) throw Error(final_path_.string() + ": abandon on a read-only file", Exit::run_failed);
  H5Fflush(file_.get(), H5F_SCOPE_GLOBAL);
  file_ = Handle();
  pending_->commit_partial(partial);
  pending_.reset();
  writable_ = false;
}

std::string File::where(const std::string& object) const { return final_path_.string() + ":" + object; }

bool File::exists(const std::string& path) const {
  int external = 0;
  return exists(path, external);
}

bool File::exists(const std::string& path, int& external) const {
  if (path == "/" || path.empty()) return true;
  // Each prefix in turn, so that HDF5 never traverses a link before psi has seen it: only hard
  // links lead on (a soft link may lead anywhere, an external link into another file, which
  // HDF5 would open). H5Lexists fails on a missing intermediate group anyway.
  std::size_t pos = 0;
  while (true) {
    pos = path.find('/', pos + 1);
    const std::string prefix = path.substr(0, pos);
    if (H5Lexists(file_.get(), prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    H5L_info_t li;
    if (H5Lget_info(file_.get(), prefix.c_str(), &li, H5P_DEFAULT) < 0) return false;
    if (li.type == H5L_TYPE_EXTERNAL) {
      if (++external > kMaxExternalLinks)
        throw h5_error(where(prefix) + ": more than " + std::to_string(kMaxExternalLinks) +
                       " external links on one path (a chain or a loop of links); not followed");
      if (!check_external_link(prefix, li, external)) return false;
    } else if (li.type != H5L_TYPE_HARD) {
      throw h5_error(where(prefix) + " is " + link_description(file_.get(), prefix, li) + kOnlyHere);
    }
    if (pos == std::string::npos) return true;
  }
}

bool File::check_external_link(const std::string& link, const H5L_info_t& li, int& external) const {
  std::string val(li.u.val_size + 1, '\0');
  const char *target_file = nullptr, *target_path = nullptr;
  if (H5Lget_val(file_.get(), link.c_str(), val.data(), val.size(), H5P_DEFAULT) < 0 ||
      H5Lunpack_elink_val(val.data(), val.size(), nullptr, &target_file, &target_path) < 0 || !target_file || !target_path)
    throw h5_error(where(link) + " is an external link that cannot be read" + kOnlyHere);
  const std::string described = "an external link to " + std::string(target_file) + ":" + target_path;
  if (outputs::allowed_link_targets().empty())
    throw h5_error(where(link) + " is " + described + kOnlyHere + " (--allow-link-to FILE follows links to FILE)");
  // HDF5 looks for a link's file under HDF5_EXT_PREFIX first: psi could not tell which file it
  // would open.
  if (const char* env = std::getenv("HDF5_EXT_PREFIX"); env && *env)
    throw h5_error(where(link) + " is " + described + "; not followed while HDF5_EXT_PREFIX is set");
  // The file libhdf5 1.10 opens first: an absolute name as it is, a relative one in the folder
  // of the file that holds the link (then other places, which psi never allows: the file that
  // is opened is checked again in open_here).
  fs::path target = target_file;
  if (target.is_relative()) {
    const std::string parent = link.substr(0, std::max<std::size_t>(link.rfind('/'), 1));
    Handle holder = open_object(file_.get(), parent, where(parent));
    const ssize_t n = H5Fget_name(holder.get(), nullptr, 0);
    std::string holder_name(n > 0 ? std::size_t(n) + 1 : 1, '\0');
    if (n <= 0 || H5Fget_name(holder.get(), holder_name.data(), holder_name.size()) < 0)
      throw h5_error(where(link) + " is " + described + "; the file that holds it has no name to resolve it against");
    std::error_code ec;
    target = fs::absolute(holder_name.c_str(), ec).parent_path() / target;
  }
  if (!outputs::link_target_allowed(target))
    throw h5_error(where(link) + " is " + described + " (the file " + target.string() + ")" + kOnlyHere +
                   ", and --allow-link-to does not name that file");
  // The path the link names is walked in its file by the same rules, so that a link there (a
  // chain, a loop) is seen before libhdf5 follows it; a missing one is a dangling link.
  return open_read(target).exists(target_path, external);
}

void File::check_file_of(hid_t object, const std::string& path) const {
  const auto in = file_identity(object);
  const auto own = file_identity(file_.get());
  if (!in || !own) throw h5_error(where(path) + ": cannot tell which file it is in");
  if (*in != *own && !outputs::link_target_allowed(in->first, in->second))
    throw h5_error(where(path) + " was found in a file --allow-link-to does not name" + kOnlyHere);
}

Handle File::open_here(const std::string& object) const {
  Handle o = open_object(file_.get(), object, where(object));
  check_file_of(o.get(), object);
  return o;
}

Handle File::open_dataset(const std::string& dataset) const {
  if (!exists(dataset)) throw h5_error(where(dataset) + ": no such dataset");
  Handle d(H5Dopen2(file_.get(), dataset.c_str(), H5P_DEFAULT), H5Dclose);
  if (!d) throw h5_error(where(dataset) + ": not a dataset");
  check_file_of(d.get(), dataset);
  if (const auto elsewhere = stored_elsewhere(d.get())) throw h5_error(where(dataset) + " is " + *elsewhere + kOnlyHere);
  return d;
}

DatasetInfo File::info(const std::string& dataset) const {
  Handle d = open_dataset(dataset);
  DatasetInfo out;
  out.path = dataset;
  out.dtype_attr = read_string_attr(d.get(), "dtype").value_or("");
  Handle t(H5Dget_type(d.get()), H5Tclose);
  out.kind = classify_type(t.get(), out.dtype_attr);
  Handle space(H5Dget_space(d.get()), H5Sclose);
  int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0) throw h5_error(where(dataset) + ": unreadable dataspace");
  std::vector<hsize_t> dims(rank);
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  // A corrupt dataspace can claim dimensions whose product overflows psi's int64 sizes.
  std::uint64_t n = 1;
  for (hsize_t x : dims) {
    if (x > hsize_t(INT64_MAX) || (x > 0 && n > std::uint64_t(INT64_MAX) / x))
      throw h5_error(where(dataset) + ": dataspace has more than 2^63 - 1 elements, more than psi can address");
    n *= x;
    out.shape.push_back(std::int64_t(x));
  }
  return out;
}

std::vector<DatasetInfo> File::list_datasets(const std::string& under) const {
  std::vector<std::string> names;
  auto cb = [](hid_t, const char* name, const H5O_info_t* info, void* op) -> herr_t {
    if (info->type == H5O_TYPE_DATASET) static_cast<std::vector<std::string>*>(op)->push_back(name);
    return 0;
  };
  if (!exists(under)) throw h5_error(where(under) + ": no such object");
  // Before H5Ovisit sees the tree: every link in it hard or allowed. Whether each dataset is
  // stored here is open_dataset's check, in info() below: each dataset is opened once.
  const std::vector<std::string> external = check_stored_here(under, false);
  Handle root = open_here(under);
  if (H5Ovisit2(root.get(), H5_INDEX_NAME, H5_ITER_INC, cb, &names, H5O_INFO_BASIC) < 0)
    throw h5_error(where(under) + ": cannot list datasets");
  std::vector<DatasetInfo> out;
  std::string prefix = under == "/" ? "/" : under + "/";
  for (auto& n : names) out.push_back(info(prefix + n));
  // H5Ovisit follows hard links only: what allowed external links lead to is listed by path.
  for (const std::string& link : external) {
    H5O_info_t oi;
    if (H5Oget_info_by_name(file_.get(), link.c_str(), &oi, H5P_DEFAULT) < 0) throw h5_error(where(link) + ": no such object");
    if (oi.type == H5O_TYPE_DATASET) out.push_back(info(link));
    else if (oi.type == H5O_TYPE_GROUP)
      for (DatasetInfo& d : list_datasets(link)) out.push_back(std::move(d));
  }
  return out;
}

template <class T>
std::vector<T> File::read_as(const std::string& dataset, hid_t mem_type, Shape& shape,
                             ElemKind want) const {
  DatasetInfo di = info(dataset);
  if (di.kind != want)
    throw h5_error(where(dataset) + ": expected " + std::string(kind_name(want)) + ", found " +
                   std::string(kind_name(di.kind)) +
                   (di.kind == ElemKind::u16 ? " (uint16 without dtype='bfloat16')" : ""));
  shape = di.shape;
  const std::uint64_t n = std::uint64_t(psi::numel(shape));
  if (n == 0) return {};
  Handle d = open_dataset(dataset);
  // Contiguous and compact data lie in the file uncompressed: a dataset that claims more bytes
  // than both its storage and the whole file is corrupt; refuse it before allocating.
  Handle dcpl(H5Dget_create_plist(d.get()), H5Pclose);
  const H5D_layout_t layout = H5Pget_layout(dcpl.get());
  hsize_t file_bytes = 0;
  H5Fget_filesize(file_.get(), &file_bytes);
  const std::uint64_t room = std::max<std::uint64_t>(H5Dget_storage_size(d.get()), file_bytes);
  if ((layout == H5D_CONTIGUOUS || layout == H5D_COMPACT) && n > room / sizeof(T))
    throw h5_error(where(dataset) + ": claims " + std::to_string(n) + " elements of " + std::to_string(sizeof(T)) +
                   " bytes in a " + std::to_string(file_bytes) + "-byte file (truncated or corrupt file?)");
  // Chunked data may be compressed, but deflate expands at most 1,032-fold: a chunked dataset
  // that claims more than that of its storage is a compression bomb or corrupt.
  const std::uint64_t stored = H5Dget_storage_size(d.get());
  if (layout == H5D_CHUNKED && n / 1100 > (stored + (1u << 20)) / sizeof(T))
    throw h5_error(where(dataset) + ": claims " + std::to_string(n) + " elements of " + std::to_string(sizeof(T)) +
                   " bytes from " + std::to_string(stored) + " stored bytes: more than 1,100-fold (deflate expands "
                   "at most 1,032-fold; psi refuses more: a compression bomb or a corrupt file)");
  // Bound every dataset by the machine's memory too, and turn a failed allocation into the same
  // one-line refusal.
  const std::uint64_t memory = physical_memory_bytes();
  const auto too_large = [&] {
    return h5_error(where(dataset) + ": claims " + std::to_string(n) + " elements of " + std::to_string(sizeof(T)) +
                    " bytes, more than this machine's memory (" + std::to_string(memory) + " bytes) can hold");
  };
  if (n > memory / sizeof(T)) throw too_large();
  std::vector<T> out;
  try {
    out.resize(n);
  } catch (const std::bad_alloc&) {
    throw too_large();
  }
  if (H5Dread(d.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) < 0)
    throw h5_error(where(dataset) + ": read failed (truncated or corrupt file?)");
  return out;
}

// Read straight into the tensor's storage (a Bf16 is its 16 bits): one buffer, not a second copy
// beside the first, so read_as's memory bound holds for the whole read.
static_assert(sizeof(Bf16) == sizeof(std::uint16_t) && std::is_standard_layout_v<Bf16>);
Bf16Tensor File::read_bf16(const std::string& dataset) const {
  Shape shape;
  auto v = read_as<Bf16>(dataset, H5T_NATIVE_UINT16, shape, ElemKind::bf16);
  return Bf16Tensor(shape, std::move(v));
}

F32Tensor File::read_f32(const std::string& dataset) const {
  Shape shape;
  auto v = read_as<float>(dataset, H5T_NATIVE_FLOAT, shape, ElemKind::f32);
  return F32Tensor(shape, std::move(v));
}

F64Tensor File::read_f64(const std::string& dataset) const {
  Shape shape;
  auto v = read_as<double>(dataset, H5T_NATIVE_DOUBLE, shape, ElemKind::f64);
  return F64Tensor(shape, std::move(v));
}

std::vector<std::uint8_t> File::read_u8(const std::string& dataset) const {
  Shape shape;
  return read_as<std::uint8_t>(dataset, H5T_NATIVE_UINT8, shape, ElemKind::u8);
}

std::string File::read_text(const std::string& dataset) const {
  auto b = read_u8(dataset);
  return std::string(b.begin(), b.end());
}

std::optional<AttrValue> File::attr(const std::string& object, const std::string& name) const {
  if (!exists(object)) return std::nullopt;  // refuses a path through anything but hard links
  Handle o = open_here(object);
  if (H5Aexists(o.get(), name.c_str()) <= 0) return std::nullopt;
  if (auto s = read_string_attr(o.get(), name.c_str())) return AttrValue(*s);
  Handle a(H5Aopen(o.get(), name.c_str(), H5P_DEFAULT), H5Aclose);
  Handle t(H5Aget_type(a.get()), H5Tclose);
  Handle space(H5Aget_space(a.get()), H5Sclose);
  if (H5Sget_simple_extent_npoints(space.get()) != 1) return std::nullopt;
  if (H5Tget_class(t.get()) == H5T_INTEGER) {
    std::int64_t v = 0;
    if (H5Aread(a.get(), H5T_NATIVE_INT64, &v) < 0) return std::nullopt;
    return AttrValue(v);
  }
  if (H5Tget_class(t.get()) == H5T_FLOAT) {
    double v = 0;
    if (H5Aread(a.get(), H5T_NATIVE_DOUBLE, &v) < 0) return std::nullopt;
    return AttrValue(v);
  }
  return std::nullopt;
}

bool File::has_attr(const std::string& object, const std::string& name) const {
  if (!exists(object)) return false;
  Handle o = open_here(object);
  return H5Aexists(o.get(), name.c_str()) > 0;
}

std::string File::attr_string(const std::string& object, const std::string& name) const {
  auto v = attr(object, name);
  if (!v || !std::holds_alternative<std::string>(*v))
    throw h5_error(where(object) + ": missing string attribute '" + name + "'");
  return std::get<std::string>(*v);
}

Attrs File::attrs(const std::string& object) const {
  Attrs out;
  if (!exists(object)) throw h5_error(where(object) + ": no such object");
  Handle o = open_here(object);
  std::vector<std::string> names;
  auto cb = [](hid_t, const char* name, const H5A_info_t*, void* op) -> herr_t {
    static_cast<std::vector<std::string>*>(op)->push_back(name);
    return 0;
  };
  hsize_t idx = 0;
  H5Aiterate2(o.get(), H5_INDEX_NAME, H5_ITER_INC, &idx, cb, &names);
  for (auto& n : names)
    if (auto v = attr(object, n)) out[n] = *v;
  return out;
}

void File::ensure_group(const std::string& group) {
  if (group.empty() || group == "/") return;
  std::size_t pos = 0;
  while (true) {
    pos = group.find('/', pos + 1);
    std::string prefix = group.substr(0, pos);
    if (!prefix.empty() && prefix != "/" && H5Lexists(file_.get(), prefix.c_str(), H5P_DEFAULT) <= 0) {
      Handle g(H5Gcreate2(file_.get(), prefix.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
      if (!g) throw Error(where(prefix) + ": cannot create group", Exit::run_failed);
    }
    if (pos == std::string::npos) break;
  }
}

void File::write_raw(const std::string& dataset, hid_t mem_type, hid_t file_type, const Shape& shape,
                     const void* data, const Attrs& a) {
  if (!writable_) throw Error(where(dataset) + ": file is read-only", Exit::run_failed);
  auto slash = dataset.rfind('/');
  if (slash != std::string::npos && slash > 0) ensure_group(dataset.substr(0, slash));
  if (shape.size() > std::size_t(kMaxRank))
    throw Error(where(dataset) + ": rank " + std::to_string(shape.size()) + " is more than HDF5's " +
                std::to_string(kMaxRank) + " dimensions");
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  Handle space(H5Screate_simple(int(dims.size()), dims.data(), nullptr), H5Sclose);
  Handle d(H5Dcreate2(file_.get(), dataset.c_str(), file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT,
                      H5P_DEFAULT),
           H5Dclose);
  if (!d) throw Error(where(dataset) + ": cannot create dataset (exists already?)", Exit::run_failed);
  if (psi::numel(shape) > 0 && H5Dwrite(d.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
    throw Error(where(dataset) + ": write failed", Exit::run_failed);
  for (auto& [k, v] : a) write_attr(d.get(), k, v);
}

void File::write_bf16(const std::string& dataset, const Bf16Tensor& t, const Attrs& a) {
  Attrs all = a;
  all["dtype"] = std::string("bfloat16");
  write_raw(dataset, H5T_NATIVE_UINT16, H5T_STD_U16LE, t.shape, t.ptr(), all);
}

void File::write_f32(const std::string& dataset, const F32Tensor& t, const Attrs& a) {
  Attrs all = a;
  all["dtype"] = std::string("float32");
  write_raw(dataset, H5T_NATIVE_FLOAT, H5T_IEEE_F32LE, t.shape, t.ptr(), all);
}

void File::write_f64(const std::string& dataset, const F64Tensor& t, const Attrs& a) {
  Attrs all = a;
  all["dtype"] = std::string("float64");
  write_raw(dataset, H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, t.shape, t.ptr(), all);
}

void File::write_text(const std::string& dataset, const std::string& text, const Attrs& a) {
  Attrs all = a;
  all["dtype"] = std::string("utf8");
  write_raw(dataset, H5T_NATIVE_UINT8, H5T_STD_U8LE, Shape{std::int64_t(text.size())}, text.data(), all);
}

void File::set_attr(const std::string& object, const std::string& name, const AttrValue& v) {
  if (!writable_) throw Error(where(object) + ": file is read-only", Exit::run_failed);
  ensure_group(object);
  Handle o = open_object(file_.get(), object, where(object));
  write_attr(o.get(), name, v);
}

void File::set_attrs(const std::string& object, const Attrs& a) {
  for (auto& [k, v] : a) set_attr(object, k, v);
}

void File::copy_from(const File& src, const std::string& path) {
  if (!writable_) throw Error(where(path) + ": file is read-only", Exit::run_failed);
  if (!src.exists(path)) throw Error(src.where(path) + ": no such object");
  H5O_info_t info;
  if (H5Oget_info_by_name(src.id(), path.c_str(), &info, H5P_DEFAULT) < 0)
    throw Error(src.where(path) + ": no such object");
  if (!exists(path)) {
    // H5Ocopy would carry soft and external links, virtual datasets and external storage over
    // as they are: everything under `path` must be stored in `src` itself, or in a file an
    // allowed external link leads to, whose objects are copied in (the output stands alone).
    src.check_stored_here(path);
    auto slash = path.rfind('/');
    if (slash != std::string::npos && slash > 0) ensure_group(path.substr(0, slash));
    Handle copy(H5Pcreate(H5P_OBJECT_COPY), H5Pclose);
    if (!copy || H5Pset_copy_object(copy.get(), H5O_COPY_EXPAND_EXT_LINK_FLAG) < 0)
      throw Error(where(path) + ": cannot set up the copy", Exit::run_failed);
    if (H5Ocopy(src.id(), path.c_str(), file_.get(), path.c_str(), copy.get(), H5P_DEFAULT) < 0)
      throw Error(where(path) + ": cannot copy from " + src.path().string(), Exit::run_failed);
    return;
  }
  if (info.type != H5O_TYPE_GROUP)
    throw Error(where(path) + ": exists already (also in " + src.path().string() + ")");
  std::vector<std::string> children;
  auto cb = [](hid_t, const char* name, const H5L_info_t*, void* op) -> herr_t {
    static_cast<std::vector<std::string>*>(op)->push_back(name);
    return 0;
  };
  Handle g(H5Gopen2(src.id(), path.c_str(), H5P_DEFAULT), H5Gclose);
  H5Literate(g.get(), H5_INDEX_NAME, H5_ITER_INC, nullptr, cb, &children);
  const std::string prefix = path == "/" ? "/" : path + "/";
  for (const auto& c : children) copy_from(src, prefix + c);
}

std::vector<std::string> File::check_stored_here(const std::string& path, bool open_datasets) const {
  H5O_info_t info;
  if (!exists(path) || H5Oget_info_by_name(file_.get(), path.c_str(), &info, H5P_DEFAULT) < 0)
    throw h5_error(where(path) + ": no such object");
  const H5O_type_t type = info.type;
  if (type == H5O_TYPE_DATASET) {
    if (open_datasets) open_dataset(path);
    return {};
  }
  if (type != H5O_TYPE_GROUP) return {};
  // Every link under the group, depth first; a child that is not a hard link (nor an external
  // link --allow-link-to allows), or a dataset stored elsewhere, throws out of the walk (kept and
  // rethrown below: HDF5 is C). H5Lvisit does not enter external links: they are walked after.
  struct Walk {
    const File* file;
    std::string prefix;
    bool open_datasets;
    std::vector<std::string> external;
    std::exception_ptr error;
  } walk{this, path == "/" ? "/" : path + "/", open_datasets, {}, nullptr};
  auto cb = [](hid_t, const char* name, const H5L_info_t* li, void* op) -> herr_t {
    auto* w = static_cast<Walk*>(op);
    try {
      const std::string child = w->prefix + name;
      if (li->type == H5L_TYPE_EXTERNAL) {
        w->file->exists(child);  // throws unless allowed
        w->external.push_back(child);
        return 0;
      }
      if (li->type != H5L_TYPE_HARD)
        throw h5_error(w->file->where(child) + " is " + link_description(w->file->id(), child, *li) + kOnlyHere);
      H5O_info_t oi;
      if (w->open_datasets && H5Oget_info_by_name(w->file->id(), child.c_str(), &oi, H5P_DEFAULT) >= 0 &&
          oi.type == H5O_TYPE_DATASET)
        w->file->open_dataset(child);
    } catch (...) {
      w->error = std::current_exception();
      return -1;
    }
    return 0;
  };
  Handle g(H5Gopen2(file_.get(), path.c_str(), H5P_DEFAULT), H5Gclose);
  if (!g) throw h5_error(where(path) + ": cannot open group");
  const herr_t rc = H5Lvisit(g.get(), H5_INDEX_NAME, H5_ITER_INC, cb, &walk);
  if (walk.error) std::rethrow_exception(walk.error);
  if (rc < 0) throw h5_error(where(path) + ": cannot list its links");
  for (const std::string& link : walk.external) check_stored_here(link, open_datasets);
  return walk.external;
}

}  // namespace psi::h5
