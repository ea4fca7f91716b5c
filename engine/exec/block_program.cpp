#include "engine/exec/block_program.h"

#include <algorithm>
#include <numeric>

#include "engine/error.h"
#include "engine/exec/operators.h"
#include "engine/model/block_catalogue.h"

namespace psi::exec {

namespace {

using rt::Branch;
namespace ada_row = model::ada_row;
namespace prompt_row = model::prompt_row;
namespace av_row = model::av_row;

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
  if (sh.prompt) check_shape(s.prompt_timestep, {1, 1, prompt_row::count * D}, n + ".prompt_timestep");
  check_rope(s.pe, sh.tokens, inner, n + ".pe");
  check_rope(s.cross_pe, sh.tokens, c.av_inner(), n + ".cross_pe");
  sh.pe = s.pe.cos.shape;
  sh.cross_pe = s.cross_pe.cos.shape;
  check_shape(s.cross_scale_shift_timestep, {1, -1, av_row::timestep_rows * D}, n + ".cross_scale_shift_timestep");
  sh.cross_timestep_rows = s.cross_scale_shift_timestep.dim(1);
  check_rows(sh.cross_timestep_rows, sh.tokens, n + ".cross_scale_shift_timestep");
  check_shape(s.cross_gate_timestep, {1, 1, D}, n + ".cross_gate_timestep");
  return sh;
}

std::string indexed(const char* role, int row) { return std::string(role) + "." + std::to_string(row); }

// Rows [r0, r0 + n) of a [1, T, W] tensor, columns [c0, c0 + D), as [n, D].
std::vector<Bf16> rows_of(const Bf16Tensor& t, std::int64_t r0, std::int64_t n, std::int64_t c0, std::int64_t D) {
  const std::int64_t width = t.dim(2);
  std::vector<Bf16> out(std::size_t(n * D));
  for (std::int64_t i = 0; i < n; ++i)
    std::copy_n(t.data.begin() + (r0 + i) * width + c0, D, out.begin() + i * D);
  return out;
}

// Tokens [r0, r0 + n) of a RoPE table [1, H, T, half] as [1, H, n, half].
std::vector<Bf16> rope_rows(const Bf16Tensor& t, std::int64_t r0, std::int64_t n) {
  const std::int64_t H = t.dim(1), T = t.dim(2), half = t.dim(3);
  std::vector<Bf16> out(std::size_t(H * n * half));
  for (std::int64_t h = 0; h < H; ++h)
    std::copy_n(t.data.begin() + (h * T + r0) * half, n * half, out.begin() + h * n * half);
  return out;
}

// A [1, T, rows·D] modulation tensor: AdaLN row r of row tile t under role.r (tile 0 when T = 1).
void put_modulation(rt::HostJournal& j, int jb, Branch b, const char* role, const Bf16Tensor& t, int rows,
                    std::int64_t D, const RowTiles& tiles) {
  const bool per_token = t.dim(1) != 1;
  for (int r = 0; r < rows; ++r)
    for (std::int64_t i = 0; i < (per_token ? tiles.count() : 1); ++i) {
      const std::int64_t r0 = per_token ? tiles.start(i) : 0, n = per_token ? tiles.rows(i) : 1;
      j.put({jb, b, indexed(role, r), int(i)}, {n, D}, rows_of(t, r0, n, r * D, D));
    }
}

void put_stream(rt::HostJournal& j, int jb, Branch b, const model::ModelConfig& c, const model::StreamInputs& s,
                std::int64_t D, std::int64_t R) {
  auto key = [&](const std::string& role, std::int64_t tile = 0) { return rt::JournalKey{jb, b, role, int(tile)}; };
  const RowTiles tok{s.x.dim(1), R}, ctx{s.context.dim(1), R};
  for (std::int64_t t = 0; t < tok.count(); ++t) {
    const std::int64_t r0 = tok.start(t), n = tok.rows(t);
    j.put(key("x", t), {n, D}, rows_of(s.x, r0, n, 0, D));
    for (const auto& [role, table] : {std::pair<const char*, const ops::RopeTables*>{"pe", &s.pe}, {"cross_pe", &s.cross_pe}}) {
      const Shape shape{1, table->cos.dim(1), n, table->cos.dim(3)};
      j.put(key(std::string(role) + ".cos", t), shape, rope_rows(table->cos, r0, n));
      j.put(key(std::string(role) + ".sin", t), shape, rope_rows(table->sin, r0, n));
    }
  }
  put_modulation(j, jb, b, "timesteps", s.timesteps, c.features.ada_rows(), D, tok);
  for (std::int64_t t = 0; t < ctx.count(); ++t)
    j.put(key("context", t), {ctx.rows(t), s.context.dim(2)}, rows_of(s.context, ctx.start(t), ctx.rows(t), 0, s.context.dim(2)));
  if (c.features.cross_attention_adaln && s.prompt_timestep.numel() > 0)
    put_modulation(j, jb, b, "prompt_timestep", s.prompt_timestep, prompt_row::count, D, tok);
  put_modulation(j, jb, b, "cross_ss", s.cross_scale_shift_timestep, av_row::timestep_rows, D, tok);
  j.put(key("cross_gate"), {1, D}, s.cross_gate_timestep.span());
}

// One modality's names and sizes.
struct StreamDesc {
  Branch branch;
  std::string name;  // "video" | "audio"
  std::string attn1, attn2, ff, av_module, table, prompt_table, av_table;  // checkpoint names (full)
  std::int64_t D = 0, Dc = 0, heads = 0, head_dim = 0, hidden = 0;
  bool ff_bias = false;
  StreamShapes sh;
  RowTiles tok, ctx;  // token and context row tiles
};

class Program {
 public:
  Program(Driver& d, const BlockTask& t) : d_(d), t_(t), c_(t.config), eps_(t.config.norm_eps) {
    const std::string p = model::block_prefix(t.index);
    const std::int64_t R = t.row_tile;
    // Modules end in '.', so that a layer's tensor is module + weight_of(layer).
    const auto mod = [&](const char* module) { return p + module + "."; };
    const model::StreamNames &v = model::kVideoNames, &a = model::kAudioNames;
    video_ = {Branch::video, "video", mod(v.attn1), mod(v.attn2), mod(v.ff), mod(v.av_attn), p + v.table,
              p + v.prompt_table, p + v.av_table, c_.video_dim(), c_.cross_attention_dim, c_.video_heads,
              c_.video_head_dim, c_.video_hidden(), c_.features.ff_bias, t.shapes.video,
              {t.shapes.video.tokens, R}, {t.shapes.video.context_rows, R}};
    audio_ = {Branch::audio, "audio", mod(a.attn1), mod(a.attn2), mod(a.ff), mod(a.av_attn), p + a.table,
              p + a.prompt_table, p + a.av_table, c_.audio_dim(), c_.audio_cross_attention_dim, c_.audio_heads,
              c_.audio_head_dim, c_.audio_hidden(), c_.features.audio_ff_bias, t.shapes.audio,
              {t.shapes.audio.tokens, R}, {t.shapes.audio.context_rows, R}};
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
  rt::JournalKey key(const StreamDesc& s, const std::string& role, std::int64_t tile = 0) const {
    return {t_.jblock, s.branch, role, int(tile)};
  }

  // dst = the AdaLN value table[row] + role.row (a table and its timestep share row numbers) for
  // row tile t ([rows, D] per token, [1, D] per batch), allocated in f.
  ArenaMat ada(Frame& f, const StreamDesc& s, const std::string& op, const std::string& name, const std::string& table,
               int row, const char* role, std::int64_t ts_rows, std::int64_t t) {
    const bool per_token = ts_rows != 1;
    const ArenaMat dst = alloc_mat(f, Pool::scratch, per_token ? s.tok.rows(t) : 1, s.D, op, name, int(t));
    ada_value(d_, op + " " + name, table, row, key(s, indexed(role, row), per_token ? t : 0), dst);
    return dst;
  }

  // x = ada_zero(x; table[scale_row] + S, table[shift_row] + S) in place for row tile t.
  void ada_zero_tile(const std::string& op, const StreamDesc& s, const std::string& table, const char* role,
                     std::int64_t ts_rows, int scale_row, int shift_row, std::int64_t t, const ArenaMat& x) {
    Frame f(d_);
    const ArenaMat shift = ada(f, s, op, "shift", table, shift_row, role, ts_rows, t);
    const ArenaMat scale = ada(f, s, op, "scale", table, scale_row, role, ts_rows, t);
    ada_zero(d_, op, x, scale, shift, eps_, x, t_.variant.norm);
  }

  // State role of row tile t, reloaded into f.
  ArenaMat reload(Frame& f, const StreamDesc& s, const char* role, std::int64_t t, const std::string& op) {
    return reload_mat(d_, f, key(s, role, t), s.tok.rows(t), s.D, op, role, int(t));
  }

  RopeKeys rope_keys(const StreamDesc& s, const char* role, const Shape& whole, std::int64_t t) const {
    return {key(s, std::string(role) + ".cos", t), key(s, std::string(role) + ".sin", t),
            {1, whole.at(1), s.tok.rows(t), whole.at(3)}};
  }

  AttentionSpec attention_spec(const std::string& op, const std::string& module, std::int64_t heads,
                               std::int64_t head_dim) const {
    return {op, module, heads, head_dim, c_.features.gated_attention, t_.variant.sdpa(head_dim), eps_,
            t_.variant.product, t_.variant.norm};
  }

  // Key pieces of gcd(R, key tile) rows: a key block of the online form is whole pieces, and so
  // is every key row tile (tiling.h). MATH reads all keys at once: pieces of R rows.
  KeyStore key_store(const StreamDesc& owner, const std::string& role, std::int64_t keys,
                     const AttentionSpec& spec) const {
    const std::int64_t piece =
        spec.sdpa.form == ops::SoftmaxForm::online ? std::gcd(t_.row_tile, spec.sdpa.key_tile) : t_.row_tile;
    return {key(owner, role + ".k"), key(owner, role + ".v"), keys, piece};
  }

  // Steps 1–4 of spec §3.3 per row tile: h = ada_zero(x; rows 1, 0) is both the query and the
  // key side; x1 = bf(x + bf(attn1 · gate_msa)).
  void self_attention(const StreamDesc& s) {
    const std::string op = s.name + ".attn1";
    const AttentionSpec spec = attention_spec(op, s.attn1, s.heads, s.head_dim);
    const KeyStore keys = key_store(s, "attn1", s.tok.n, spec);
    const auto h_of = [&](std::int64_t t) -> MakeInput {
      return [this, &s, op, t](Frame& f) {
        const ArenaMat x = reload(f, s, "x", t, op);
        ada_zero_tile(op + " ada", s, s.table, "timesteps", s.sh.timestep_rows, ada_row::scale_msa,
                      ada_row::shift_msa, t, x);
        return x;
      };
    };
    for (std::int64_t t = 0; t < s.tok.count(); ++t) {
      const RopeKeys pe = rope_keys(s, "pe", s.sh.pe, t);
      project_keys(d_, spec, keys, s.tok.start(t), s.tok.rows(t), int(t), h_of(t), &pe);
    }
    for (std::int64_t t = 0; t < s.tok.count(); ++t) {
      Frame f(d_);
      const RopeKeys pe = rope_keys(s, "pe", s.sh.pe, t);
      const ArenaMat o = attend(d_, f, spec, s.tok.rows(t), s.D, int(t), h_of(t), &pe, keys);
      d_.commit(key(s, "attn1", t), o.region, o.shape());
      const ArenaMat x = reload(f, s, "x", t, op);
      const ArenaMat gate = ada(f, s, op, "gate_msa", s.table, ada_row::gate_msa, "timesteps", s.sh.timestep_rows, t);
      gated_residual(d_, op + " post_sa residual", x, o, gate);
      d_.commit(key(s, "x1", t), x.region, x.shape());
    }
  }

  // Steps 5–10 of spec §3.3. Queries: n1 = rms(x1) (post_sa's normed output), modulated by
  // scale_q/shift_q under CA-AdaLN; keys: the context, modulated by the prompt rows.
  void text_attention(const StreamDesc& s) {
    const std::string op = s.name + ".attn2";
    const bool ca_adaln = c_.features.cross_attention_adaln;
    const AttentionSpec spec = attention_spec(op, s.attn2, s.heads, s.head_dim);
    const KeyStore keys = key_store(s, "attn2", s.ctx.n, spec);
    for (std::int64_t t = 0; t < s.ctx.count(); ++t) {
      const MakeInput c_in = [this, &s, op, t, ca_adaln](Frame& f) {
        const ArenaMat ctx = reload_mat(d_, f, key(s, "context", t), s.ctx.rows(t), s.Dc, op, "context", int(t));
        if (ca_adaln) {
          Frame g(d_);
          const ArenaMat shift = alloc_mat(g, Pool::scratch, 1, s.D, op, "shift_kv", int(t));
          const ArenaMat scale = alloc_mat(g, Pool::scratch, 1, s.D, op, "scale_kv", int(t));
          const int shift_row = prompt_row::shift_kv, scale_row = prompt_row::scale_kv;
          if (s.sh.prompt) {
            ada_value(d_, op + " shift_kv", s.prompt_table, shift_row, key(s, indexed("prompt_timestep", shift_row)),
                      shift);
            ada_value(d_, op + " scale_kv", s.prompt_table, scale_row, key(s, indexed("prompt_timestep", scale_row)),
                      scale);
          } else {
            table_row(d_, op + " shift_kv", s.prompt_table, shift_row, shift);
            table_row(d_, op + " scale_kv", s.prompt_table, scale_row, scale);
          }
          modulate(d_, op + " c_in", ctx, scale, shift, ctx);
        }
        return ctx;
      };
      project_keys(d_, spec, keys, s.ctx.start(t), s.ctx.rows(t), int(t), c_in, nullptr);
    }
    for (std::int64_t t = 0; t < s.tok.count(); ++t) {
      const MakeInput q_in = [this, &s, op, t, ca_adaln](Frame& f) {
        const ArenaMat n1 = reload(f, s, "x1", t, op);
        rms_norm(d_, op + " n1", n1, "", eps_, n1, t_.variant.norm);
        if (ca_adaln) {
          Frame g(d_);
          const ArenaMat shift = ada(g, s, op, "shift_q", s.table, ada_row::shift_q, "timesteps", s.sh.timestep_rows, t);
          const ArenaMat scale = ada(g, s, op, "scale_q", s.table, ada_row::scale_q, "timesteps", s.sh.timestep_rows, t);
          modulate(d_, op + " q_in", n1, scale, shift, n1);
        }
        return n1;
      };
      Frame f(d_);
      const ArenaMat o = attend(d_, f, spec, s.tok.rows(t), s.D, int(t), q_in, nullptr, keys);
      d_.commit(key(s, "attn2", t), o.region, o.shape());
      const ArenaMat x = reload(f, s, "x1", t, op);
      if (ca_adaln) {
        const ArenaMat gate = ada(f, s, op, "gate_q", s.table, ada_row::gate_q, "timesteps", s.sh.timestep_rows, t);
        gated_residual(d_, op + " residual", x, o, gate);
      } else {
        residual(d_, op + " residual", x, o);
      }
      d_.commit(key(s, "x2", t), x.region, x.shape());
    }
  }

  // ada_zero(x2 of row tile t; A/V table rows scale_row, shift_row + cross_ss).
  MakeInput av_input(const StreamDesc& s, const std::string& op, int scale_row, int shift_row, std::int64_t t) {
    return [this, &s, op, scale_row, shift_row, t](Frame& f) {
      const ArenaMat x = reload(f, s, "x2", t, op);
      ada_zero_tile(op + " ada", s, s.av_table, "cross_ss", s.sh.cross_timestep_rows, scale_row, shift_row, t, x);
      return x;
    };
  }

  // Steps 11–12 of spec §3.3: both directions read the pre-A/V snapshots x2.
  void av_attention() {
    // A2V: video queries from the a2v rows of the video A/V table, audio keys/values from those
    // of the audio table.
    one_direction("video.a2v", video_, audio_, av_row::a2v_scale, av_row::a2v_shift, video_.av_module);
    // V2A: audio queries from the v2a rows of the audio table, video keys/values (the pre-A2V
    // x2) from those of the video table.
    one_direction("audio.v2a", audio_, video_, av_row::v2a_scale, av_row::v2a_shift, audio_.av_module);
  }

  void one_direction(const std::string& op, const StreamDesc& q, const StreamDesc& kv, int scale_row, int shift_row,
                     const std::string& module) {
    const AttentionSpec spec = attention_spec(op, module, c_.av_heads(), c_.av_head_dim());
    const KeyStore keys = key_store(q, "av", kv.tok.n, spec);
    for (std::int64_t t = 0; t < kv.tok.count(); ++t) {
      const RopeKeys pe = rope_keys(kv, "cross_pe", kv.sh.cross_pe, t);
      project_keys(d_, spec, keys, kv.tok.start(t), kv.tok.rows(t), int(t),
                   av_input(kv, op + " kv", scale_row, shift_row, t), &pe);
    }
    for (std::int64_t t = 0; t < q.tok.count(); ++t) {
      Frame f(d_);
      const RopeKeys pe = rope_keys(q, "cross_pe", q.sh.cross_pe, t);
      const ArenaMat o =
          attend(d_, f, spec, q.tok.rows(t), q.D, int(t), av_input(q, op + " q", scale_row, shift_row, t), &pe, keys);
      d_.commit(key(q, "av", t), o.region, o.shape());
      // x3 = bf(x2 + bf(o · g)), g = the gate row of the stream's A/V table + its cross gate
      // timestep.
      const ArenaMat x = reload(f, q, "x2", t, op);
      const ArenaMat gate = alloc_mat(f, Pool::scratch, 1, q.D, op, "gate", int(t));
      ada_value(d_, op + " gate", q.av_table, av_row::gate, key(q, "cross_gate"), gate);
      gated_residual(d_, op + " residual", x, o, gate);
      d_.commit(key(q, "x3", t), x.region, x.shape());
    }
  }

  // Steps 13–14 of spec §3.3 per row tile.
  void feed_forward(const StreamDesc& s) {
    const std::string op = s.name + ".ff";
    FfnSpec spec;
    spec.op = op;
    spec.up_weight = s.ff + model::weight_of(model::layer::ff_up);
    spec.down_weight = s.ff + model::weight_of(model::layer::ff_down);
    if (s.ff_bias) {
      spec.up_bias = s.ff + model::bias_of(model::layer::ff_up);
      spec.down_bias = s.ff + model::bias_of(model::layer::ff_down);
    }
    spec.hidden = s.hidden;
    spec.up_rule = t_.variant.ffn_up_bias;
    spec.product = t_.variant.product;
    spec.schedule = t_.schedule.ffn;
    spec.geometry = ffn_geometry(c_, t_.variant, s.hidden, s.D, d_.page_bytes());
    for (std::int64_t t = 0; t < s.tok.count(); ++t) {
      Frame f(d_);
      const ArenaMat o = alloc_mat(f, Pool::scratch, s.tok.rows(t), s.D, op, "out", int(t));
      {
        Frame g(d_);
        const ArenaMat h = reload(g, s, "x3", t, op);
        ada_zero_tile(op + " ada", s, s.table, "timesteps", s.sh.timestep_rows, ada_row::scale_mlp,
                      ada_row::shift_mlp, t, h);
        spec.hidden_key = key(s, "ffn.h", t * spec.geometry.n_hidden);
        ffn(d_, spec, h, o);
      }
      d_.commit(key(s, "ff", t), o.region, o.shape());
      const ArenaMat x = reload(f, s, "x3", t, op);
      const ArenaMat gate = ada(f, s, op, "gate_mlp", s.table, ada_row::gate_mlp, "timesteps", s.sh.timestep_rows, t);
      gated_residual(d_, op + " residual", x, o, gate);
      d_.commit(key(s, "out", t), x.region, x.shape());
    }
  }

  Driver& d_;
  const BlockTask& t_;
  const model::ModelConfig& c_;
  float eps_;
  StreamDesc video_, audio_;
};

// A probe [1, N, D] from its row tiles.
Bf16Tensor probe(const rt::HostJournal& j, int jb, Branch b, const char* role, const RowTiles& tok) {
  std::vector<Bf16> data;
  std::int64_t cols = 0;
  for (std::int64_t t = 0; t < tok.count(); ++t) {
    const rt::HostJournal::Entry& e = j.get({jb, b, role, int(t)});
    cols = e.shape.at(1);
    data.insert(data.end(), e.data.begin(), e.data.end());
  }
  return Bf16Tensor({1, tok.n, cols}, std::move(data));
}

StreamShapes counted_stream(const model::ModelConfig& c, std::int64_t N, std::int64_t L, const TokenCounts& n,
                            std::int64_t D, std::int64_t heads) {
  StreamShapes sh;
  sh.tokens = N;
  sh.context_rows = L;
  sh.timestep_rows = n.per_token_timesteps ? N : 1;
  sh.cross_timestep_rows = sh.timestep_rows;
  sh.prompt = c.features.cross_attention_adaln && n.prompt_timestep;
  sh.pe = {1, heads, N, D / (2 * heads)};
  sh.cross_pe = {1, heads, N, c.av_inner() / (2 * heads)};
  return sh;
}

StreamShapes full_tiles(StreamShapes s, std::int64_t rows) {
  s.tokens = std::max(s.tokens, rows);
  s.context_rows = std::max(s.context_rows, rows);
  s.timestep_rows = s.tokens;
  s.cross_timestep_rows = s.tokens;
  s.pe.at(2) = s.tokens;
  s.cross_pe.at(2) = s.tokens;
  return s;
}

}  // namespace

BlockShapes block_shapes(const model::ModelConfig& c, const model::BlockInputs& in) {
  return {stream_shapes(c, in.video, "video", c.video_dim(), c.cross_attention_dim, c.video_dim()),
          stream_shapes(c, in.audio, "audio", c.audio_dim(), c.audio_cross_attention_dim, c.audio_dim())};
}

BlockShapes block_shapes(const model::ModelConfig& c, const TokenCounts& n) {
  if (n.video <= 0 || n.audio <= 0 || n.context <= 0)
    throw Error("block shapes: token counts must be positive (video " + std::to_string(n.video) + ", audio " +
                std::to_string(n.audio) + ", context " + std::to_string(n.context) + ")");
  return {counted_stream(c, n.video, n.context, n, c.video_dim(), c.video_heads),
          counted_stream(c, n.audio, n.context, n, c.audio_dim(), c.audio_heads)};
}

BlockShapes full_tile_shapes(const BlockShapes& b, std::int64_t rows) {
  return {full_tiles(b.video, rows), full_tiles(b.audio, rows)};
}

void put_inputs(rt::HostJournal& j, int jblock, const model::ModelConfig& c, const model::BlockInputs& in,
                std::int64_t row_tile) {
  put_stream(j, jblock, Branch::video, c, in.video, c.video_dim(), row_tile);
  put_stream(j, jblock, Branch::audio, c, in.audio, c.audio_dim(), row_tile);
}

void block_program(Driver& d, const BlockTask& task) { Program(d, task).run(); }

model::BlockTaps collect_probes(const rt::HostJournal& j, int jb, const BlockShapes& shapes, std::int64_t row_tile) {
  const RowTiles v{shapes.video.tokens, row_tile}, a{shapes.audio.tokens, row_tile};
  model::BlockTaps p;
  p.attn1 = probe(j, jb, Branch::video, "attn1", v);
  p.attn2 = probe(j, jb, Branch::video, "attn2", v);
  p.audio_attn1 = probe(j, jb, Branch::audio, "attn1", a);
  p.audio_attn2 = probe(j, jb, Branch::audio, "attn2", a);
  p.audio_to_video_attn = probe(j, jb, Branch::video, "av", v);
  p.video_to_audio_attn = probe(j, jb, Branch::audio, "av", a);
  p.ff = probe(j, jb, Branch::video, "ff", v);
  p.audio_ff = probe(j, jb, Branch::audio, "ff", a);
  p.video_out = probe(j, jb, Branch::video, "out", v);
  p.audio_out = probe(j, jb, Branch::audio, "out", a);
  return p;
}

}  // namespace psi::exec
