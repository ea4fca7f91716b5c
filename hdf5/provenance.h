#pragma once
// Provenance of what psi reads (issue 57, class 3): what a recording, a probe file or a capture
// declares about how it was made (the SynthInit seed, the configuration, each weight's name,
// shape and SHA-256) against what psi regenerates or uses in its place. Every reader holds the two
// to check_manifest: a mismatch is a psi::Error naming both values (bad input, exit 2), never a
// numerical finding. probes/provenance.h regenerates a recording's side; the oracle's probe
// operands (oracle/operands.cpp) are checked by the same function.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/tensor.h"
#include "hdf5/h5.h"

namespace psi::hdf5 {

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

// What group `group` of `f` declares: the seed of its root attribute synthinit_check (when
// present; synthinit_global_seed is the seed psi regenerates with), its weights_json entries
// (name, shape, sha256 where recorded) and, with `inputs`, every dataset under <group>/inputs that
// names its synthinit_name and sha256_full. A weights_json or synthinit_check of another form is
// refused.
Manifest declared_manifest(const File& f, const std::string& group, bool inputs = false);

// The side psi uses when it regenerates with `seed`: "psi's SynthInit (seed N, the file's
// synthinit_global_seed)", its seed value named as declared_manifest names the declared one.
Manifest synthinit_manifest(std::uint64_t seed);

}  // namespace psi::hdf5
