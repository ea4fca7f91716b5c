// libFuzzer target: the bytes are a zip archive (engine/zip.h), as an .npz is. psi must either
// refuse it with a one-line psi::Error or list its members and extract each, and what it read
// must keep the reader's promises: every member's data lies within the archive, and what it
// extracts is exactly the declared uncompressed size. Any other exception escapes and counts as
// a crash.
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "engine/error.h"
#include "engine/zip.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    for (const psi::ZipMember& m : psi::zip_members(bytes, "fuzz.npz")) {
      if (m.data_offset > size || m.compressed > size - m.data_offset) __builtin_trap();
      try {
        if (psi::zip_extract(bytes, m, "fuzz.npz").size() != m.uncompressed) __builtin_trap();
      } catch (const psi::Error& err) {
        if (std::strchr(err.what(), '\n')) __builtin_trap();  // messages are one line
      }
    }
  } catch (const psi::Error& err) {
    if (std::strchr(err.what(), '\n')) __builtin_trap();
  }
  return 0;
}
