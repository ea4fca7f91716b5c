#include "engine/psi/block_program.h"

#include "engine/error.h"
#include "engine/psi/operators.h"

namespace psi::exec {

namespace {

using rt::Branch;

// A shape check: -1 in `want` matches any size.
void check_shape(const Bf16Tensor& t, const Shape& want, const std::string& name) {
  bool ok = t.shape.size() == want.size();
  for (std::size_t i = 0; ok && i < want.size(); ++i) ok = want[i] < 0 || want[i] == t.shape[i];
  if (!ok) {
    std::string w = "[";
    for (std::size_t i = 0; i < want.size(); ++i) w += (i ? ", " : "") + (want[i] < 0 ? std::string("*") : std::to_string(want[i]));
    throw Error("block input " + name + " is " + shape_str(t.shape) + ", expected " + w + "]");
  }
}

void check_rows(std::int64_t rows, std::int64_t tokens, const std::string& name) {
  if (rows != 1 && rows != tokens)
    throw Error("block input " + name + " has " + std::to_string(rows) + " rows; expected 1 or the " +
                std::to_string(tokens) + " tokens");
}

void check_rope(const ops::RopeTables& r, std::int64_t tokens, std::int64_t width, const std::string& name) {
  check_shape(r.cos, {1, -1, tokens, -1}, name + ".cos");
  if (r.sin.shape != r.cos.shape)
    throw Error("block input " + name + ".sin is " + shape_str(r.sin.shape) + " but .cos is " + shape_str(r.cos.shape));
  if (r.cos.dim(1) * 2 * r.cos.dim(3) != width)
    throw Error("block input " + name + ".cos " + shape_str(r.cos.shape) + " does not cover a width of " +
                std::to_string(width));
}

StreamShapes stream_shapes(const model::ModelConfig& c, const model::StreamInputs& s, const std::string& n,
                           std::int64_t D, std::int64_t Dc, std::int64_t inner) {
  StreamShapes sh;
  check_shape(s.x, {1, -1, D}, n + ".x");
  sh.tokens = s.x.dim(1);
  const std::int64_t rows = c.features.ada_rows();
  check_shape(s.timesteps, {1, -1, rows * D}, n + ".timesteps");
  sh.timestep_rows = s.timesteps.dim(1);
  check_rows(sh.timestep_rows, sh.tokens, n + ".timesteps");
  check_shape(s.context, {1, -1, Dc}, n + ".context");
  sh.context_rows = s.context.dim(1);
  sh.prompt = c.features.cross_attention_adaln && s.prompt_timestep.numel() > 0;
  if (sh.prompt) check_shape(s.prompt_timestep, {1, 1, 2 * D}, n + ".prompt_timestep");
  check_rope(s.pe, sh.tokens, inner, n + ".pe");
  check_rope(s.cross_pe, sh.tokens, c.av_inner(), n + ".cross_pe");
  sh.pe = s.pe.cos.shape;
  sh.cross_pe = s.cross_pe.cos.shape;
  check_shape(s.cross_scale_shift_timestep, {1, -1, 4 * D}, n + ".cross_scale_shift_timestep");
  sh.cross_timestep_rows = s.cross_scale_shift_timestep.dim(1);
  check_rows(sh.cross_timestep_rows, sh.tokens, n + ".cross_scale_shift_timestep");
  check_shape(s.cross_gate_timestep, {1, 1, D}, n + ".cross_gate_timestep");
  return sh;
}

// Row r of a [1, T, k·D] modulation tensor as [T, D].
std::vector<Bf16> row_of(const Bf16Tensor& t, std::int64_t r, std::int64_t D) {
  const std::int64_t T = t.dim(1), width = t.dim(2);
  std::vector<Bf16> out(std::size_t(T * D));
  for (std::int64_t i = 0; i < T; ++i)
    std::copy_n(t.data.begin() + i * width + r * D, D, out.begin() + i * D);
  return out;
}

void put_stream(rt::HostJournal& j, int jb, Branch b, const model::ModelConfig& c, const model::StreamInputs& s,
                std::int64_t D) {
  auto key = [&](const char* role, int tile = 0) { return rt::JournalKey{jb, b, role, tile}; };
  const std::int64_t N = s.x.dim(1);
  j.put(key("x"), {N, D}, s.x.span());
  for (int r = 0; r < c.features.ada_rows(); ++r)
    j.put(key("timesteps", r), {s.timesteps.dim(1), D}, row_of(s.timesteps, r, D));
  j.put(key("context"), {s.context.dim(1), s.context.dim(2)}, s.context.span());
  if (c.features.cross_attention_adaln && s.prompt_timestep.numel() > 0)
    for (int r = 0; r < 2; ++r) j.put(key("prompt_timestep", r), {1, D}, row_of(s.prompt_timestep, r, D));
  j.put(key("pe.cos"), s.pe.cos.shape, s.pe.cos.span());
  j.put(key("pe.sin"), s.pe.sin.shape, s.pe.sin.span());
  j.put(key("cross_pe.cos"), s.cross_pe.cos.shape, s.cross_pe.cos.span());
  j.put(key("cross_pe.sin"), s.cross_pe.sin.shape, s.cross_pe.sin.span());
  for (int r = 0; r < 4; ++r)
    j.put(key("cross_ss", r), {s.cross_scale_shift_timestep.dim(1), D}, row_of(s.cross_scale_shift_timestep, r, D));
  j.put(key("cross_gate"), {1, D}, s.cross_gate_timestep.span());
}

// One modality's names and sizes.
struct StreamDesc {
  Branch branch;
  std::string name;  // "video" | "audio"
  std::string attn1, attn2, ff, av_module, table, prompt_table, av_table;  // checkpoint names
  std::int64_t D = 0, Dc = 0, heads = 0, head_dim = 0, hidden = 0;
  bool ff_bias = false;
  StreamShapes sh;
};

class Program {
 public:
  Program(Driver& d, const BlockTask& t) : d_(d), t_(t), c_(t.config), eps_(t.config.norm_eps) {
    const std::string p = "transformer_blocks." + std::to_string(t.index) + ".";
    video_ = {Branch::video, "video", p + "attn1.", p + "attn2.", p + "ff.", p + "audio_to_video_attn.",
              p + "scale_shift_table", p + "prompt_scale_shift_table", p + "scale_shift_table_a2v_ca_video",
              c_.video_dim(), c_.cross_attention_dim, c_.video_heads, c_.video_head_dim, c_.video_hidden(),
              c_.features.ff_bias, t.shapes.video};
    audio_ = {Branch::audio, "audio", p + "audio_attn1.", p + "audio_attn2.", p + "audio_ff.",
              p + "video_to_audio_attn.", p + "audio_scale_shift_table", p + "audio_prompt_scale_shift_table",
              p + "scale_shift_table_a2v_ca_audio", c_.audio_dim(), c_.audio_cross_attention_dim, c_.audio_heads,
              c_.audio_head_dim, c_.audio_hidden(), c_.features.audio_ff_bias, t.shapes.audio};
  }

