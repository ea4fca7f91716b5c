// libFuzzer target: the bytes are a safetensors file, read as a checkpoint (BF16, F16, F32) and
// as psi compare reads a user's file (any numeric dtype). psi must either refuse it with a
// one-line psi::Error or serve it, and whatever it serves must keep the reader's promises (every
// tensor inside the data section, byte count = elements x dtype size, no overlaps, non-negative
// dimensions); reading the first and last row of every tensor, and every tensor's bytes, must
// stay inside what was read (AddressSanitizer checks that). Any other exception escapes and
// counts as a crash.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "engine/checkpoint/safetensors.h"
#include "engine/error.h"

namespace {

// A file per process, in memory where /dev/shm exists (the file system is the slow part).
const std::string& temp_path() {
  static const std::string p = std::string(::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp") + "/psi_fuzz_safetensors_" +
                               std::to_string(::getpid()) + ".safetensors";
  return p;
}

void write_file(const std::string& p, const std::uint8_t* data, std::size_t size) {
  FILE* f = std::fopen(p.c_str(), "wb");
  if (!f) __builtin_trap();
  if (size && std::fwrite(data, 1, size, f) != size) __builtin_trap();
  std::fclose(f);
}

// The size of a dtype the reader may accept; 0 (a broken promise) for any other.
std::uint64_t dtype_bytes(const std::string& d, psi::ckpt::SafetensorsDtypes dtypes) {
  if (d == "BF16" || d == "F16") return 2;
  if (d == "F32") return 4;
  if (dtypes == psi::ckpt::SafetensorsDtypes::weights) return 0;
  if (d == "F64" || d == "I64" || d == "U64") return 8;
  if (d == "I32" || d == "U32") return 4;
  if (d == "I16" || d == "U16") return 2;
  return d == "I8" || d == "U8" || d == "BOOL" ? 1 : 0;
}

// The reader's promises about what it accepted.
void check_entries(const psi::ckpt::SafetensorsFile& f, std::uint64_t file_size, psi::ckpt::SafetensorsDtypes dtypes) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;
  for (const auto& [name, e] : f.entries()) {
    if (dtype_bytes(e.dtype, dtypes) == 0) __builtin_trap();
    std::uint64_t n = 1;
    for (std::int64_t d : e.shape) {
      if (d < 0) __builtin_trap();
      n *= std::uint64_t(d);
    }
    if (e.begin > e.end || e.end > file_size || e.end - e.begin != n * dtype_bytes(e.dtype, dtypes)) __builtin_trap();
    if (e.end > e.begin) spans.emplace_back(e.begin, e.end);
  }
  std::sort(spans.begin(), spans.end());
  for (std::size_t i = 1; i < spans.size(); ++i)
    if (spans[i].first < spans[i - 1].second) __builtin_trap();
}

void read_rows(const psi::ckpt::SafetensorsFile& f) {
  for (const auto& [name, e] : f.entries()) {
    const psi::ckpt::Matrix2d m = psi::ckpt::matrix_view(e.shape);
    if (m.rows <= 0 || m.cols <= 0) continue;
    const std::int64_t cols = std::min<std::int64_t>(m.cols, 1 << 16);
    std::vector<psi::Bf16> out(static_cast<std::size_t>(cols));
    for (std::int64_t r : {std::int64_t(0), m.rows - 1}) {
      try {
        f.read(name, {r, r + 1, m.cols - cols, m.cols}, out);
      } catch (const psi::Error& err) {
        if (std::strchr(err.what(), '\n')) __builtin_trap();  // messages are one line
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string& p = temp_path();
  write_file(p, data, size);
  try {
    psi::ckpt::SafetensorsFile f(p, "model.diffusion_model.");
    check_entries(f, size, psi::ckpt::SafetensorsDtypes::weights);
    read_rows(f);
  } catch (const psi::Error& err) {
    if (std::strchr(err.what(), '\n')) __builtin_trap();
  }
  try {
    psi::ckpt::SafetensorsFile f(p, {}, psi::ckpt::SafetensorsDtypes::any);
    check_entries(f, size, psi::ckpt::SafetensorsDtypes::any);
    for (const auto& [name, e] : f.entries())
      if (f.bytes(name).size() != e.end - e.begin) __builtin_trap();
  } catch (const psi::Error& err) {
    if (std::strchr(err.what(), '\n')) __builtin_trap();
  }
  return 0;
}
