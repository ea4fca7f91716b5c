#pragma once
// psi seal: a user's tensors, from any file psi reads (hdf5/tensor_file.h), copied into a psi
// file where each carries its sha256_full, so that from then on every reader checks them
// (psi verify, compare, the oracle) instead of taking them as they are.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace psi::hdf5 {

// The root attribute `schema` of a sealed file: psi's, so a later seal may replace it and every
// reader holds its tensors to their hashes (hashes_every_tensor).
inline constexpr const char* kSealSchema = "psi-seal/1";

struct SealedTensor {
  std::string path;    // the dataset, in the input and the output alike
  std::string dtype;   // as written: bfloat16, float32, float64, uint8, uint16, int64, or utf8 for a text
  std::string sha256;  // its sha256_full (empty for a text)
};

// Reads every dataset of `in` (a tensor recorded with a sha256_full must match it, and in a file
// that hashes every tensor one without is unverifiable, as for every reader) and writes them to
// `out` (already checked against the output rule) with sha256_full, dtype and where each came
// from (`sealed_from`). `as_bf16`: uint16 datasets without a dtype label are BF16 bits.
std::vector<SealedTensor> seal(const std::filesystem::path& in, const std::filesystem::path& out, bool as_bf16);

}  // namespace psi::hdf5
