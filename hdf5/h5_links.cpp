#include "hdf5/h5.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <limits>

#include "engine/error.h"
#include "hdf5/h5_detail.h"
#include "outputs/link_allowance.h"

namespace fs = std::filesystem;

namespace psi::hdf5 {

using detail::h5_error;

namespace {

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

}  // namespace

namespace detail {

Handle open_object(hid_t file, const std::string& path, const std::string& where) {
  hid_t id = H5Oopen(file, path.c_str(), H5P_DEFAULT);
  if (id < 0) throw h5_error(where + ": no such object");
  return Handle(id, H5Oclose);
}

}  // namespace detail

using detail::open_object;

void allow_links_to(const fs::path& file) {
  File::open_read(file);
  outputs::allow_link_target(file);
}

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
  if (in_memory_) return;  // nothing in it links elsewhere: psi wrote all of it
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

}  // namespace psi::hdf5