  void run() {
    self_attention(audio_);
    text_attention(audio_);
    self_attention(video_);
    text_attention(video_);
    av_attention();
    feed_forward(video_);
    feed_forward(audio_);
  }

 private:
  rt::JournalKey key(const StreamDesc& s, const char* role, int tile = 0) const {
    return {t_.jblock, s.branch, role, tile};
  }

  ArenaMat mat(Frame& f, std::int64_t rows, std::int64_t cols, const std::string& op, const std::string& name) {
    return alloc_mat(f, Pool::scratch, rows, cols, op, name);
  }

  // ada_zero(x; table[scale_row] + S[scale_row], table[shift_row] + S[shift_row]) into y.
  void ada_zero_rows(const std::string& op, const std::string& table, const StreamDesc& s, const char* ts_role,
                     std::int64_t ts_rows, int scale_row, int shift_row, const ArenaMat& x, const ArenaMat& y) {
    Frame f(d_);
    const ArenaMat shift = mat(f, ts_rows, s.D, op, "shift");
    const ArenaMat scale = mat(f, ts_rows, s.D, op, "scale");
    ada_value(d_, op + " shift", table, shift_row, key(s, ts_role, shift_row), shift);
    ada_value(d_, op + " scale", table, scale_row, key(s, ts_role, scale_row), scale);
    ada_zero(d_, op, x, scale, shift, eps_, y);
  }

