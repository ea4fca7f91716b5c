#include "oracle/float64_filter.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/progress.h"
#include "oracle/fixed_dot.h"
#include "oracle/float64_gemm.h"
#include "oracle/split.h"

namespace psi::oracle {

namespace {

bool all_finite(std::span<const Bf16> v) {
  return std::all_of(v.begin(), v.end(), [](Bf16 b) { return b.is_finite(); });
}

// Rows [r0, r0 + n) of a [*, K] BF16 matrix as float64 (exact). Threaded by rows.
std::vector<double> widen(std::span<const Bf16> v, std::int64_t K, std::int64_t r0, std::int64_t n, int threads) {
  std::vector<double> m(std::size_t(n * K));
  split_range(n, threads, 64, [&](std::int64_t a, std::int64_t b) {
    for (std::int64_t r = a; r < b; ++r)
      for (std::int64_t k = 0; k < K; ++k) m[std::size_t(r * K + k)] = double(v[std::size_t((r0 + r) * K + k)].to_float());
  });
  return m;
}

// Y = X·Wᵀ ([M, N], X [M, K], W [N, K]), the threads each taking a slice of the longer side.
std::vector<double> product(const std::vector<double>& X, const std::vector<double>& W, std::int64_t M, std::int64_t N,
                            std::int64_t K, int threads) {
  std::vector<double> Y(std::size_t(M * N));
  if (N >= M) {
    split_range(N, threads, 64, [&](std::int64_t c0, std::int64_t c1) {
      float64_gemm_abt(X.data(), W.data() + c0 * K, M, c1 - c0, K, Y.data() + c0, N);
    });
  } else {
    split_range(M, threads, 64, [&](std::int64_t r0, std::int64_t r1) {
      float64_gemm_abt(X.data() + r0 * K, W.data(), r1 - r0, N, K, Y.data() + r0 * N, N);
    });
  }
  return Y;
}

// The Euclidean norm of each of n rows of K values. Threaded by rows.
std::vector<double> row_norms(const std::vector<double>& m, std::int64_t K, std::int64_t n, int threads) {
  std::vector<double> out(static_cast<std::size_t>(n));
  split_range(n, threads, 64, [&](std::int64_t a, std::int64_t b) {
    for (std::int64_t r = a; r < b; ++r) {
      double s = 0.0;
      for (std::int64_t k = 0; k < K; ++k) s += m[std::size_t(r * K + k)] * m[std::size_t(r * K + k)];
      out[std::size_t(r)] = std::sqrt(s);
    }
  });
  return out;
}

// The BF16 nearest to d (ties to even), rounded once from float64; empty outside the normal
// BF16 range [2^-126, 2^127], where the exact path decides (rare, and it knows the subnormal
// and overflow rules).
std::optional<Bf16> bf16_of(double d) {
  const double a = std::fabs(d);
  if (!(a >= 0x1p-126 && a <= 0x1p127)) return std::nullopt;
  std::uint64_t u = std::bit_cast<std::uint64_t>(d);
  constexpr int drop = 52 - 7;  // float64 fraction bits beyond BF16's 7
  u += (std::uint64_t{1} << (drop - 1)) - 1 + ((u >> drop) & 1);
  u &= ~((std::uint64_t{1} << drop) - 1);
  // 8 significant bits at a normal exponent: exactly a float, whose top half is the BF16.
  return Bf16::from_bits(std::uint16_t(std::bit_cast<std::uint32_t>(float(std::bit_cast<double>(u))) >> 16));
}

}  // namespace

CertifiedLinear certified_linear(std::span<const Bf16> x, std::span<const Bf16> w, std::span<const Bf16> b,
                                 std::int64_t K, std::int64_t row_begin, std::int64_t row_end, int threads) {
  CertifiedLinear out;
  const auto t0 = std::chrono::steady_clock::now();
  if (!all_finite(x) || !all_finite(w) || !all_finite(b) || K <= 0 || x.size() % std::size_t(K) != 0 ||
      w.size() % std::size_t(K) != 0) {
    // The exact path reports what is wrong with the operands (or decides the non-finite ones).
    out.correct = correctly_rounded_linear(x, w, b, K, row_begin, row_end, threads);
    out.sent_exact = out.correct.numel();
    out.seconds_exact = seconds_since(t0);
    return out;
  }
  const std::int64_t rows = std::int64_t(x.size()) / K, N = std::int64_t(w.size()) / K;
  if (!b.empty() && std::int64_t(b.size()) != N)
    throw Error("oracle: bias has " + std::to_string(b.size()) + " values for N = " + std::to_string(N));
  if (row_begin < 0 || row_end > rows || row_begin > row_end)
    throw Error("oracle: rows " + std::to_string(row_begin) + ":" + std::to_string(row_end) + " outside 0:" +
                std::to_string(rows));
  const std::int64_t M = row_end - row_begin;
  out.correct = Bf16Tensor({M, N});

  const std::vector<double> X = widen(x, K, row_begin, M, threads), W = widen(w, K, 0, N, threads);
  const std::vector<double> nx = row_norms(X, K, M, threads), nw = row_norms(W, K, N, threads);
  const std::vector<double> Y = product(X, W, M, N, K, threads);

  constexpr double u = 0x1p-53;
  const double scale = 2.0 * double(K) * u;
  std::vector<std::int64_t> undecided;
  for (std::int64_t r = 0; r < M; ++r)
    for (std::int64_t c = 0; c < N; ++c) {
      const double v = Y[std::size_t(r * N + c)] + (b.empty() ? 0.0 : double(b[std::size_t(c)].to_float()));
      const double B = scale * nx[std::size_t(r)] * nw[std::size_t(c)] + 4.0 * u * std::fabs(v);
      const double lo = std::nextafter(v - B, -std::numeric_limits<double>::infinity());
      const double hi = std::nextafter(v + B, std::numeric_limits<double>::infinity());
      const auto a = bf16_of(lo), z = bf16_of(hi);
      if (a && z && *a == *z) {
        out.correct.data[std::size_t(r * N + c)] = *a;
      } else {
        undecided.push_back(r * N + c);
      }
    }
  out.decided_by_filter = M * N - std::int64_t(undecided.size());
  out.sent_exact = std::int64_t(undecided.size());
  out.seconds_filter = seconds_since(t0);

  const auto t1 = std::chrono::steady_clock::now();
  split_range(std::int64_t(undecided.size()), threads, 1, [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i) {
      const std::int64_t e = undecided[std::size_t(i)], r = e / N, c = e % N;
      const auto xr = x.subspan(std::size_t((row_begin + r) * K), std::size_t(K));
      const auto wc = w.subspan(std::size_t(c * K), std::size_t(K));
      const std::optional<Bf16> bc = b.empty() ? std::nullopt : std::optional<Bf16>(b[std::size_t(c)]);
      out.correct.data[std::size_t(e)] = exact_dot_fixed(xr, wc, bc).round_bf16();
    }
  });
  out.seconds_exact = seconds_since(t1);
  return out;
}

}  // namespace psi::oracle
