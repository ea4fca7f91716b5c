// The CPU OpKernels: each method checks its operands against their regions, makes the
// engine/ops views of them on the host arena and calls the ops function it is named after.
#include "engine/backend/cpu/cpu_kernels.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>

#include "engine/backend/backend.h"
#include "engine/error.h"
#include "engine/ops/activation.h"
#include "engine/ops/adaln.h"
#include "engine/ops/norm.h"
#include "engine/ops/rope.h"

namespace psi::rt {

namespace {

void check_fits(const DeviceRegion& r, std::uint64_t bytes, const std::string& what) {
  if (bytes > r.bytes)
    throw Error("PSI kernel: " + what + " needs " + std::to_string(bytes) + " bytes but " + r.name + " holds " +
                    std::to_string(r.bytes),
                Exit::run_failed);
}

template <class T>
psi::Matrix<T> view(const KernelContext& k, const MatRef& m) {
  using E = std::remove_const_t<T>;
  check_fits(m.region, m.extent() * sizeof(E),
             "a " + std::to_string(m.rows) + "x" + std::to_string(m.cols) + " view");
  return psi::Matrix<T>{reinterpret_cast<T*>(k.arena_base + m.region.offset) + m.start, m.rows, m.cols, m.ld};
}

// A kernel-local dense copy of m (for the ops that exist only on whole tensors): host memory of
// the kernel, like a GPU kernel's registers, not arena state.
Bf16Tensor load(const KernelContext& k, const MatRef& m) {
  const auto v = view<const Bf16>(k, m);
  Bf16Tensor t({m.rows, m.cols});
  for (std::int64_t r = 0; r < m.rows; ++r) std::copy_n(v.row(r), m.cols, t.ptr() + r * m.cols);
  return t;
}

void store(const KernelContext& k, const Bf16Tensor& t, const MatRef& m) {
  const auto v = view<Bf16>(k, m);
  for (std::int64_t r = 0; r < m.rows; ++r) std::copy_n(t.ptr() + r * m.cols, m.cols, v.row(r));
}

Bf16Tensor load_dense(const KernelContext& k, const DeviceRegion& r, const Shape& shape) {
  Bf16Tensor t(shape);
  check_fits(r, t.bytes(), "a load of " + shape_str(shape));
  std::memcpy(t.ptr(), k.arena_base + r.offset, t.bytes());
  return t;
}

ops::OnlineState state(const KernelContext& k, const OnlineRef& s) {
  return ops::OnlineState{view<float>(k, s.m), view<float>(k, s.l), view<float>(k, s.o)};
}

const Bf16* row_ptr(const KernelContext& k, const MatRef* m) { return m ? view<const Bf16>(k, *m).data : nullptr; }

class CpuOpKernels final : public OpKernels {
 public:
  const char* name() const override { return "cpu"; }

  void copy(const KernelContext& k, const DeviceRegion& dst, const DeviceRegion& src,
            std::uint64_t bytes) const override {
    check_fits(src, bytes, "a copy");
    check_fits(dst, bytes, "a copy");
    std::memcpy(k.arena_base + dst.offset, k.arena_base + src.offset, bytes);
  }

  void zero_f32(const KernelContext& k, const MatRef& a) const override {
    const auto A = view<float>(k, a);
    for (std::int64_t r = 0; r < A.rows; ++r) std::fill_n(A.row(r), A.cols, 0.0f);
  }

  void linear(const KernelContext& k, const MatRef& x, const MatRef& w, const MatRef* bias, psi::BiasRule rule,
              const MatRef& y, ops::Product product) const override {
    ops::linear(view<const Bf16>(k, x), view<const Bf16>(k, w), row_ptr(k, bias), rule, view<Bf16>(k, y), product);
  }

  void gelu_tanh(const KernelContext& k, const MatRef& x) const override {
    const auto X = view<Bf16>(k, x);
    for (std::int64_t r = 0; r < X.rows; ++r) ops::gelu_tanh(X.row(r), X.row(r), X.cols);
  }

  void gemm_accumulate(const KernelContext& k, const MatRef& a, const MatRef& w, const MatRef& acc,
                       ops::Product product) const override {
    ops::gemm_accumulate(view<const Bf16>(k, a), view<const Bf16>(k, w), view<float>(k, acc), product);
  }

