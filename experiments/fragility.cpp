#include "experiments/fragility.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/model/variant.h"
#include "engine/official/op_observer.h"
#include "engine/ops/attention.h"
#include "engine/ops/gemm.h"
#include "experiments/trajectory_ops.h"
#include "oracle/fixed_dot.h"

namespace psi::exp {

namespace {

// `v` with one shape's kernel choice replaced.
model::NumericsVariant with_choice(const model::NumericsVariant& v, const official::ShapeKey& key, official::KernelChoice c) {
  official::KernelConfig changed = v.product.kernels ? *v.product.kernels : official::KernelConfig{};
  changed.set(key, c);
  return v.with_kernels(std::make_shared<const official::KernelConfig>(std::move(changed)));
}

// The BF16 value next to `b` upward (+1) or downward (-1) on the real line.
double neighbour(Bf16 b, int dir) {
  const bool negative = b.bits & 0x8000;
  std::uint16_t bits = b.bits;
  if ((bits & 0x7fff) == 0) bits = dir > 0 ? 0x0001 : 0x8001;
  else bits = std::uint16_t(bits + ((dir > 0) != negative ? 1 : -1));
  return double(Bf16::from_bits(bits).to_float());
}

// v's distance from the nearest rounding boundary around its BF16 rounding, as a fraction of
// the gap between the two boundaries.
double margin(double v) {
  const Bf16 b = bf16_rne(float(v));
  const double x = b.to_float(), lo = (neighbour(b, -1) + x) / 2, hi = (neighbour(b, +1) + x) / 2;
  return std::max(0.0, std::min(v - lo, hi - v)) / (hi - lo);
}

struct Alternative {
  std::string name;
  Bf16Tensor out;
};

std::vector<Alternative> product_alternatives(const CapturedOp& op, const model::NumericsVariant& variant) {
  const std::int64_t M = op.shape[0], N = op.shape[1], K = op.shape[2];
  const official::ShapeKey key{official::ChainKind::tensor_core, {M, N, K}};
  const Bf16* bias = op.bias.numel() ? op.bias.ptr() : nullptr;
  const auto run = [&](official::KernelChoice c) {
    const official::RowsAsIf as_if(M);
    Bf16Tensor y({op.in.dim(0), N});
    ops::linear(as_matrix(op.in), as_matrix(op.weight), bias, op.rule, as_matrix(y), with_choice(variant, key, c).product);
    return y;
  };
  std::vector<Alternative> out;
  out.push_back({"exact", oracle::correctly_rounded_linear(op.in.data, op.weight.data, op.bias.data, K, 0,
                                                            op.in.dim(0), 1)});
  out.push_back({"fp32-fma-chain", run({1, 16, true})});
  for (int split : {2, 4, 8}) out.push_back({"split-k-" + std::to_string(split), run({split, 16, false})});
  return out;
}

std::vector<Alternative> attention_alternatives(const CapturedOp& op, const model::NumericsVariant& variant) {
  const std::int64_t Nq = op.shape[0], Nk = op.shape[1], H = op.shape[2], d = op.shape[3];
  const auto run = [&](const ops::SdpaOptions& o) {
    Bf16Tensor y({Nq, H * d});
    ops::sdpa(as_matrix(op.q), as_matrix(op.k), as_matrix(op.v), H, o, as_matrix(y));
    return y;
  };
  std::vector<Alternative> out;
  for (int split : {2, 4, 8})
    out.push_back({"scores-split-" + std::to_string(split),
                   run(with_choice(variant, {official::ChainKind::f32_scores, {Nq, Nk, d}}, {split, 16, false}).sdpa(d))});
  for (int split : {2, 4, 8})
    out.push_back({"values-split-" + std::to_string(split),
                   run(with_choice(variant, {official::ChainKind::f32_values, {Nq, d, Nk}}, {split, 16, false}).sdpa(d))});
  out.push_back({"psi-f32-math", run(ops::SdpaOptions{})});
  return out;
}

// The float64 attention of element (i, c): scores q·k/√d, softmax and P·V in double.
double attention_f64(const CapturedOp& op, std::int64_t i, std::int64_t c) {
  const std::int64_t Nk = op.shape[1], H = op.shape[2], d = op.shape[3], h = c / d;
  std::vector<double> s(static_cast<std::size_t>(Nk));
  double mx = -std::numeric_limits<double>::infinity();
  for (std::int64_t j = 0; j < Nk; ++j) {
    double dot = 0;
    for (std::int64_t e = 0; e < d; ++e)
      dot += double(op.q.data[std::size_t(i * H * d + h * d + e)].to_float()) *
             double(op.k.data[std::size_t(j * H * d + h * d + e)].to_float());
    s[std::size_t(j)] = dot / std::sqrt(double(d));
    mx = std::max(mx, s[std::size_t(j)]);
  }
  double sum = 0, o = 0;
  for (std::int64_t j = 0; j < Nk; ++j) {
    const double e = std::exp(s[std::size_t(j)] - mx);
    sum += e;
    o += e * double(op.v.data[std::size_t(j * H * d + c)].to_float());
  }
  return o / sum;
}

double exact_value(const CapturedOp& op, std::int64_t i, std::int64_t c) {
  if (op.attention) return attention_f64(op, i, c);
  const std::int64_t K = op.shape[2];
  const std::span<const Bf16> x(op.in.data.data() + i * K, std::size_t(K)), w(op.weight.data.data() + c * K, std::size_t(K));
  const std::optional<Bf16> b = op.bias.numel() ? std::optional(op.bias.data[std::size_t(c)]) : std::nullopt;
  return oracle::exact_dot_fixed(x, w, b).to_mpq().get_d();
}

// Sets one element of one operator's output inside the forward.
class Flip : public official::OpObserver {
 public:
  Flip(std::string site, std::size_t index, Bf16 value) : site_(std::move(site)), index_(index), value_(value) {}
  void product(const official::ProductCall& c) override {
    if (c.site == site_) set(c.y);
  }
  void attention(const official::AttentionCall& c) override {
    if (c.site == site_) set(c.out);
  }

