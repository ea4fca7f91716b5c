#pragma once
// `psi probe` cases: one recorded official computation, re-run by psi on the recorded inputs
// through each numerics variant and compared tensor by tensor with the recording (MATH, and
// FLASH where recorded).
//
//   audio-ff-up          probes_linear.h5    probe_audio_ff_up      x -> proj_out, gelu_out
//   video-q-proj         probes_linear.h5    probe_video_q_proj     x -> q
//   audio-self-attn      probe_attn_traj.h5  probe_audio_self_attn  x, pe -> q, k, v, sdpa_out, to_out_in, out
//   block-small          block_small.h5          block_small          the ten block probes
//   block-small-alt      block_small_alt.h5      block_small_alt      (profile ltx2)
//   block-small-ctx1024  block_small_ctx1024.h5  block_small_ctx1024  (1,024-row contexts)
//   block-full           block_full_math.h5 (+ block_full_flash.h5)  block_full_first
//   block-full-ctx1024   block_full_ctx1024.h5   block_full_ctx1024
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/backend/backend_factory.h"
#include "engine/distance.h"
#include "engine/official/kernel_config.h"
#include "engine/tensor.h"
#include "probes/probe_report.h"

namespace psi::probes {

struct ProbeCase {
  std::string name;
  std::string default_file;        // under <shared>/reference/
  std::string flash_default_file;  // FLASH probes kept in a separate file, or empty
  std::string group;
  std::string description;
};

const std::vector<ProbeCase>& probe_cases();
const ProbeCase& probe_case(std::string_view name);  // psi::Error for an unknown name

// The recorded tiny-model trajectories (8 + 3 steps), one per text context, written once: the
// one-token context and 1,024-row contexts. The group is also the SynthInit name prefix of a
// run's inputs.
struct TrajectoryRecording {
  std::string label;  // "one-token", "ctx1024"
  std::string file;   // under <shared>/reference/
  std::string group;
  std::int64_t context_rows = 0;
};
const std::vector<TrajectoryRecording>& trajectory_recordings();
// psi::Error for a context the recordings do not hold (they hold 1 and 1024 rows).
const TrajectoryRecording& trajectory_recording(std::int64_t context_rows);

// PSI_SHARED if set, else the build's default (PSI_SHARED_DIR_DEFAULT).
std::filesystem::path shared_dir();

struct ProbeOptions {
  std::filesystem::path reference;        // empty: the case's default file
  std::filesystem::path flash_reference;  // empty: the case's default FLASH file when `reference` is default
  std::vector<std::string> variants;      // empty: all numerics variants; may add kFloat64Variant
  // Empty: engine/ops on whole tensors on the host (block_forward, ops::linear). A runtime
  // backend (psi probe resolves --backend cpu, cuda or auto to one before the run): the block
  // through the PSI executor on it (the dense variant with whole weights in its pages and every
  // token in one row tile, the PSI variants in the default arena), the projections as one whole
  // product (engine/runtime/whole_linear.h); the 64-dim attention case has no runtime form and
  // stays on the host.
  std::optional<rt::BackendKind> runtime;
  // Block cases: attribute every element that differs from the MATH recording (explain_block).
  bool explain = false;
  // How many differing elements each comparison keeps (TensorResult::first_differences).
  std::int64_t differences = kShownDifferences;
  // The kernel choices every variant runs under (engine/official/kernel_config.h); null: the
  // recorded ones.
  official::KernelConfigRef kernels;
};

// The recordings a probe reads (the defaults resolved as run_probe resolves them); the FLASH
// file is empty when there is none.
struct ProbeFiles {
  std::filesystem::path file, flash_file;
};
ProbeFiles probe_files(const ProbeCase& pc, const ProbeOptions& opt);

ProbeReport run_probe(std::string_view case_name, const ProbeOptions& opt);

// One variant's bitwise claim (model::NumericsVariant::claims) checked against a probe's
// comparisons: every tensor compared with the claimed recording ("math" or "flash"; a recording
// of one path, "official", is claimed by every claiming variant), by its stored elements or its
// full-tensor SHA-256.
struct ClaimCheck {
  std::string variant;
  std::string path;                 // the claimed recording: "math" or "flash"
  std::int64_t checked = 0;         // tensors compared with it
  std::vector<std::string> failed;  // those not bitwise equal
  // The comparisons behind `failed` (indices into the report's results), for where they differ.
  std::vector<std::size_t> failed_results;
  bool unverified = false;          // the probe read data it could not check (ProbeReport::unverified)
  bool held() const { return checked > 0 && failed.empty(); }
};
// One entry per variant of the report that claims a path, in the report's order.
std::vector<ClaimCheck> check_claims(const ProbeReport& r);

// psi's outputs as a psi-h5/1 file (hdf5/state_file.h: BF16 as uint16 + dtype attribute,
// every dataset's check values, the run's root attributes; written to a temporary name and
// renamed): /<group>/<variant>/<tensor>; the float64 block's as float64 datasets under
// /<group>/float64/.
void write_probe_outputs(const ProbeReport& r, const std::filesystem::path& out, const std::string& device_name);

}  // namespace psi::probes
