#pragma once
// Provenance of what psi reads (issue 57, class 3): what a recording or a capture declares about
// how it was made (the SynthInit seed, the configuration, each weight's name, shape and SHA-256)
// against what psi regenerates or uses in its place. Every reader of a recording or a capture
// holds the two to check_manifest: a mismatch is a psi::Error naming both values (bad input,
// exit 2), never a numerical finding.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/model/weights.h"
#include "engine/tensor.h"
#include "probes/recording.h"

namespace psi::probes {

// A tensor as a manifest names it; sha256 empty where the manifest records none.
struct ManifestTensor {
  std::string name;
  Shape shape;
  std::string sha256;
  bool input = false;  // a recorded input (synthinit_name), not a weight
};

// A named value (the SynthInit seed, the model configuration, ...) and where it is stated.
struct ManifestValue {
  std::string name, value, where;
};

// What one side says: named values (seed, model_config, state, ...) and tensors.
struct Manifest {
  std::string source;  // where it is declared ("<file>:/<group>"), or what psi used
  std::vector<ManifestValue> values;
  std::vector<ManifestTensor> tensors;
};

// The one check: every value `used` names that `declared` names too must be equal, and every
// tensor `used` holds must be declared, with the same shape and, where both record one, the same
// SHA-256. psi::Error (bad input) naming the thing, both values and both sources.
void check_manifest(const Manifest& declared, const Manifest& used);

// What a recording's group declares: the seed of its root attribute synthinit_check (when
// present; synthinit_global_seed is the seed psi uses, Recording::seed), its weights_json
// entries (name, shape, sha256 where recorded) and, with `inputs`, every dataset under
// <group>/inputs that names its synthinit_name and sha256_full (psi regenerates those itself).
// A weights_json of another form is refused.
Manifest recording_manifest(const Recording& rec, bool inputs = false);

// What psi uses for a recording: its seed and, for `declared`'s inputs, SynthInit's regeneration
// of each with that seed, checked by check_manifest against the declaration. Cheap for the
// inputs a recording of the tiny trajectory declares; a block's weights are checked as they load.
void check_recorded_inputs(const Recording& rec, const Manifest& declared);

// SynthInit weights with a recording's seed, each checked against the recording's manifest as it
// is loaded (a name weights_json lacks, another shape or another SHA-256 is refused).
class ManifestSource : public model::TensorSource {
 public:
  ManifestSource(Manifest declared, std::uint64_t seed);
  Bf16Tensor load(const std::string& name, const Shape& shape) override;
  std::string describe() const override { return inner_.describe(); }
  std::int64_t checked() const { return checked_; }

 private:
  Manifest declared_;
  std::uint64_t seed_;
  model::SynthInitSource inner_;
  std::int64_t checked_ = 0;
};

}  // namespace psi::probes
