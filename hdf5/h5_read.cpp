#include "hdf5/h5.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <new>

#include "engine/error.h"
#include "engine/memory.h"
#include "hdf5/h5_detail.h"

namespace fs = std::filesystem;

namespace psi::hdf5 {

using detail::h5_error;

namespace {

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

// The first filter of a dataset's pipeline that this libhdf5 lacks, named as the file names it
// (h5py writes "lzf") and by its registered id, or "" when every one is there. psi loads no
// filter plugins (quiet_errors): such data cannot be read, and is not corrupt.
std::string missing_filter(hid_t dcpl) {
  const int n = H5Pget_nfilters(dcpl);
  for (int i = 0; i < n; ++i) {
    unsigned flags = 0, config = 0;
    std::size_t values = 0;
    char name[256] = {};
    const H5Z_filter_t id = H5Pget_filter2(dcpl, unsigned(i), &flags, &values, nullptr, sizeof name, name, &config);
    if (id < 0 || H5Zfilter_avail(id) > 0) continue;
    std::string label = std::string(name).substr(0, 80);
    if (label.empty()) {
      // The filters h5py and hdf5plugin register most often, for a file that names none.
      static const std::pair<H5Z_filter_t, const char*> kKnown[] = {
          {307, "bzip2"}, {32000, "lzf"}, {32001, "blosc"}, {32004, "lz4"}, {32008, "bitshuffle"}, {32015, "zstd"}};
      label = "unnamed";
      for (const auto& [known, known_name] : kKnown)
        if (known == id) label = known_name;
    }
    return label + " (id " + std::to_string(id) + ")";
  }
  return "";
}

}  // namespace

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
  if (const std::string filter = missing_filter(dcpl.get()); !filter.empty())
    throw h5_error(where(dataset) + ": HDF5 filter " + filter + " not available: this psi's libhdf5 lacks it and psi "
                   "loads no filter plugins; not read (rewrite the dataset with gzip or no compression)");
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

Bf16Tensor File::read_bf16_bits(const std::string& dataset) const {
  const ElemKind kind = info(dataset).kind == ElemKind::u16 ? ElemKind::u16 : ElemKind::bf16;
  Shape shape;
  auto v = read_as<Bf16>(dataset, H5T_NATIVE_UINT16, shape, kind);
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

std::vector<std::uint16_t> File::read_u16(const std::string& dataset) const {
  Shape shape;
  return read_as<std::uint16_t>(dataset, H5T_NATIVE_UINT16, shape, ElemKind::u16);
}

std::vector<std::int64_t> File::read_i64(const std::string& dataset) const {
  Shape shape;
  return read_as<std::int64_t>(dataset, H5T_NATIVE_INT64, shape, ElemKind::i64);
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
  // A list cut short would be taken for the whole one.
  if (H5Aiterate2(o.get(), H5_INDEX_NAME, H5_ITER_INC, &idx, cb, &names) < 0)
    throw h5_error(where(object) + ": cannot list its attributes (corrupt file?)");
  for (auto& n : names)
    if (auto v = attr(object, n)) out[n] = *v;
  return out;
}

}  // namespace psi::hdf5