  AttentionSpec attention_spec(const std::string& op, const std::string& module, std::int64_t heads,
                               std::int64_t head_dim) const {
    return {op, module, heads, head_dim, c_.features.gated_attention, t_.variant.sdpa(head_dim), eps_};
  }

  // Steps 1–4 of spec §3.3. Layout [x | gate_msa | out | h + attention], then n1 where h was.
  void self_attention(const StreamDesc& s) {
    const std::string op = s.name + ".attn1";
    const std::int64_t N = s.sh.tokens, Ts = s.sh.timestep_rows;
    Frame f(d_);
    const ArenaMat x = reload_mat(d_, f, key(s, "x"), N, s.D, op, "x");
    const ArenaMat gate = mat(f, Ts, s.D, op, "gate_msa");
    ada_value(d_, op + " gate_msa", s.table, 2, key(s, "timesteps", 2), gate);
    const ArenaMat o = mat(f, N, s.D, op, "out");
    {
      Frame g(d_);
      const ArenaMat h = mat(g, N, s.D, op, "h");
      ada_zero_rows(op + " ada", s.table, s, "timesteps", Ts, 1, 0, x, h);
      const RopeKeys pe{key(s, "pe.cos"), key(s, "pe.sin"), s.sh.pe};
      attention(d_, attention_spec(op, s.attn1, s.heads, s.head_dim), h, h, &pe, &pe, o);
    }
    d_.commit(key(s, "attn1"), o.region, o.shape());
    const ArenaMat n1 = mat(f, N, s.D, op, "n1");
    gated_residual(d_, op + " post_sa residual", x, o, gate);
    rms_norm(d_, op + " post_sa norm", x, "", eps_, n1);
    d_.commit(key(s, "x1"), x.region, x.shape());
    d_.commit(key(s, "n1"), n1.region, n1.shape());
  }

  // Steps 5–10 of spec §3.3. Layout [x1 | gate_q | out | n1 | context + attention]: x1 and n1
  // land where self-attention committed them (with CA-AdaLN, whose gate_q is as large as
  // gate_msa).
  void text_attention(const StreamDesc& s) {
    const std::string op = s.name + ".attn2";
    const std::int64_t N = s.sh.tokens, Ts = s.sh.timestep_rows, L = s.sh.context_rows;
    const bool ca_adaln = c_.features.cross_attention_adaln;
    Frame f(d_);
    const ArenaMat x = reload_mat(d_, f, key(s, "x1"), N, s.D, op, "x1");
    ArenaMat gate;
    if (ca_adaln) gate = mat(f, Ts, s.D, op, "gate_q");
    const ArenaMat o = mat(f, N, s.D, op, "out");
    const ArenaMat n1 = reload_mat(d_, f, key(s, "n1"), N, s.D, op, "n1");
    const AttentionSpec spec = attention_spec(op, s.attn2, s.heads, s.head_dim);
    if (!ca_adaln) {
      const ArenaMat ctx = reload_mat(d_, f, key(s, "context"), L, s.Dc, op, "context");
      attention(d_, spec, n1, ctx, nullptr, nullptr, o);
      d_.commit(key(s, "attn2"), o.region, o.shape());
      residual(d_, op + " residual", x, o);
      d_.commit(key(s, "x2"), x.region, x.shape());
      return;
    }
    ada_value(d_, op + " gate_q", s.table, 8, key(s, "timesteps", 8), gate);
    {
      Frame g(d_);  // q_in = modulate(n1; rows 7, 6), in place
      const ArenaMat shift = mat(g, Ts, s.D, op, "shift_q");
      const ArenaMat scale = mat(g, Ts, s.D, op, "scale_q");
      ada_value(d_, op + " shift_q", s.table, 6, key(s, "timesteps", 6), shift);
      ada_value(d_, op + " scale_q", s.table, 7, key(s, "timesteps", 7), scale);
      modulate(d_, op + " q_in", n1, scale, shift, n1);
    }
    const ArenaMat ctx = reload_mat(d_, f, key(s, "context"), L, s.Dc, op, "context");
    {
      Frame g(d_);  // c_in = modulate(context; prompt rows 1, 0), in place
      const ArenaMat shift = mat(g, 1, s.D, op, "shift_kv");
      const ArenaMat scale = mat(g, 1, s.D, op, "scale_kv");
      if (s.sh.prompt) {
        ada_value(d_, op + " shift_kv", s.prompt_table, 0, key(s, "prompt_timestep", 0), shift);
        ada_value(d_, op + " scale_kv", s.prompt_table, 1, key(s, "prompt_timestep", 1), scale);
      } else {
        table_row(d_, op + " shift_kv", s.prompt_table, 0, shift);
        table_row(d_, op + " scale_kv", s.prompt_table, 1, scale);
      }
      modulate(d_, op + " c_in", ctx, scale, shift, ctx);
    }
    attention(d_, spec, n1, ctx, nullptr, nullptr, o);
    d_.commit(key(s, "attn2"), o.region, o.shape());
    gated_residual(d_, op + " residual", x, o, gate);
    d_.commit(key(s, "x2"), x.region, x.shape());
  }

