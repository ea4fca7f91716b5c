#pragma once
// How weights are cut into page tiles.
//
// Linear: a weight [out, in] streams as row tiles (groups of output channels) of as many whole
// rows as fit one page; a single row larger than the page still makes a one-row tile, which the
// runtime then fails with tile_exceeds_page.
//
// FFN: the hidden channels are cut into disjoint tiles of min(1024, hidden) channels (the
// variant's hidden tile); the up-projection of one hidden tile is ONE weight tile (its whole
// [hidden_tile, D] slice: 8 MiB at full size, exactly one page of the default arena). The
// down-projection runs in groups of output channels whose float32 accumulator is live while
// every hidden tile is applied: 1,024 channels at full size (a 4096-channel output in four
// groups), scaled like the arena (ffn_tile_bytes / 8 MiB) for smaller configs, and cut further
// if a [group, hidden_tile] slice would not fit the page.
//
// Tokens: every per-token operator runs on token row tiles of R rows (the last may be
// shorter). The default R is 1,024 rows at full size, scaled like the arena (r = ffn_tile_bytes
// / 8 MiB, arena_settings.h) and kept a multiple of 16: 64 on tiny, 128 on small. Attention
// keys are journaled in pieces of gcd(R, key tile) rows, so that a key block of the variant's
// key tile (128 keys) is a whole number of pieces whatever R is.
#include <algorithm>
#include <cstdint>

#include "engine/model/config.h"
#include "engine/model/variant.h"

namespace psi::exec {

std::int64_t rows_per_tile(std::uint64_t page_bytes, std::int64_t in, std::int64_t out);

// An axis of n rows cut into tiles of `height` rows; the last may be shorter.
struct RowTiles {
  std::int64_t n = 0, height = 1;
  std::int64_t count() const { return (n + height - 1) / height; }
  std::int64_t start(std::int64_t t) const { return t * height; }
  std::int64_t rows(std::int64_t t) const { return std::min(height, n - start(t)); }
};

// The default token row tile of a config (see above).
std::int64_t default_row_tile(const model::ModelConfig& c);

// What a row tile a user asks for must be a multiple of: the default's granule, so that keys
// journal in pieces of at least this many rows (gcd(R, key tile)).
inline constexpr std::int64_t kRowTileGranule = 16;

struct FfnGeometry {
  std::int64_t hidden_tile = 0, n_hidden = 0;  // up-projection tiles
  std::int64_t out_group = 0, n_out = 0;       // down-projection output groups
};

FfnGeometry ffn_geometry(const model::ModelConfig& c, const model::NumericsVariant& v, std::int64_t hidden,
                         std::int64_t out, std::uint64_t page_bytes);

}  // namespace psi::exec
