#include "hdf5/h5.h"

#include "engine/error.h"
#include "hdf5/h5_detail.h"

namespace fs = std::filesystem;

namespace psi::hdf5 {

using detail::h5_error;

namespace {

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

using detail::open_object;

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
    throw Error(where(dataset) + ": write failed" + (pending_ ? pending_->failure_cause(errno) : ""), Exit::run_failed);
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

void File::write_elements(const std::string& dataset, ElemKind kind, const Shape& shape, const void* data,
                          const Attrs& a) {
  Attrs all = a;
  switch (kind) {
    case ElemKind::bf16:
      all["dtype"] = std::string("bfloat16");
      return write_raw(dataset, H5T_NATIVE_UINT16, H5T_STD_U16LE, shape, data, all);
    case ElemKind::f32: return write_raw(dataset, H5T_NATIVE_FLOAT, H5T_IEEE_F32LE, shape, data, all);
    case ElemKind::f64: return write_raw(dataset, H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, shape, data, all);
    case ElemKind::u8: return write_raw(dataset, H5T_NATIVE_UINT8, H5T_STD_U8LE, shape, data, all);
    case ElemKind::u16: return write_raw(dataset, H5T_NATIVE_UINT16, H5T_STD_U16LE, shape, data, all);
    case ElemKind::i64: return write_raw(dataset, H5T_NATIVE_INT64, H5T_STD_I64LE, shape, data, all);
    case ElemKind::other: break;
  }
  throw Error(where(dataset) + ": no element type to write", Exit::run_failed);
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

}  // namespace psi::hdf5
