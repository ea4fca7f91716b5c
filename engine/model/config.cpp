#include "engine/model/config.h"

#include <algorithm>

#include "engine/error.h"

namespace psi::model {

Features features_for(std::string_view profile) {
  Features f;
  f.profile = std::string(profile);
  if (profile == "ltx25") return f;  // the defaults above are LTX-2.5's
  if (profile == "ltx2") {
    f.gated_attention = false;
    f.cross_attention_adaln = false;
    f.ff_bias = true;
    f.audio_ff_bias = true;
    f.double_precision_rope = true;
    f.av_ca_timestep_scale_multiplier = 1.0;
    f.keyframes_abs_pos_embedding = false;
    f.ancestral_stage1 = false;
    return f;
  }
  throw Error("unknown feature profile '" + std::string(profile) + "' (known: ltx25, ltx2)");
}


double ModelConfig::cross_max_pos() const {
  return std::max(video_max_pos.at(0), audio_max_pos.at(0));
}

ModelConfig model_config(std::string_view name, std::string_view profile) {
  ModelConfig c;
  c.name = std::string(name);
  c.features = features_for(profile);
  if (name == "tiny") {
    c.layers = 2;
    c.video_heads = 2, c.video_head_dim = 128;
    c.audio_heads = 2, c.audio_head_dim = 64;
    c.cross_attention_dim = 256, c.audio_cross_attention_dim = 128;
  } else if (name == "small") {
    c.layers = 1;
    c.video_heads = 4, c.video_head_dim = 128;
    c.audio_heads = 4, c.audio_head_dim = 64;
    c.cross_attention_dim = 512, c.audio_cross_attention_dim = 256;
  } else if (name == "ltx2-22b") {
    c.layers = 48;
    c.video_heads = 32, c.video_head_dim = 128;
    c.audio_heads = 32, c.audio_head_dim = 64;
    c.cross_attention_dim = 4096, c.audio_cross_attention_dim = 2048;
  } else {
    throw Error("unknown model config '" + std::string(name) + "' (known: tiny, small, ltx2-22b)");
  }
  return c;
}

std::vector<std::string> model_config_names() { return {"tiny", "small", "ltx2-22b"}; }

}  // namespace psi::model
