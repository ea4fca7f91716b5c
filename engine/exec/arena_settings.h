#pragma once
// Arena settings for a PSI run: the arena A, the page size P (two pages) and the workspace W;
// the scratch is what is left (A - 2P - W).
//
// The paper's settings are for ltx2-22b. Smaller configs scale them by ONE rule: every byte
// amount is multiplied by  r = (bytes of one full-width 1,024-channel video FFN tile of the
// config) / (4096 x 1024 BF16 = 8 MiB),  i.e. 2 * video_dim * min(1024, video_hidden) / 8 MiB,
// rounded up to the arena's 256-byte alignment. tiny: r = 1/16, small: r = 1/8. A page then
// holds exactly as many FFN tiles as at full size, so a 4 MiB page fails the FFN for every
// config alike. The workspace is 8 MiB (scaled) in every setting.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/model/config.h"

namespace psi::exec {

struct ArenaSettings {
  std::string label;  // "80 MiB / 8 MiB", or "80 MiB / 8 MiB (scaled: 10 MiB / 1 MiB)"
  std::int64_t arena = 0, page = 0, workspace = 0;
};

// 2 * video_dim * min(1024, video_hidden): the bytes of one full-width 1,024-channel FFN tile.
std::int64_t ffn_tile_bytes(const model::ModelConfig& c);
// That tile at full size (ltx2-22b: 4096 x 1024 BF16), the unit of the scaling rule above.
inline constexpr std::int64_t kFullFfnTileBytes = 4096 * 1024 * 2;
// A full-size (ltx2-22b) amount scaled to the config by the rule above.
std::int64_t scale_bytes(const model::ModelConfig& c, std::int64_t full_size_bytes);
// The setting for a full-size arena and page (in bytes), scaled to the config and labelled.
ArenaSettings arena_setting(const model::ModelConfig& c, std::int64_t arena, std::int64_t page);

// 80 MiB arena, 8 MiB pages (scaled).
ArenaSettings default_arena(const model::ModelConfig& c);
// The paper's capacity sweep: 48/64/80/96 MiB with 8 MiB pages, 80 MiB with 4 MiB pages,
// 96 MiB with 16 MiB pages (scaled), in that order.
std::vector<ArenaSettings> capacity_settings(const model::ModelConfig& c);

}  // namespace psi::exec
