#include "hdf5/tensor_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>
#include <variant>

#include "engine/error.h"
#include "engine/npy.h"

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

}  // namespace

File open_tensor_file(const std::filesystem::path& p) {
  // The system's reason first (permission denied is not "not an HDF5 file"); then the format.
  std::error_code ec;
  const auto st = std::filesystem::status(p, ec);
  if (std::filesystem::exists(st) && std::filesystem::is_regular_file(st)) {
    const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) throw Error(p.string() + ": cannot open: " + std::strerror(errno));
    char head[4] = {};
    const bool zip = ::pread(fd, head, sizeof head, 0) == ssize_t(sizeof head) && std::string_view(head, 4) == "PK\x03\x04";
    ::close(fd);
    if (zip && H5Fis_hdf5(p.c_str()) <= 0)
      throw Error(p.string() + ": a zip archive (NumPy's .npz, or PyTorch's torch.save file, which holds a pickle psi "
                  "never runs), not a file psi reads tensors from; save each tensor with numpy.save(\"t.npy\", "
                  "t.float().numpy()), or to HDF5 with h5py");
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

}  // namespace psi::hdf5
