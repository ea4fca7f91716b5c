// libFuzzer target: the bytes are a NumPy .npy file (engine/npy.h). psi must either refuse it
// with a one-line psi::Error or read it, and what it read must keep the reader's promises: the
// data holds exactly the shape's elements of the dtype's size, and no dimension is negative.
// Any other exception escapes and counts as a crash.
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "engine/error.h"
#include "engine/npy.h"

namespace {

std::uint64_t item_bytes(psi::NpyType t) {
  switch (t) {
    case psi::NpyType::u8: return 1;
    case psi::NpyType::u16: return 2;
    case psi::NpyType::f32: return 4;
    case psi::NpyType::f64:
    case psi::NpyType::i64: return 8;
  }
  __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const psi::NpyArray a = psi::parse_npy(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.npy");
    std::uint64_t n = 1;
    for (std::int64_t d : a.shape) {
      if (d < 0) __builtin_trap();
      n *= std::uint64_t(d);
    }
    if (a.data.size() != n * item_bytes(a.type) || a.data.size() > size) __builtin_trap();
  } catch (const psi::Error& err) {
    if (std::strchr(err.what(), '\n')) __builtin_trap();  // messages are one line
  }
  return 0;
}