 private:
  void set(Bf16Mat m) const { m.at(std::int64_t(index_) / m.cols, std::int64_t(index_) % m.cols) = value_; }
  std::string site_;
  std::size_t index_;
  Bf16 value_;
};

std::int64_t differing(const Bf16Tensor& a, const Bf16Tensor& b) {
  std::int64_t n = 0;
  for (std::size_t i = 0; i < a.data.size(); ++i) n += a.data[i].bits != b.data[i].bits;
  return n;
}

}  // namespace

std::vector<OpFragility> audit_step(const TinyTrajectory& t, int step, bool influence, const official::KernelConfig& kernels) {
  OpCapture own;
  const pipeline::SavedState base = observed_step(t, step, kernels, own).first;
  const model::NumericsVariant variant = t.variant(kernels);
  std::vector<OpFragility> out;
  for (const CapturedOp& op : own.ops()) {
    OpFragility f;
    f.site = op.site;
    f.attention = op.attention;
    f.shape = op.attention ? std::to_string(op.shape[0]) + "x" + std::to_string(op.shape[1]) + " keys, " +
                                 std::to_string(op.shape[2]) + " heads of " + std::to_string(op.shape[3])
                           : official::shape_text({op.shape[0], op.shape[1], op.shape[2]});
    f.k = op.depth();
    const auto alts = op.attention ? attention_alternatives(op, variant) : product_alternatives(op, variant);
    const std::int64_t cols = op.out.shape.back();
    f.elements = op.out.numel();
    double smallest = std::numeric_limits<double>::infinity();
    std::size_t flip_at = 0;
    Bf16 flip_to;
    for (const Alternative& a : alts) f.by_order.emplace_back(a.name, differing(a.out, op.out));
    for (std::size_t e = 0; e < op.out.data.size(); ++e) {
      const Alternative* other = nullptr;
      for (const Alternative& a : alts)
        if (a.out.data[e].bits != op.out.data[e].bits) {
          other = &a;
          break;
        }
      if (!other) continue;
      ++f.fragile;
      const double m = margin(exact_value(op, std::int64_t(e) / cols, std::int64_t(e) % cols));
      f.largest_margin = std::max(f.largest_margin, m);
      if (m < smallest) {
        smallest = m;
        flip_at = e;
        flip_to = other->out.data[e];
      }
    }
    if (influence && f.fragile > 0) {
      Flip flip(op.site, flip_at, flip_to);
      const pipeline::SavedState moved = observed_step(t, step, kernels, flip).first;
      f.influence = differing(moved.video, base.video) + differing(moved.audio, base.audio);
    }
    out.push_back(std::move(f));
  }
  return out;
}

nlohmann::json to_json(const std::vector<OpFragility>& ops) {
  nlohmann::json a = nlohmann::json::array();
  for (const OpFragility& f : ops) {
    nlohmann::json by = nlohmann::json::object();
    for (const auto& [name, n] : f.by_order) by[name] = n;
    nlohmann::json row = {{"site", f.site},     {"attention", f.attention}, {"shape", f.shape},
                          {"k", f.k},           {"elements", f.elements},   {"fragile", f.fragile},
                          {"largest_margin", f.largest_margin}, {"changed_by_order", by}};
    if (f.influence) row["influence"] = *f.influence;
    a.push_back(row);
  }
  return a;
}

}  // namespace psi::exp
