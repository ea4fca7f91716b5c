#pragma once
// Provenance of what psi reads (issue 57, class 3; the manifest and its one check are
// hdf5/provenance.h): a recording's side as psi regenerates it, SynthInit with the file's seed.
#include <cstdint>
#include <string>

#include "engine/model/weights.h"
#include "engine/tensor.h"
#include "hdf5/provenance.h"
#include "probes/recording.h"

namespace psi::probes {

using hdf5::check_manifest;
using hdf5::Manifest;
using hdf5::ManifestTensor;
using hdf5::ManifestValue;

// What a recording's group declares (hdf5::declared_manifest; synthinit_global_seed is the seed
// psi uses, Recording::seed), with `inputs` its SynthInit inputs too (psi regenerates those itself).
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
