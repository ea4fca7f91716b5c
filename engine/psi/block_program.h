#pragma once
// One LTX-2.x AV block (spec §3.3, both streams) as a sequence of PSI operators on a Driver.
//
// Operators, in order (each starts on an empty scratch stack and ends with its outputs
// committed to the journal):
//   audio.self   x -> attn1 probe, x1 = post_sa residual, n1 = rms(x1)
//   audio.text   x1, n1 -> attn2 probe, x2
//   video.self, video.text   the same for video
//   av           video x2, audio x2 -> A2V and V2A probes, x3 of both streams
//   video.ff     x3 -> ff probe, out;   audio.ff   the same for audio
// An operator allocates the state it reloads where the operator before committed it, so under
// the async journal those values stay resident and are not copied back (x1 and n1 of both
// streams, video x2, video x3); the others are reloaded from the host.
//
// Journal keys are (block, branch, role, tile) with block = the run's block sequence number.
// Inputs: x, timesteps (tile = AdaLN row, [Ts, D]), context, prompt_timestep (tile = row),
// pe.cos/pe.sin, cross_pe.cos/cross_pe.sin, cross_ss (tile = row), cross_gate. State: x1, n1,
// x2, x3, out, ffn.h (tile = hidden tile). Probes: attn1, attn2, av, ff (and out).
#include <cstdint>

#include "engine/model/block.h"
#include "engine/model/config.h"
#include "engine/model/variant.h"
#include "engine/psi/driver.h"
#include "engine/psi/schedule.h"
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

// Puts the block's inputs into the journal (host side) under block `jblock`.
void put_inputs(rt::HostJournal& j, int jblock, const model::ModelConfig& c, const model::BlockInputs& in);

struct BlockTask {
  const model::ModelConfig& config;
  const model::NumericsVariant& variant;
  const Schedule& schedule;
  int index = 0;   // the model block (weight names)
  int jblock = 0;  // the journal's block number
  BlockShapes shapes;
};

// Plans or runs the block on d.
void block_program(Driver& d, const BlockTask& task);

// The ten probes from the journal (after a flush).
model::BlockProbes collect_probes(const rt::HostJournal& j, int jblock);

}  // namespace psi::exec
