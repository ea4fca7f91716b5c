#include "engine/exec/arena_settings.h"

#include <algorithm>

#include "engine/error.h"
#include "engine/measure/sizes.h"

namespace psi::exec {

namespace {

constexpr std::int64_t kMiB = 1 << 20;
constexpr std::int64_t kFullWorkspace = 8 * kMiB;

}  // namespace

std::int64_t ffn_tile_bytes(const model::ModelConfig& c) {
  return 2 * c.video_dim() * std::min<std::int64_t>(1024, c.video_hidden());
}

std::int64_t scale_bytes(const model::ModelConfig& c, std::int64_t full_size_bytes) {
  const std::int64_t unit = ffn_tile_bytes(c);
  if (unit <= 0) throw Error("arena scaling: config " + c.name + " has no video FFN");
  // full * unit / 8 MiB without overflow for any realistic amount (< 2^40 bytes).
  const std::int64_t scaled = (full_size_bytes / 256) * unit / (kFullFfnTileBytes / 256);
  return std::int64_t(rt::align_up(std::uint64_t(std::max<std::int64_t>(scaled, 1))));
}

ArenaSettings arena_setting(const model::ModelConfig& c, std::int64_t arena, std::int64_t page) {
  ArenaSettings s;
  s.arena = scale_bytes(c, arena);
  s.page = scale_bytes(c, page);
  s.workspace = scale_bytes(c, kFullWorkspace);
  s.label = rt::format_capacity(std::uint64_t(arena)) + " / " + rt::format_capacity(std::uint64_t(page));
  if (s.arena != arena || s.page != page)
    s.label += " (scaled: " + rt::format_capacity(std::uint64_t(s.arena)) + " / " +
               rt::format_capacity(std::uint64_t(s.page)) + ")";
  return s;
}

ArenaSettings default_arena(const model::ModelConfig& c) { return arena_setting(c, 80 * kMiB, 8 * kMiB); }

std::vector<ArenaSettings> capacity_settings(const model::ModelConfig& c) {
  std::vector<ArenaSettings> out;
  for (std::int64_t a : {48, 64, 80, 96}) out.push_back(arena_setting(c, a * kMiB, 8 * kMiB));
  out.push_back(arena_setting(c, 80 * kMiB, 4 * kMiB));
  out.push_back(arena_setting(c, 96 * kMiB, 16 * kMiB));
  return out;
}

}  // namespace psi::exec
