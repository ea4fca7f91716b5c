#include "hdf5/tensor_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "engine/checkpoint/safetensors.h"
#include "engine/error.h"
#include "engine/file_bytes.h"
#include "engine/input_file.h"
#include "engine/npy.h"
#include "engine/zip.h"

namespace psi::hdf5 {

namespace {

ElemKind kind_of(NpyType t) {
  switch (t) {
    case NpyType::f32: return ElemKind::f32;
    case NpyType::f64: return ElemKind::f64;
    case NpyType::u8: return ElemKind::u8;
    case NpyType::u16: return ElemKind::u16;
    case NpyType::i64: return ElemKind::i64;
  }
  return ElemKind::other;
}

// The first bytes of a safetensors file: an 8-byte little-endian header length that fits the
// file, then the header's opening brace.
bool is_safetensors_file(int fd, std::uint64_t size) {
  unsigned char head[9];
  if (size < 10 || ::pread(fd, head, sizeof head, 0) != ssize_t(sizeof head) || head[8] != '{') return false;
  std::uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = length << 8 | head[i];
  return length >= 2 && length <= size - 8;
}

// n elements of a narrower type widened to int64 (exact).
template <class T>
std::vector<std::int64_t> widened(const std::vector<std::byte>& b) {
  std::vector<std::int64_t> out(b.size() / sizeof(T));
  for (std::size_t i = 0; i < out.size(); ++i) {
    T v;
    std::memcpy(&v, b.data() + i * sizeof(T), sizeof(T));
    out[i] = std::int64_t(v);
  }
  return out;
}

// A tensor name as a dataset path: '/' separates groups, so no empty, '.' or '..' part.
void check_name(const std::filesystem::path& p, const std::string& name) {
  std::size_t start = 0;
  while (true) {
    const std::size_t end = name.find('/', start);
    const std::string part = name.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (part.empty() || part == "." || part == "..")
      throw Error(p.string() + ": tensor name \"" + name + "\" has an empty, '.' or '..' part between its '/'s, "
                  "which psi reads as groups of a path");
    if (end == std::string::npos) return;
    start = end + 1;
  }
}

// Every name checked, and none both a tensor and a group of another's path (`a` and `a/b`).
void check_names(const std::filesystem::path& p, const std::set<std::string>& names) {
  for (const std::string& name : names) {
    check_name(p, name);
    for (std::size_t slash = name.find('/'); slash != std::string::npos; slash = name.find('/', slash + 1))
      if (names.count(name.substr(0, slash)))
        throw Error(p.string() + ": tensors \"" + name.substr(0, slash) + "\" and \"" + name + "\": psi reads '/' in a "
                    "name as a group, and \"" + name.substr(0, slash) + "\" cannot be both a tensor and a group");
  }
}

// Every tensor of a safetensors file as a dataset of its name, the dtype as the root's format
// and each dataset's safetensors_dtype: BF16, F32, F64, U8, U16 and I64 as stored; F16 as the
// float32 of the same values; BOOL as U8; I8, I16, I32 and U32 widened to int64 (all exact).
File read_safetensors(const std::filesystem::path& p) {
  const ckpt::SafetensorsFile st(p, {}, ckpt::SafetensorsDtypes::any);
  File f = File::in_memory(p);
  const auto& entries = st.entries();
  std::set<std::string> names;
  for (const auto& entry : entries) names.insert(entry.first);
  check_names(p, names);
  for (const auto& [name, e] : entries) {
    const std::vector<std::byte> b = st.bytes(name);
    const Attrs attrs{{"safetensors_dtype", e.dtype}};
    const std::string path = "/" + name;
    if (e.dtype == "BF16") f.write_elements(path, ElemKind::bf16, e.shape, b.data(), attrs);
    else if (e.dtype == "F32") f.write_elements(path, ElemKind::f32, e.shape, b.data(), attrs);
    else if (e.dtype == "F64") f.write_elements(path, ElemKind::f64, e.shape, b.data(), attrs);
    else if (e.dtype == "U8" || e.dtype == "BOOL") f.write_elements(path, ElemKind::u8, e.shape, b.data(), attrs);
    else if (e.dtype == "U16") f.write_elements(path, ElemKind::u16, e.shape, b.data(), attrs);
    else if (e.dtype == "I64") f.write_elements(path, ElemKind::i64, e.shape, b.data(), attrs);
    else if (e.dtype == "F16") {
      std::vector<float> v(b.size() / 2);
      for (std::size_t i = 0; i < v.size(); ++i) {
        std::uint16_t h;
        std::memcpy(&h, b.data() + 2 * i, 2);
        v[i] = ckpt::half_to_float(h);
      }
      f.write_elements(path, ElemKind::f32, e.shape, v.data(), attrs);
    } else {
      std::vector<std::int64_t> v;
      if (e.dtype == "I8") v = widened<std::int8_t>(b);
      else if (e.dtype == "I16") v = widened<std::int16_t>(b);
      else if (e.dtype == "I32") v = widened<std::int32_t>(b);
      else if (e.dtype == "U32") v = widened<std::uint32_t>(b);
      else
        throw Error(p.string() + ": tensor " + name + " is " + e.dtype +
                    ", which psi does not compare (integers up to I64 and U32)");
      f.write_elements(path, ElemKind::i64, e.shape, v.data(), attrs);
    }
  }
  f.set_attr("/", "format", std::string(kSafetensorsFormat));
  return f;
}

// A NumPy .npz archive: each member NAME.npy the dataset /NAME, read by the .npy parser. A
// torch.save file is a zip too, holding a pickle (data.pkl) and no .npy member: refused with the
// conversion to use.
File read_npz(const std::filesystem::path& p) {
  const std::string bytes = read_file_bytes(p);
  const std::vector<ZipMember> members = zip_members(bytes, p.string());
  const auto npy = [](const ZipMember& m) { return m.name.ends_with(".npy"); };
  const auto pickle = [](const ZipMember& m) { return m.name == "data.pkl" || m.name.ends_with("/data.pkl"); };
  if (std::none_of(members.begin(), members.end(), npy) && std::any_of(members.begin(), members.end(), pickle))
    throw Error(p.string() + ": a PyTorch torch.save file (a zip holding a pickle, which psi never runs), not a file psi "
                "reads tensors from; save a dict of tensors with safetensors.torch.save_file(d, \"t.safetensors\")");
  std::set<std::string> names;
  for (const ZipMember& m : members) {
    if (!npy(m))
      throw Error(p.string() + ": member \"" + m.name.substr(0, 200) + "\" is not an .npy array: an .npz archive "
                  "holds NAME.npy members only");
    names.insert(m.name.substr(0, m.name.size() - 4));
  }
  check_names(p, names);
  File f = File::in_memory(p);
  for (const ZipMember& m : members) {
    const NpyArray a = parse_npy(zip_extract(bytes, m, p.string()), p.string() + ": member \"" + m.name + "\"");
    const std::string tensor = m.name.substr(0, m.name.size() - 4);
    f.write_elements("/" + tensor, kind_of(a.type), a.shape, a.data.data(), {{"npy_descr", a.descr}});
  }
  f.set_attr("/", "format", std::string(kNpzFormat));
  return f;
}

}  // namespace

File open_tensor_file(const std::filesystem::path& p) {
  // The system's reason first (permission denied is not "not an HDF5 file"); then the format.
  {
    const int fd = open_input_file(p);
    char head[4] = {};
    // A local header first, or the end record alone (an archive with no members).
    const bool zip = ::pread(fd, head, sizeof head, 0) == ssize_t(sizeof head) &&
                     (std::string_view(head, 4) == "PK\x03\x04" || std::string_view(head, 4) == "PK\x05\x06");
    struct stat info {};
    const bool safetensors = ::fstat(fd, &info) == 0 && is_safetensors_file(fd, std::uint64_t(info.st_size));
    ::close(fd);
    const bool hdf5 = H5Fis_hdf5(p.c_str()) > 0;
    if (safetensors && !hdf5) return read_safetensors(p);
    if (zip && !hdf5) return read_npz(p);
    if (!hdf5 && !is_npy_file(p)) throw Error(p.string() + ": not an HDF5, NumPy .npy or safetensors file");
  }
  if (!is_npy_file(p)) return File::open_read(p);
  const NpyArray a = read_npy(p);
  File f = File::in_memory(p);
  std::string name = p.filename().string();
  if (name.ends_with(".npy") && name.size() > 4) name.resize(name.size() - 4);
  if (name == "." || name == "..") name = "array";  // names HDF5 reserves
  f.write_elements("/" + name, kind_of(a.type), a.shape, a.data.data(), {{"npy_descr", a.descr}});
  f.set_attr("/", "format", std::string(kNpyFormat));
  return f;
}

bool single_array_file(const File& f) {
  const auto format = f.attr("/", "format");
  const auto* s = format ? std::get_if<std::string>(&*format) : nullptr;
  return s && *s == kNpyFormat;
}

File arrays_file(const std::string& shown_as, const std::vector<ArrayView>& arrays) {
  std::set<std::string> names;
  for (const ArrayView& a : arrays)
    if (!names.insert(a.name).second) throw Error(shown_as + ": tensor name \"" + a.name + "\" given twice");
  check_names(shown_as, names);
  File f = File::in_memory(shown_as);
  for (const ArrayView& a : arrays) f.write_elements("/" + a.name, a.kind, a.shape, a.data);
  f.set_attr("/", "format", std::string(kArraysFormat));
  return f;
}

}  // namespace psi::hdf5
