#include "oracle/f32_orders.h"

#include <string>

#include "engine/error.h"
#include "engine/official/tensor_core.h"

namespace psi::oracle {

namespace {

float product(std::span<const Bf16> x, std::span<const Bf16> w, std::size_t k) {
  return x[k].to_float() * w[k].to_float();
}

float seq_sum(std::span<const Bf16> x, std::span<const Bf16> w, std::size_t lo, std::size_t hi) {
  float acc = 0.0f;
  for (std::size_t k = lo; k < hi; ++k) acc = acc + product(x, w, k);
  return acc;
}

float pairwise_sum(std::span<const Bf16> x, std::span<const Bf16> w, std::size_t lo, std::size_t n) {
  if (n == 0) return 0.0f;
  if (n == 1) return product(x, w, lo);
  const std::size_t h = n / 2;
  return pairwise_sum(x, w, lo, h) + pairwise_sum(x, w, lo + h, n - h);
}

float blocked_sum(std::span<const Bf16> x, std::span<const Bf16> w, std::size_t block) {
  float acc = 0.0f;
  for (std::size_t lo = 0; lo < x.size(); lo += block)
    acc = acc + seq_sum(x, w, lo, std::min(x.size(), lo + block));
  return acc;
}

Bf16 add_bias(const F32Order& order, float acc, std::optional<Bf16> b) {
  if (!b) return bf16_rne(acc);
  if (order.bf16_before_bias) return bf16_rne(bf(acc) + b->to_float());
  return bf16_rne(acc + b->to_float());
}

std::vector<F32Order> make_orders() {
  std::vector<F32Order> base;
  base.push_back({"seq", F32Order::Sum::seq, 0, false});
  base.push_back({"pairwise", F32Order::Sum::pairwise, 0, false});
  for (int n : {16, 32, 64, 128, 256})
    base.push_back({"block" + std::to_string(n), F32Order::Sum::blocked, n, false});
  std::vector<F32Order> all = base;
  for (auto o : base) {
    o.name += "+bf16-before-bias";
    o.bf16_before_bias = true;
    all.push_back(o);
  }
  all.push_back({"h200-tensor-core", F32Order::Sum::tensor_core, 0, false});
  return all;
}

}  // namespace

const std::vector<F32Order>& f32_orders() {
  static const std::vector<F32Order> orders = make_orders();
  return orders;
}

float f32_sum(const F32Order& order, std::span<const Bf16> x, std::span<const Bf16> w) {
  if (x.size() != w.size())
    throw Error("oracle: dot product of lengths " + std::to_string(x.size()) + " and " +
                std::to_string(w.size()));
  switch (order.sum) {
    case F32Order::Sum::seq: return seq_sum(x, w, 0, x.size());
    case F32Order::Sum::pairwise: return pairwise_sum(x, w, 0, x.size());
    case F32Order::Sum::blocked: return blocked_sum(x, w, std::size_t(order.block));
    case F32Order::Sum::tensor_core: return official::tc::dot(x, w);
  }
  return 0.0f;
}

Bf16 f32_eval(const F32Order& order, std::span<const Bf16> x, std::span<const Bf16> w,
              std::optional<Bf16> b) {
  return add_bias(order, f32_sum(order, x, w), b);
}

std::vector<Bf16> f32_eval_all(std::span<const Bf16> x, std::span<const Bf16> w, std::optional<Bf16> b) {
  const auto& orders = f32_orders();
  std::vector<Bf16> out;
  std::vector<float> acc;
  for (std::size_t i = 0; i < orders.size(); ++i) {
    // The two bias variants of an order share its accumulator value.
    std::size_t same = 0;
    while (same < i && (orders[same].sum != orders[i].sum || orders[same].block != orders[i].block)) ++same;
    acc.push_back(same < i ? acc[same] : f32_sum(orders[i], x, w));
    out.push_back(add_bias(orders[i], acc.back(), b));
  }
  return out;
}

}  // namespace psi::oracle
