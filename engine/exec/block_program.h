#pragma once
// One LTX-2.x AV block (spec §3.3, both streams) as a sequence of PSI operators on a Driver,
// every one of them on token row tiles of R rows (tiling.h). The operators are the module steps
// of the block order (engine/model/block_order.h), audio's self- and text attention before
// video's; each is named by its query stream and step (audio.attn1, video.attn2, video.a2v,
// audio.v2a, video.ff). An attention step projects the keys of every key row tile, then per
// query row tile attends, commits its tap, adds the residual and commits the new state; a
// feed-forward step does the same per row tile without the keys. Each row tile reloads what it
// needs from the journal and commits what it produces, so no tensor of a whole stream is ever in
// the arena (but the whole k and v of MATH attention).
//
// Journal keys are (block, branch, role, tile) with block = the run's block sequence number and
// tile = the row tile unless said otherwise. Inputs: x, timesteps.<row> (the AdaLN row; tile 0
// when per batch), context (context row tiles), prompt_timestep.<row>, pe.cos/pe.sin and
// cross_pe.cos/cross_pe.sin ([1, H, rows, half] per row tile), cross_ss.<row>, cross_gate.
// State: x1, x2, x3, out; attn1.k/.v, attn2.k/.v, av.k/.v (key pieces, tile = piece); ffn.h
// (tile = row tile · hidden tiles + hidden tile). Probes: attn1, attn2, av, ff (and out).
#include <cstdint>

#include "engine/exec/driver.h"
#include "engine/exec/schedule.h"
#include "engine/model/block.h"
#include "engine/model/config.h"
#include "engine/model/variant.h"
#include "engine/runtime/journal.h"

namespace psi::exec {

struct StreamShapes {
  std::int64_t tokens = 0, context_rows = 0;
  std::int64_t timestep_rows = 0;        // 1 (per batch) or tokens
  std::int64_t cross_timestep_rows = 0;  // of cross_scale_shift_timestep
  bool prompt = false;                   // a prompt timestep is given
  Shape pe, cross_pe;                    // RoPE table shapes [1, H, T, half]
};
struct BlockShapes {
  StreamShapes video, audio;
};

// Checks the inputs against the config (psi::Error naming the input) and returns their shapes.
BlockShapes block_shapes(const model::ModelConfig& c, const model::BlockInputs& in);

// The shapes of a block with these token counts, for planning without tensors.
struct TokenCounts {
  std::int64_t video = 0, audio = 0, context = 0;  // context: text rows of both streams
  bool per_token_timesteps = true;                 // AdaLN and A/V timesteps [1, N, k·D]
  bool prompt_timestep = true;                     // CA-AdaLN prompt timesteps given
};
BlockShapes block_shapes(const model::ModelConfig& c, const TokenCounts& n);

// The same block with every token and context count raised to at least `rows` and per-token
// timesteps: its row tiles and key blocks are all full, so its live set bounds that of every
// block of the config whose row tiles and key blocks are at most `rows` (online attention).
BlockShapes full_tile_shapes(const BlockShapes& b, std::int64_t rows);

// Puts the block's inputs into the journal (host side) under block `jblock`, cut into row tiles
// of `row_tile` rows.
void put_inputs(rt::HostJournal& j, int jblock, const model::ModelConfig& c, const model::BlockInputs& in,
                std::int64_t row_tile);

struct BlockTask {
  const model::ModelConfig& config;
  const model::NumericsVariant& variant;
  const Schedule& schedule;
  int index = 0;   // the model block (weight names)
  int jblock = 0;  // the journal's block number
  BlockShapes shapes;
  std::int64_t row_tile = 0;  // R
};

// Plans or runs the block on d.
void block_program(Driver& d, const BlockTask& task);

// The ten probes from the journal (after a flush), put together from their row tiles.
model::BlockTaps collect_probes(const rt::HostJournal& j, int jblock, const BlockShapes& shapes,
                                std::int64_t row_tile);

}  // namespace psi::exec
