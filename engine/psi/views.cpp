#include "engine/psi/views.h"

#include <cstring>
#include <type_traits>

#include "engine/error.h"

namespace psi::exec {

namespace {

void check_fits(const rt::DeviceRegion& r, std::uint64_t bytes, const std::string& what) {
  if (bytes > r.bytes)
    throw Error("PSI kernel: " + what + " needs " + std::to_string(bytes) + " bytes but " + r.name + " holds " +
                    std::to_string(r.bytes),
                Exit::run_failed);
}

}  // namespace

template <class T>
ops::Matrix<T> view(const rt::KernelContext& k, const rt::DeviceRegion& r, std::int64_t rows, std::int64_t cols,
                    std::int64_t ld) {
  using E = std::remove_const_t<T>;
  const std::uint64_t n = rows == 0 ? 0 : std::uint64_t((rows - 1) * ld + cols);
  check_fits(r, n * sizeof(E), "a " + std::to_string(rows) + "x" + std::to_string(cols) + " view");
  return ops::Matrix<T>{reinterpret_cast<T*>(k.arena_base + r.offset), rows, cols, ld};
}

template ops::Matrix<Bf16> view<Bf16>(const rt::KernelContext&, const rt::DeviceRegion&, std::int64_t, std::int64_t,
                                      std::int64_t);
template ops::Matrix<const Bf16> view<const Bf16>(const rt::KernelContext&, const rt::DeviceRegion&, std::int64_t,
                                                  std::int64_t, std::int64_t);
template ops::Matrix<float> view<float>(const rt::KernelContext&, const rt::DeviceRegion&, std::int64_t, std::int64_t,
                                        std::int64_t);

Bf16Tensor load(const rt::KernelContext& k, const rt::DeviceRegion& r, const Shape& shape) {
  Bf16Tensor t(shape);
  check_fits(r, t.bytes(), "a load of " + shape_str(shape));
  std::memcpy(t.ptr(), k.arena_base + r.offset, t.bytes());
  return t;
}

void store(const rt::KernelContext& k, const Bf16Tensor& t, const rt::DeviceRegion& r) {
  check_fits(r, t.bytes(), "a store of " + shape_str(t.shape));
  std::memcpy(k.arena_base + r.offset, t.ptr(), t.bytes());
}

}  // namespace psi::exec
