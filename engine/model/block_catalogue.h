#pragma once
// The facts of one LTX-2.x AV block, written once: its checkpoint names (spec §2.2), the rows of
// its AdaLN tables (spec §3.3) and its ten probes (spec §8). The dense block (block.cpp, the
// float64 block_f64.cpp, weights.cpp) and the PSI block program (engine/exec) both read them from
// here, so the two cannot name a tensor or a table row differently.
#include <array>
#include <cstddef>
#include <string>
#include <string_view>

namespace psi::model {

// ---- checkpoint names ---------------------------------------------------------------------------

// Every tensor name of block `index` starts with this.
inline std::string block_prefix(int index) { return "transformer_blocks." + std::to_string(index) + "."; }

// One modality's modules and tables, under the block prefix.
struct StreamNames {
  const char* attn1;         // self-attention
  const char* attn2;         // text cross-attention
  const char* ff;            // feed-forward
  const char* av_attn;       // the A/V cross-attention this stream queries (A2V for video)
  const char* table;         // AdaLN table [ada rows, D]
  const char* prompt_table;  // CA-AdaLN prompt table [prompt_row::count, D]
  const char* av_table;      // A/V table [av_row::table_rows, D]
};
inline constexpr StreamNames kVideoNames{"attn1",
                                         "attn2",
                                         "ff",
                                         "audio_to_video_attn",
                                         "scale_shift_table",
                                         "prompt_scale_shift_table",
                                         "scale_shift_table_a2v_ca_video"};
inline constexpr StreamNames kAudioNames{"audio_attn1",
                                         "audio_attn2",
                                         "audio_ff",
                                         "video_to_audio_attn",
                                         "audio_scale_shift_table",
                                         "audio_prompt_scale_shift_table",
                                         "scale_shift_table_a2v_ca_audio"};

// The layers of an attention module and of a feed-forward, under the module's name.
namespace layer {
inline constexpr const char* to_q = "to_q";
inline constexpr const char* to_k = "to_k";
inline constexpr const char* to_v = "to_v";
inline constexpr const char* to_out = "to_out.0";
inline constexpr const char* to_gate_logits = "to_gate_logits";  // gated attention only
inline constexpr const char* q_norm = "q_norm";
inline constexpr const char* k_norm = "k_norm";
inline constexpr const char* ff_up = "net.0.proj";
inline constexpr const char* ff_down = "net.2";
}  // namespace layer

// A layer's tensors: "<layer>.weight", "<layer>.bias".
inline std::string weight_of(const std::string& name) { return name + ".weight"; }
inline std::string bias_of(const std::string& name) { return name + ".bias"; }

// ---- AdaLN table rows -----------------------------------------------------------------------------

// A stream's AdaLN table and its timesteps [1, 1|N, rows·D]: six rows, nine under CA-AdaLN.
namespace ada_row {
inline constexpr int shift_msa = 0, scale_msa = 1, gate_msa = 2;  // self-attention
inline constexpr int shift_mlp = 3, scale_mlp = 4, gate_mlp = 5;  // feed-forward
inline constexpr int shift_q = 6, scale_q = 7, gate_q = 8;        // text cross-attention, CA-AdaLN
inline constexpr int count = gate_mlp + 1;
inline constexpr int count_ca_adaln = gate_q + 1;
}  // namespace ada_row

// The CA-AdaLN prompt table and the prompt timestep [1, 1, count·D]: the text keys' modulation.
namespace prompt_row {
inline constexpr int shift_kv = 0, scale_kv = 1;
inline constexpr int count = 2;
}  // namespace prompt_row

// The A/V tables and cross_scale_shift_timestep [1, 1|N, timestep_rows·D]; they list scale before
// shift. The gate row is the table's alone (its timestep is cross_gate_timestep [1, 1, D]).
namespace av_row {
inline constexpr int a2v_scale = 0, a2v_shift = 1;  // A2V: video queries, audio keys
inline constexpr int v2a_scale = 2, v2a_shift = 3;  // V2A: audio queries, video keys
inline constexpr int gate = 4;
inline constexpr int timestep_rows = v2a_shift + 1;
inline constexpr int table_rows = gate + 1;
}  // namespace av_row

// ---- taps -------------------------------------------------------------------------------------------

// The ten taps (spec §8's probes) as the recordings name them, in spec order (named_taps, block.h).
inline constexpr auto kTapNames = std::to_array<std::string_view>(
    {"attn1", "attn2", "audio_attn1", "audio_attn2", "audio_to_video_attn", "video_to_audio_attn", "ff", "audio_ff",
     "video_out", "audio_out"});
inline constexpr std::size_t kTapCount = kTapNames.size();

}  // namespace psi::model
