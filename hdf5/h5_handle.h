#pragma once
// An owned HDF5 identifier (hid_t), apart from the file layer (hdf5/h5.h) so that the wrapper's
// internals (hdf5/h5_detail.h) use it without including the layer they serve.
#include <hdf5.h>

namespace psi::hdf5 {

// An owned hid_t, closed with the right H5*close function.
class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle() = default;
  Handle(hid_t id, Closer c) : id_(id), close_(c) {}
  Handle(Handle&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = H5I_INVALID_HID; }
  Handle& operator=(Handle&& o) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle();
  hid_t get() const { return id_; }
  explicit operator bool() const { return id_ >= 0; }

 private:
  hid_t id_ = H5I_INVALID_HID;
  Closer close_ = nullptr;
};

}  // namespace psi::hdf5
