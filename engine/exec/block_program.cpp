#include "engine/exec/block_program.h"

#include <algorithm>
#include <numeric>

#include "engine/error.h"
#include "engine/exec/operators.h"
#include "engine/model/block_catalogue.h"
#include "engine/model/block_order.h"

namespace psi::exec {

namespace {

using rt::Branch;
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

// One modality as the journal holds it.
struct StreamDesc {
  Branch branch;
  std::int64_t D = 0, Dc = 0;
  StreamShapes sh;
  RowTiles tok, ctx;  // token and context row tiles
};

// The program's values (its arithmetic's T): a role of a stream's journal, read by row tile
// (context row tiles for the context); `normed` names rms of it, made when it is read.
struct Value {
  const StreamDesc* s = nullptr;
  std::string role;
  bool context = false;
  const char* normed = nullptr;
};
// A modulation input: role (role.<row> when indexed) with 1 row or one per token.
struct Timestep {
  const StreamDesc* s = nullptr;
  std::string role;
  std::int64_t rows = 0;  // 0: not given
  bool indexed = true;
  std::int64_t numel() const { return rows; }
};
struct Rope {
  const StreamDesc* s = nullptr;
  std::string role;
  Shape whole;  // [1, H, T, half]
};
// model::StreamInputs's members as journal roles (put_stream's).
struct Inputs {
  const StreamDesc* desc;
  Value x, context;
  Timestep timesteps, prompt_timestep;
  Rope pe, cross_pe;
  Timestep cross_scale_shift_timestep, cross_gate_timestep;
};
struct BlockIn {
  Inputs video, audio;
};

// model::BlockWeights's members as checkpoint names (modules end in '.', so that a layer's
// tensor is module + weight_of(layer)) and sizes.
struct AttnModule {
  std::string prefix;
  std::int64_t heads = 0, head_dim = 0;
};
struct FfnModule {
  std::string prefix;
  std::int64_t hidden = 0;
  bool bias = false;
};
struct Weights {
  AttnModule attn1, attn2, audio_to_video_attn, audio_attn1, audio_attn2, video_to_audio_attn;
  FfnModule ff, audio_ff;
  std::string scale_shift_table, prompt_scale_shift_table, scale_shift_table_a2v_ca_video;
  std::string audio_scale_shift_table, audio_prompt_scale_shift_table, scale_shift_table_a2v_ca_audio;
};

Inputs stream_inputs(const StreamDesc& s) {
  const StreamShapes& sh = s.sh;
  return {&s,
          {&s, "x"},
          {&s, "context", true},
          {&s, "timesteps", sh.timestep_rows},
          {&s, "prompt_timestep", sh.prompt ? 1 : 0},
          {&s, "pe", sh.pe},
          {&s, "cross_pe", sh.cross_pe},
          {&s, "cross_ss", sh.cross_timestep_rows},
          {&s, "cross_gate", 1, false}};
}

// The block order's arithmetic that plans or runs the block on a Driver (model/block_order.h
// gives the steps; this gives their schedule). Audio's self- and text attention run first. An
// attention step is a key loop (each key row tile's input made and its k, v journaled) and a
// query loop whose frame per row tile holds the attention, the tap's commit, the residual and
// the state's commit; a feed-forward step is one such loop. Each row tile reloads what it needs
// from the journal and commits what it produces, so no tensor of a whole stream is ever in the
// arena (but the whole k and v of MATH attention).
class Program {
 public:
  using T = Value;
  using Taps = model::BlockTaps;
  struct PostSa {
    Value x, normed;
  };
  // The backend's kernels key on no product site.
  struct NoSite {};
  // The schedule the plans and transport runs are measured on: audio's attentions first.
  static constexpr bool audio_first = true;

