#include "engine/synthinit.h"

#include <algorithm>
#include <cmath>
#include <new>
#include <string>

#include "engine/error.h"
#include "engine/memory.h"

namespace psi::synthinit {

namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

int weight_exponent(std::int64_t in) {
  int e = 0;
  while ((std::int64_t{1} << (2 * e)) < in) ++e;  // smallest e with 4^e >= in
  return e;
}

constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15ull;

// splitmix64's finaliser on z, then v = (2k + 1 - 2^24) / 2^24 from its top 24 bits k. The
// numerator is below 2^25 in magnitude, so it and the quotient are exact in float32.
inline float draw(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  std::int64_t k = std::int64_t(z >> 40);
  return float(2 * k + 1 - (std::int64_t{1} << 24)) * 0x1p-24f;
}

}  // namespace

std::string_view role_name(Role r) {
  switch (r) {
    case Role::input: return "input";
    case Role::keyframe_embedding: return "zeros";
    case Role::adaln_table: return "adaln_table";
    case Role::rms_gain: return "rms_gain";
    case Role::bias: return "bias";
    case Role::linear_weight: return "linear_weight";
  }
  return "?";
}

std::uint64_t fnv1a64(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

RoleSpec classify(std::string_view name, const Shape& shape) {
  if (name.starts_with("input.")) return {Role::input, 0.0f, 0};
  if (name == "keyframes_abs_pos_embedding") return {Role::keyframe_embedding, 0.0f, 0};
  if (name.find("scale_shift_table") != std::string_view::npos) return {Role::adaln_table, 0.0f, 2};
  if (ends_with(name, ".q_norm.weight") || ends_with(name, ".k_norm.weight"))
    return {Role::rms_gain, 1.0f, 3};
  if (ends_with(name, ".bias")) return {Role::bias, 0.0f, 3};
  if (ends_with(name, ".weight") && shape.size() == 2) {
    if (shape[1] <= 0) throw Error("synthinit: weight " + std::string(name) + " has no inputs");
    return {Role::linear_weight, 0.0f, weight_exponent(shape[1])};
  }
  throw Error("synthinit: no SynthInit v1 role for tensor '" + std::string(name) + "' of shape " +
              shape_str(shape));
}

float uniform(std::uint64_t name_hash, std::uint64_t seed, std::uint64_t i) {
  return draw((name_hash ^ seed) + (i + 1) * kGolden);
}

void fill(std::string_view name, const Shape& shape, std::uint64_t seed, std::span<Bf16> out,
          std::uint64_t first) {
  const RoleSpec spec = classify(name, shape);
  const std::uint64_t n = std::uint64_t(psi::numel(shape));
  if (first > n || out.size() > n - first)
    throw Error("synthinit: elements [" + std::to_string(first) + ", " +
                std::to_string(first + out.size()) + ") out of range for " + std::string(name) +
                " " + shape_str(shape));
  if (spec.role == Role::keyframe_embedding) {
    std::fill(out.begin(), out.end(), Bf16{});
    return;
  }
  const std::uint64_t h = fnv1a64(name) ^ seed;
  const float scale = std::ldexp(1.0f, -spec.e);
  const float offset = spec.offset;
  std::uint64_t z = h + (first + 1) * kGolden;
  for (std::size_t j = 0; j < out.size(); ++j, z += kGolden) out[j] = bf16_rne(offset + draw(z) * scale);
}

Bf16Tensor make(std::string_view name, const Shape& shape, std::uint64_t seed) {
  // The shape often comes from a file (a recording's full_shape, a weights_json entry): it is
  // checked before the tensor is allocated, never left to bad_alloc or the OOM killer.
  const auto refuse = [&](const std::string& why) {
    return Error("SynthInit tensor '" + std::string(name) + "' of shape " + shape_str(shape) + ": " + why);
  };
  const std::uint64_t memory = physical_memory_bytes();
  std::uint64_t elements = 1;
  for (const std::int64_t d : shape) {
    if (d < 0) throw refuse("a negative size");
    if (d != 0 && elements > memory / sizeof(Bf16) / std::uint64_t(d))
      throw refuse("more than this machine's memory (" + std::to_string(memory) + " bytes) holds");
    elements *= std::uint64_t(d);
  }
  Bf16Tensor t;
  try {
    t = Bf16Tensor(shape);
  } catch (const std::bad_alloc&) {
    throw refuse(std::to_string(elements * sizeof(Bf16)) + " bytes could not be allocated");
  }
  fill(name, shape, seed, t.span());
  return t;
}

}  // namespace psi::synthinit