  void finish_linear(const KernelContext& k, const MatRef& acc, const MatRef* bias, const MatRef& y) const override {
    const auto A = view<const float>(k, acc);
    const auto Y = view<Bf16>(k, y);
    const Bf16* b = row_ptr(k, bias);
    for (std::int64_t r = 0; r < A.rows; ++r) psi::finish_linear(A.row(r), b, psi::BiasRule::fused_f32, Y.row(r), A.cols);
  }

  void rms_norm(const KernelContext& k, const MatRef& x, const MatRef* weight, float eps,
                const MatRef& y, ops::NormKernel norm) const override {
    ops::rms_norm(view<const Bf16>(k, x), row_ptr(k, weight), eps, view<Bf16>(k, y), norm);
  }

  void ada_value(const KernelContext& k, const MatRef& table_row, const MatRef& dst) const override {
    store(k, ops::ada_value(load(k, table_row), 0, load(k, dst), 0), dst);
  }

  void modulate(const KernelContext& k, const MatRef& x, const MatRef& scale, const MatRef& shift,
                const MatRef& y) const override {
    const Bf16Tensor factor = ops::one_plus(load(k, scale));
    ops::modulate(view<const Bf16>(k, x), psi::as_matrix(factor), view<const Bf16>(k, shift), view<Bf16>(k, y));
  }

  void gated_residual(const KernelContext& k, const MatRef& x, const MatRef& y, const MatRef& g) const override {
    store(k, ops::gated_residual(load(k, x), load(k, y), load(k, g)), x);
  }

  void residual(const KernelContext& k, const MatRef& x, const MatRef& y) const override {
    store(k, ops::residual(load(k, x), load(k, y)), x);
  }

  void attention_gate(const KernelContext& k, const MatRef& z, const MatRef& a, std::int64_t heads,
                      std::int64_t head_dim) const override {
    const auto Z = view<Bf16>(k, z);
    const auto A = view<Bf16>(k, a);
    for (std::int64_t r = 0; r < Z.rows; ++r) ops::sigmoid(Z.row(r), Z.row(r), Z.cols);
    for (std::int64_t r = 0; r < A.rows; ++r)
      for (std::int64_t h = 0; h < heads; ++h) {
        const float g = bf(2.0f * Z.at(r, h).to_float());
        Bf16* head = A.row(r) + h * head_dim;
        for (std::int64_t c = 0; c < head_dim; ++c) head[c] = bf16_rne(head[c].to_float() * g);
      }
  }

  void rope(const KernelContext& k, const MatRef& x, const RopeRef& t) const override {
    const Shape shape{1, t.heads, t.rows, t.half};
    const ops::RopeTables tables{load_dense(k, t.cos, shape), load_dense(k, t.sin, shape)};
    ops::apply_split_rope(view<Bf16>(k, x), tables);
  }

  void sdpa_online_begin(const KernelContext& k, const OnlineRef& s) const override {
    ops::sdpa_online_begin(state(k, s));
  }

  void sdpa_online_update(const KernelContext& k, const MatRef& q, const MatRef& kk, const MatRef& v,
                          std::int64_t heads, const ops::SdpaOptions& opt, const OnlineRef& s) const override {
    ops::sdpa_online_update(view<const Bf16>(k, q), view<const Bf16>(k, kk), view<const Bf16>(k, v), heads, opt,
                            state(k, s));
  }

  void sdpa_online_end(const KernelContext& k, const OnlineRef& s, const MatRef& out) const override {
    ops::sdpa_online_end(state(k, s), view<Bf16>(k, out));
  }

  void sdpa(const KernelContext& k, const MatRef& q, const MatRef& kk, const MatRef& v, std::int64_t heads,
            const ops::SdpaOptions& opt, const MatRef& out) const override {
    ops::sdpa(view<const Bf16>(k, q), view<const Bf16>(k, kk), view<const Bf16>(k, v), heads, opt,
              view<Bf16>(k, out));
  }
};

}  // namespace

const OpKernels& cpu_op_kernels() {
  static const CpuOpKernels kernels;
  return kernels;
}

}  // namespace psi::rt
