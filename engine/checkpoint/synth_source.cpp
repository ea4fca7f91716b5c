#include "engine/checkpoint/synth_source.h"

#include "engine/error.h"
#include "engine/synthinit.h"

namespace psi::ckpt {

SynthSource::SynthSource(std::uint64_t seed, std::map<std::string, Shape, std::less<>> tensors)
    : seed_(seed), tensors_(std::move(tensors)) {
  // Classify every name now, so that a name SynthInit has no rule for fails at setup, not mid-run.
  for (const auto& [name, shape] : tensors_) synthinit::classify(name, shape);
}

std::string SynthSource::describe() const { return "synthinit v1 seed " + std::to_string(seed_); }

bool SynthSource::contains(std::string_view name) const { return tensors_.find(name) != tensors_.end(); }

Shape SynthSource::shape(std::string_view name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw Error("synthinit source: unknown tensor " + std::string(name));
  return it->second;
}

void SynthSource::read(std::string_view name, const Slice& s, std::span<Bf16> out) const {
  const Shape sh = shape(name);
  check_slice(name, sh, s, out.size());
  const Matrix2d m = matrix_view(sh);
  const std::size_t cols = std::size_t(s.cols());
  for (std::int64_t r = s.r0; r < s.r1; ++r)
    synthinit::fill(name, sh, seed_, out.subspan(std::size_t(r - s.r0) * cols, cols),
                    std::uint64_t(r * m.cols + s.c0));
}

}  // namespace psi::ckpt
