#include "engine/exec/tiling.h"

#include <algorithm>

#include "engine/exec/arena_settings.h"

namespace psi::exec {

namespace {

constexpr std::int64_t kFullOutGroup = 1024;                   // channels, ltx2-22b
constexpr std::int64_t kFullRowTile = 1024;                    // tokens, ltx2-22b

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

}  // namespace

std::int64_t rows_per_tile(std::uint64_t page_bytes, std::int64_t in, std::int64_t out) {
  const std::int64_t fit = std::int64_t(page_bytes / std::uint64_t(2 * in));
  return std::clamp<std::int64_t>(fit, 1, out);
}

std::int64_t default_row_tile(const model::ModelConfig& c) {
  const std::int64_t scaled = kFullRowTile * ffn_tile_bytes(c) / kFullFfnTileBytes;
  return std::max(kRowTileGranule, scaled / kRowTileGranule * kRowTileGranule);
}

FfnGeometry ffn_geometry(const model::ModelConfig& c, const model::NumericsVariant& v, std::int64_t hidden,
                         std::int64_t out, std::uint64_t page_bytes) {
  FfnGeometry g;
  g.hidden_tile = v.ffn(hidden).hidden_tile;
  g.n_hidden = ceil_div(hidden, g.hidden_tile);
  const std::int64_t scaled = std::max<std::int64_t>(1, kFullOutGroup * ffn_tile_bytes(c) / kFullFfnTileBytes);
  g.out_group = std::min({scaled, out, rows_per_tile(page_bytes, g.hidden_tile, out)});
  g.n_out = ceil_div(out, g.out_group);
  return g;
}

}  // namespace psi::exec