  Program(Driver& d, const BlockTask& t) : d_(d), t_(t), c_(t.config), eps_(t.config.norm_eps) {
    const std::string p = model::block_prefix(t.index);
    const std::int64_t R = t.row_tile;
    const auto mod = [&](const char* module) { return p + module + "."; };
    const auto attn = [&](const char* module, std::int64_t heads, std::int64_t head_dim) {
      return AttnModule{mod(module), heads, head_dim};
    };
    const model::StreamNames &v = model::kVideoNames, &a = model::kAudioNames;
    w_ = {attn(v.attn1, c_.video_heads, c_.video_head_dim),
          attn(v.attn2, c_.video_heads, c_.video_head_dim),
          attn(v.av_attn, c_.av_heads(), c_.av_head_dim()),
          attn(a.attn1, c_.audio_heads, c_.audio_head_dim),
          attn(a.attn2, c_.audio_heads, c_.audio_head_dim),
          attn(a.av_attn, c_.av_heads(), c_.av_head_dim()),
          {mod(v.ff), c_.video_hidden(), c_.features.ff_bias},
          {mod(a.ff), c_.audio_hidden(), c_.features.audio_ff_bias},
          p + v.table,
          p + v.prompt_table,
          p + v.av_table,
          p + a.table,
          p + a.prompt_table,
          p + a.av_table};
    video_ = {Branch::video, c_.video_dim(), c_.cross_attention_dim, t.shapes.video,
              {t.shapes.video.tokens, R}, {t.shapes.video.context_rows, R}};
    audio_ = {Branch::audio, c_.audio_dim(), c_.audio_cross_attention_dim, t.shapes.audio,
              {t.shapes.audio.tokens, R}, {t.shapes.audio.context_rows, R}};
    in_ = {stream_inputs(video_), stream_inputs(audio_)};
  }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  void run() const { model::block_in_order(*this, c_, w_, in_); }

  static NoSite site(const char*) { return {}; }
  const Value& load(const Value& v) const { return v; }

  template <class St, class P>
  PostSa post_sa_step(const St& st, P&) const {
    attention(st);
    const auto& r = st.residual;
    return {{st.q.in.desc, r.state}, {st.q.in.desc, r.state, false, r.normed}};
  }
  template <class St, class P>
  Value attention_step(const St& st, P&) const {
    attention(st);
    return {st.q.in.desc, st.residual.state};
  }

  template <class St, class P>
  void ffn_step(const St& st, P&) const {
    const StreamDesc& s = *st.s.in.desc;
    const std::string op = std::string(st.s.name) + "." + st.name;
    FfnSpec spec;
    spec.op = op;
    spec.up_weight = st.module.prefix + model::weight_of(model::layer::ff_up);
    spec.down_weight = st.module.prefix + model::weight_of(model::layer::ff_down);
    if (st.module.bias) {
      spec.up_bias = st.module.prefix + model::bias_of(model::layer::ff_up);
      spec.down_bias = st.module.prefix + model::bias_of(model::layer::ff_down);
    }
    spec.hidden = st.module.hidden;
    spec.up_rule = t_.variant.ffn_up_bias;
    spec.product = t_.variant.product;
    spec.schedule = t_.schedule.ffn;
    spec.geometry = ffn_geometry(c_, t_.variant, st.module.hidden, s.D, d_.page_bytes());
    for (std::int64_t t = 0; t < s.tok.count(); ++t) {
      Frame f(d_);
      const ArenaMat o = alloc_mat(f, Pool::scratch, s.tok.rows(t), s.D, op, "out", int(t));
      {
        Frame g(d_);
        const ArenaMat h = make_input(st.input, op, t)(g);
        spec.hidden_key = key(s, "ffn.h", t * spec.geometry.n_hidden);
        ffn(d_, spec, h, o);
      }
      d_.commit(key(s, st.tap.role, t), o.region, o.shape());
      add_residual(f, st.residual, s, op, t, o);
    }
  }

 private:
  rt::JournalKey key(const StreamDesc& s, const std::string& role, std::int64_t tile = 0) const {
    return {t_.jblock, s.branch, role, int(tile)};
  }

  // Row tile t of v, reloaded into f.
  ArenaMat reload(Frame& f, const Value& v, std::int64_t t, const std::string& op) const {
    const StreamDesc& s = *v.s;
    return reload_mat(d_, f, key(s, v.role, t), v.context ? s.ctx.rows(t) : s.tok.rows(t), v.context ? s.Dc : s.D, op,
                      v.role, int(t));
  }

  // A modulation value of s for row tile t ([rows, D] per token, [1, D] per batch or a table
  // row alone), allocated in f.
  template <class M>
  ArenaMat mod(Frame& f, const StreamDesc& s, const std::string& op, const M& m, std::int64_t t) const {
    const bool per_token = m.ts && m.ts->rows != 1;
    const ArenaMat dst = alloc_mat(f, Pool::scratch, per_token ? s.tok.rows(t) : 1, s.D, op, m.name, int(t));
    if (!m.ts) {
      table_row(d_, op + " " + m.name, *m.table, m.row, dst);
    } else {
      const std::string role = m.ts->indexed ? indexed(m.ts->role.c_str(), m.ts_row) : m.ts->role;
      ada_value(d_, op + " " + m.name, *m.table, m.row, key(s, role, per_token ? t : 0), dst);
    }
    return dst;
  }

