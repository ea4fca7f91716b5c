// libFuzzer target: the bytes are an HDF5 file, read by everything psi reads HDF5 with
// (fuzz/h5_readers.h). libhdf5 itself parses the file format here, and it is not built with
// the fuzzer's instrumentation: a crash inside it is libhdf5's (scripts/fuzz.sh tells the two
// apart by the first stack frame; docs/reliability/fuzzing-and-sanitizers.md lists what was found). fuzz_h5_attrs
// covers psi's own parsing on files libhdf5 wrote itself.
#include <cstdint>
#include <cstdio>

#include "fuzz/h5_readers.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string p = psi::fuzz::temp_path("h5_report");
  FILE* f = std::fopen(p.c_str(), "wb");
  if (!f) __builtin_trap();
  if (size && std::fwrite(data, 1, size, f) != size) __builtin_trap();
  std::fclose(f);
  psi::fuzz::read_everything(p);
  return 0;
}
