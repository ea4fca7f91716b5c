#include "probes/provenance.h"

#include <utility>

#include "engine/error.h"
#include "engine/sha256.h"
#include "engine/synthinit.h"

namespace psi::probes {

Manifest recording_manifest(const Recording& rec, bool inputs) {
  return hdf5::declared_manifest(rec.file(), rec.group(), inputs);
}

void check_recorded_inputs(const Recording& rec, const Manifest& declared) {
  Manifest used = hdf5::synthinit_manifest(rec.seed());
  for (const ManifestTensor& t : declared.tensors)
    if (t.input) used.tensors.push_back({t.name, t.shape, sha256_hex(synthinit::make(t.name, t.shape, rec.seed())), true});
  check_manifest(declared, used);
}

ManifestSource::ManifestSource(Manifest declared, std::uint64_t seed)
    : declared_(std::move(declared)), seed_(seed), inner_(seed) {
  check_manifest(declared_, hdf5::synthinit_manifest(seed_));
}

Bf16Tensor ManifestSource::load(const std::string& name, const Shape& shape) {
  Bf16Tensor t = inner_.load(name, shape);
  // Hashed only where the manifest records a hash (the tiny trajectory's lists names and shapes).
  bool hashed = false;
  for (const ManifestTensor& d : declared_.tensors) hashed = hashed || (d.name == name && !d.sha256.empty());
  Manifest used = hdf5::synthinit_manifest(seed_);
  used.tensors.push_back({name, shape, hashed ? sha256_hex(t) : "", false});
  check_manifest(declared_, used);
  ++checked_;
  return t;
}

}  // namespace psi::probes
