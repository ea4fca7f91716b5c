#pragma once
// What one `psi probe` run found: per variant and recorded tensor, the distance to the recording
// and where they differ, the attributions of --explain-differences, and psi's outputs. Filled by
// the case implementations (probes/case_context.h), read by the probe command, the experiments
// and the claim checks (probes/probe_cases.h).
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/diff_map.h"
#include "engine/distance.h"
#include "engine/tensor.h"
#include "probes/element_differences.h"

namespace psi::probes {

// Not a numerics variant: the dense block in float64 (engine/model/block_f64.h), block cases
// only. It is the reference its rows measure the recordings against (engine/distance.h's float64
// form: relative L2 to its unrounded values, the other counts against its BF16 rounding), as
// block-controls' float64 table does; its outputs stay float64.
inline constexpr std::string_view kFloat64Variant = "float64";

struct TensorResult {
  std::string variant;
  std::string tensor;   // the recording's dataset name
  std::string backend;  // "official" (single recording), "math" or "flash"
  Shape shape;          // the full tensor's (psi's and the recording's)
  std::string rows;     // what was compared: "all", "rows 0-255 of 4928", or "sha256 only"
  std::optional<Distance> distance;     // absent when nothing is stored
  std::optional<bool> full_sha_equal;   // our whole tensor against sha256_full, when recorded
  // Why the recorded tensor could not be checked (read under --allow-unverified); empty when it was.
  std::string unverified;
  // Where psi's tensor differs from the recording, on the rows compared (absent when it does not,
  // and for the float64 rows, which measure the recording).
  std::optional<DiffMap> diff;
  // The first ProbeOptions::differences elements where it differs, on the rows compared (none for
  // the float64 rows).
  std::vector<ElementDifference> first_differences;
};

// Where one block probe's differing elements come from (--explain-differences). The probe's
// module is recomputed by teacher forcing (model::block_forward with the recorded probes as
// every residual update): on the official inputs of the module, as far as the block's own
// probes can give them. Against the recording of the path the variant claims (FLASH for
// official-h200-flash), MATH for a variant that claims none.
struct ProbeAttribution {
  std::string variant;
  std::string tensor;
  std::string against = "math";   // the recording: the variant's claimed path ("flash" for FLASH), else MATH
  std::int64_t total = 0;
  std::int64_t differing = 0;     // psi's block against that recording
  std::int64_t own = 0;           // of those, differing also with the module on the recorded upstream probes
  std::int64_t module_alone = 0;  // the module on the recorded upstream probes differs (all elements)
  std::int64_t module_alone_rows = 0;  // the token rows those lie in
  // The rest of `differing`, inherited: per upstream probe, the elements for which it is the
  // first (spec order) that differs in the same token row (or anywhere, for the other stream's
  // probes and when none differs in that row).
  std::vector<std::pair<std::string, std::int64_t>> inherited;
};

struct ProbeReport {
  std::string case_name;
  std::filesystem::path file, flash_file;
  std::string group;
  std::string backend;  // where it ran: "host", or ProbeOptions::runtime's name
  std::uint64_t seed = 0;
  std::vector<std::string> notes;  // input checks: RoPE tables, weights, regenerated inputs
  // Every dataset the probe read that could not be checked ("<file>:<dataset>: why", under
  // --allow-unverified, hdf5/unverified.h): when any is, every result rests on unverified data.
  std::vector<std::string> unverified;
  std::vector<TensorResult> results;
  // Per variant, psi's output tensors in full (for --out).
  std::vector<std::pair<std::string, std::vector<std::pair<std::string, Bf16Tensor>>>> outputs;
  // The float64 block's probes (kFloat64Variant asked for), unrounded.
  std::vector<std::pair<std::string, F64Tensor>> float64_outputs;
  std::vector<ProbeAttribution> attributions;  // ProbeOptions::explain
  double seconds = 0.0;
};

}  // namespace psi::probes
