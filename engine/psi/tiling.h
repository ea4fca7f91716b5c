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
#include <cstdint>

#include "engine/model/config.h"
#include "engine/model/variant.h"

namespace psi::exec {

std::int64_t rows_per_tile(std::uint64_t page_bytes, std::int64_t in, std::int64_t out);

struct FfnGeometry {
  std::int64_t hidden_tile = 0, n_hidden = 0;  // up-projection tiles
  std::int64_t out_group = 0, n_out = 0;       // down-projection output groups
};

FfnGeometry ffn_geometry(const model::ModelConfig& c, const model::NumericsVariant& v, std::int64_t hidden,
                         std::int64_t out, std::uint64_t page_bytes);

}  // namespace psi::exec
