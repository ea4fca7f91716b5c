#pragma once
// A SynthInit v1 weight source: tiles are generated straight into the staging buffer, one row
// segment at a time, from (seed, tensor name, flat index). Nothing is materialised whole.
#include <cstdint>
#include <map>
#include <string>

#include "engine/checkpoint/weight_source.h"

namespace psi::ckpt {

class SynthSource final : public WeightSource {
 public:
  // `tensors`: every name the source serves, with its shape (the model's tensor list).
  SynthSource(std::uint64_t seed, std::map<std::string, Shape, std::less<>> tensors);

  std::string describe() const override;
  bool contains(std::string_view name) const override;
  Shape shape(std::string_view name) const override;
  void read(std::string_view name, const Slice& s, std::span<Bf16> out) const override;

 private:
  std::uint64_t seed_;
  std::map<std::string, Shape, std::less<>> tensors_;
};

}  // namespace psi::ckpt