  // Steps 11–12 of spec §3.3: both directions read the pre-A/V snapshots x2.
  void av_attention() {
    const StreamDesc& v = video_;
    const StreamDesc& a = audio_;
    const std::string op = "av";
    Frame f(d_);
    const ArenaMat vx = reload_mat(d_, f, key(v, "x2"), v.sh.tokens, v.D, op, "video x2");
    const ArenaMat ax = reload_mat(d_, f, key(a, "x2"), a.sh.tokens, a.D, op, "audio x2");
    const ArenaMat o_v = mat(f, v.sh.tokens, v.D, op, "a2v out");
    const ArenaMat o_a = mat(f, a.sh.tokens, a.D, op, "v2a out");
    // A2V: video queries from rows 0/1 of the video A/V table, audio keys/values from rows 0/1
    // of the audio table (scale before shift).
    one_direction("video.a2v", v, a, vx, ax, 0, v.av_module, o_v);
    d_.commit(key(v, "av"), o_v.region, o_v.shape());
    // V2A: audio queries from rows 2/3 of the audio table, video keys/values (the pre-A2V x2)
    // from rows 2/3 of the video table.
    one_direction("audio.v2a", a, v, ax, vx, 2, a.av_module, o_a);
    d_.commit(key(a, "av"), o_a.region, o_a.shape());
    cross_residual("video.a2v", v, vx, o_v);
    cross_residual("audio.v2a", a, ax, o_a);
    d_.commit(key(v, "x3"), vx.region, vx.shape());
    d_.commit(key(a, "x3"), ax.region, ax.shape());
  }

  // x = bf(x + bf(o · g)) with g = row 4 of the stream's A/V table + its cross gate timestep.
  void cross_residual(const std::string& op, const StreamDesc& s, const ArenaMat& x, const ArenaMat& o) {
    Frame f(d_);
    const ArenaMat gate = mat(f, 1, s.D, op, "gate");
    ada_value(d_, op + " gate", s.av_table, 4, key(s, "cross_gate"), gate);
    gated_residual(d_, op + " residual", x, o, gate);
  }

  void one_direction(const std::string& op, const StreamDesc& q, const StreamDesc& kv, const ArenaMat& xq,
                     const ArenaMat& xkv, int row, const std::string& module, const ArenaMat& out) {
    Frame f(d_);
    const ArenaMat q_in = mat(f, q.sh.tokens, q.D, op, "q_in");
    const ArenaMat kv_in = mat(f, kv.sh.tokens, kv.D, op, "kv_in");
    ada_zero_rows(op + " q ada", q.av_table, q, "cross_ss", q.sh.cross_timestep_rows, row, row + 1, xq, q_in);
    ada_zero_rows(op + " kv ada", kv.av_table, kv, "cross_ss", kv.sh.cross_timestep_rows, row, row + 1, xkv, kv_in);
    const RopeKeys q_pe{key(q, "cross_pe.cos"), key(q, "cross_pe.sin"), q.sh.cross_pe};
    const RopeKeys k_pe{key(kv, "cross_pe.cos"), key(kv, "cross_pe.sin"), kv.sh.cross_pe};
    attention(d_, attention_spec(op, module, c_.av_heads(), c_.av_head_dim()), q_in, kv_in, &q_pe, &k_pe, out);
  }

