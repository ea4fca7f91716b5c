#pragma once
// SynthInit v1 (shared/spec/synthetic-weights.md): every synthetic weight and input is a pure
// function of (global seed, tensor name, flat element index).
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "engine/tensor.h"

namespace psi::synthinit {

enum class Role { input, keyframe_embedding, adaln_table, rms_gain, bias, linear_weight };

struct RoleSpec {
  Role role;
  float offset;  // 0 or 1, added in float32
  int e;         // value scale 2^-e
};

std::string_view role_name(Role r);  // the names the recordings' weights_json uses

std::uint64_t fnv1a64(std::string_view s);

// The spec's row table, tried in order; a name matching no row throws psi::Error.
RoleSpec classify(std::string_view name, const Shape& shape);

// The raw draw v in (-1, 1) for element i: an odd multiple of 2^-24.
float uniform(std::uint64_t name_hash, std::uint64_t seed, std::uint64_t i);

// Fill out[j] with element (first + j) of tensor `name` of `shape`.
void fill(std::string_view name, const Shape& shape, std::uint64_t seed, std::span<Bf16> out,
          std::uint64_t first = 0);

Bf16Tensor make(std::string_view name, const Shape& shape, std::uint64_t seed);

}  // namespace psi::synthinit