  // Row tile t of a step's input, made in the frame the operator gives it.
  template <class I>
  MakeInput make_input(const I& in, const std::string& op, std::int64_t t) const {
    return [this, &in, op, t](Frame& f) {
      using model::block_order::Prep;
      const std::string at = in.side ? op + " " + in.side : op;
      const StreamDesc& s = *in.x->s;
      const ArenaMat x = reload(f, *in.x, t, at);
      if (in.x->normed) rms_norm(d_, at + " " + in.x->normed, x, "", eps_, x, t_.variant.norm);
      if (in.prep == Prep::ada_zero) {
        Frame g(d_);
        const std::string sub = at + " ada";
        const ArenaMat shift = mod(g, s, sub, in.shift, t);
        const ArenaMat scale = mod(g, s, sub, in.scale, t);
        ada_zero(d_, sub, x, scale, shift, eps_, x, t_.variant.norm);
      } else if (in.prep == Prep::modulate) {
        Frame g(d_);
        const ArenaMat shift = mod(g, s, at, in.shift, t);
        const ArenaMat scale = mod(g, s, at, in.scale, t);
        modulate(d_, at + " " + in.name, x, scale, shift, x);
      }
      return x;
    };
  }

  RopeKeys rope_keys(const Rope& r, std::int64_t t) const {
    return {key(*r.s, r.role + ".cos", t), key(*r.s, r.role + ".sin", t), {1, r.whole.at(1), r.s->tok.rows(t), r.whole.at(3)}};
  }

  AttentionSpec attention_spec(const std::string& op, const AttnModule& m) const {
    return {op, m.prefix, m.heads, m.head_dim, c_.features.gated_attention, t_.variant.sdpa(m.head_dim), eps_,
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

  // x = x + o · gate (or x + o) for row tile t, committed as the residual's state.
  template <class R>
  void add_residual(Frame& f, const R& r, const StreamDesc& s, const std::string& op, std::int64_t t,
                    const ArenaMat& o) const {
    const ArenaMat x = reload(f, *r.x, t, op);
    if (r.gate) {
      const ArenaMat gate = mod(f, s, op, *r.gate, t);
      gated_residual(d_, op + (r.normed ? " post_sa residual" : " residual"), x, o, gate);
    } else {
      residual(d_, op + " residual", x, o);
    }
    d_.commit(key(s, r.state, t), x.region, x.shape());
  }

  // The key loop over the key input's row tiles, then the query loop: per query row tile the
  // attention, its tap, the residual and its state.
  template <class St>
  void attention(const St& st) const {
    const StreamDesc& q = *st.q.in.desc;
    const std::string op = std::string(st.q.name) + "." + st.name;
    const AttentionSpec spec = attention_spec(op, st.module);
    const auto& k_in = st.keys ? *st.keys : st.query;
    const RowTiles& k_tiles = k_in.x->context ? k_in.x->s->ctx : k_in.x->s->tok;
    const KeyStore keys = key_store(q, st.tap.role, k_tiles.n, spec);
    for (std::int64_t t = 0; t < k_tiles.count(); ++t) {
      const RopeKeys pe = st.k_rope ? rope_keys(*st.k_rope, t) : RopeKeys{};
      project_keys(d_, spec, keys, k_tiles.start(t), k_tiles.rows(t), int(t), make_input(k_in, op, t),
                   st.k_rope ? &pe : nullptr);
    }
    for (std::int64_t t = 0; t < q.tok.count(); ++t) {
      Frame f(d_);
      const RopeKeys pe = st.q_rope ? rope_keys(*st.q_rope, t) : RopeKeys{};
      const ArenaMat o = attend(d_, f, spec, q.tok.rows(t), q.D, int(t), make_input(st.query, op, t),
                                st.q_rope ? &pe : nullptr, keys);
      d_.commit(key(q, st.tap.role, t), o.region, o.shape());
      add_residual(f, st.residual, q, op, t, o);
    }
  }

  Driver& d_;
  const BlockTask& t_;
  const model::ModelConfig& c_;
  float eps_;
  Weights w_;
  StreamDesc video_, audio_;
  BlockIn in_;
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
  namespace bo = model::block_order;
  model::BlockTaps p;
  const auto stream = [&](Branch b, const bo::StreamTaps<model::BlockTaps>& taps, std::int64_t tokens) {
    for (const auto& tap : {taps.attn1, taps.attn2, taps.av, taps.ff, taps.out})
      p.*tap.member = probe(j, jb, b, tap.role, RowTiles{tokens, row_tile});
  };
  stream(Branch::video, bo::video_taps<model::BlockTaps>(), shapes.video.tokens);
  stream(Branch::audio, bo::audio_taps<model::BlockTaps>(), shapes.audio.tokens);
  return p;
}

}  // namespace psi::exec