  // Steps 13–14 of spec §3.3.
  void feed_forward(const StreamDesc& s) {
    const std::string op = s.name + ".ff";
    const std::int64_t N = s.sh.tokens, Ts = s.sh.timestep_rows;
    Frame f(d_);
    const ArenaMat x = reload_mat(d_, f, key(s, "x3"), N, s.D, op, "x3");
    const ArenaMat gate = mat(f, Ts, s.D, op, "gate_mlp");
    ada_value(d_, op + " gate_mlp", s.table, 5, key(s, "timesteps", 5), gate);
    const ArenaMat o = mat(f, N, s.D, op, "out");
    {
      Frame g(d_);
      const ArenaMat h = mat(g, N, s.D, op, "h");
      ada_zero_rows(op + " ada", s.table, s, "timesteps", Ts, 4, 3, x, h);
      FfnSpec spec;
      spec.op = op;
      spec.up_weight = s.ff + "net.0.proj.weight";
      spec.down_weight = s.ff + "net.2.weight";
      if (s.ff_bias) {
        spec.up_bias = s.ff + "net.0.proj.bias";
        spec.down_bias = s.ff + "net.2.bias";
      }
      spec.hidden = s.hidden;
      spec.up_rule = t_.variant.ffn_up_bias;
      spec.schedule = t_.schedule.ffn;
      spec.geometry = ffn_geometry(c_, t_.variant, s.hidden, s.D, d_.page_bytes());
      spec.hidden_key = key(s, "ffn.h");
      ffn(d_, spec, h, o);
    }
    d_.commit(key(s, "ff"), o.region, o.shape());
    gated_residual(d_, op + " residual", x, o, gate);
    d_.commit(key(s, "out"), x.region, x.shape());
  }

  Driver& d_;
  const BlockTask& t_;
  const model::ModelConfig& c_;
  float eps_;
  StreamDesc video_, audio_;
};

Bf16Tensor probe(const rt::HostJournal& j, int jb, Branch b, const char* role) {
  const rt::HostJournal::Entry& e = j.get({jb, b, role, 0});
  return Bf16Tensor({1, e.shape.at(0), e.shape.at(1)}, e.data);
}

}  // namespace

BlockShapes block_shapes(const model::ModelConfig& c, const model::BlockInputs& in) {
  return {stream_shapes(c, in.video, "video", c.video_dim(), c.cross_attention_dim, c.video_dim()),
          stream_shapes(c, in.audio, "audio", c.audio_dim(), c.audio_cross_attention_dim, c.audio_dim())};
}

void put_inputs(rt::HostJournal& j, int jblock, const model::ModelConfig& c, const model::BlockInputs& in) {
  put_stream(j, jblock, Branch::video, c, in.video, c.video_dim());
  put_stream(j, jblock, Branch::audio, c, in.audio, c.audio_dim());
}

void block_program(Driver& d, const BlockTask& task) { Program(d, task).run(); }

model::BlockProbes collect_probes(const rt::HostJournal& j, int jb) {
  model::BlockProbes p;
  p.attn1 = probe(j, jb, Branch::video, "attn1");
  p.attn2 = probe(j, jb, Branch::video, "attn2");
  p.audio_attn1 = probe(j, jb, Branch::audio, "attn1");
  p.audio_attn2 = probe(j, jb, Branch::audio, "attn2");
  p.audio_to_video_attn = probe(j, jb, Branch::video, "av");
  p.video_to_audio_attn = probe(j, jb, Branch::audio, "av");
  p.ff = probe(j, jb, Branch::video, "ff");
  p.audio_ff = probe(j, jb, Branch::audio, "ff");
  p.video_out = probe(j, jb, Branch::video, "out");
  p.audio_out = probe(j, jb, Branch::audio, "out");
  return p;
}

}  // namespace psi::exec
