#pragma once
// Safetensors checkpoints: an 8-byte little-endian header length, a JSON header
// {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then the
// tensors' bytes. The reader memory-maps the file, checks the whole header against the file
// before serving anything, and reads only the requested rows/columns of a slice.
//
// dtypes: BF16 is what psi runs. F16 and F32 tensors are accepted and converted to BF16 only
// when every value read is exactly representable in BF16; an inexact value is an error, never a
// rounding.
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/checkpoint/weight_source.h"

namespace psi::ckpt {

struct SafetensorsEntry {
  std::string dtype;           // "BF16", "F16" or "F32" (any numeric dtype with SafetensorsDtypes::any)
  Shape shape;
  std::uint64_t begin = 0;     // byte offsets inside the data section
  std::uint64_t end = 0;
};

// The dtypes a file may hold: a checkpoint's (BF16, and F16/F32 that read() converts), or any
// numeric dtype of the format (F64, F32, F16, BF16, I64 ... I8, U64 ... U8, BOOL), whose bytes
// bytes() serves as stored (psi compare).
enum class SafetensorsDtypes { weights, any };

class SafetensorsFile final : public WeightSource {
 public:
  // strip_prefix: names starting with it are served without it (e.g. "model.diffusion_model.").
  explicit SafetensorsFile(const std::filesystem::path& path, std::string strip_prefix = {},
                           SafetensorsDtypes dtypes = SafetensorsDtypes::weights);
  ~SafetensorsFile() override;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::map<std::string, SafetensorsEntry, std::less<>>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  std::string describe() const override { return path_.string(); }
  bool contains(std::string_view name) const override;
  Shape shape(std::string_view name) const override;
  void read(std::string_view name, const Slice& s, std::span<Bf16> out) const override;
  // The tensor's bytes as the file stores them (little-endian), whatever its dtype.
  std::vector<std::byte> bytes(std::string_view name) const;

 private:
  const SafetensorsEntry& entry(std::string_view name) const;
  void parse_header(std::string_view text, const std::string& strip_prefix, SafetensorsDtypes dtypes);
  void read_exact(std::uint64_t offset, void* dst, std::uint64_t bytes) const;

  // The safetensors format's limit on the JSON header.
  static constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;

  std::filesystem::path path_;
  int fd_ = -1;
  std::uint64_t size_ = 0;         // when opened
  std::uint64_t data_offset_ = 0;  // start of the data section
  std::uint64_t data_size_ = 0;
  std::map<std::string, SafetensorsEntry, std::less<>> entries_;
  std::map<std::string, std::string> metadata_;
};

// An IEEE half as float32, exactly (every half is one); a NaN keeps its sign and payload.
float half_to_float(std::uint16_t h);

// One tensor to write: raw little-endian bytes of the named dtype ("BF16", "F16", "F32").
struct SafetensorsTensor {
  std::string name;
  std::string dtype;
  Shape shape;
  std::vector<std::byte> bytes;
};

SafetensorsTensor bf16_tensor(std::string name, Shape shape, std::span<const Bf16> values);

// Writes atomically: to a temporary name beside `path`, renamed over it once complete.
void write_safetensors(const std::filesystem::path& path, const std::vector<SafetensorsTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// The one way in to an official checkpoint file: its tensors served by the names psi uses, the
// official key prefix "model.diffusion_model." stripped.
std::shared_ptr<const SafetensorsFile> open_official_checkpoint(const std::filesystem::path& path);

}  // namespace psi::ckpt
