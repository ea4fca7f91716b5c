#include "oracle/fixed_dot.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <string>
#include <vector>

#include "engine/error.h"
#include "oracle/dyadic.h"
#include "oracle/split.h"

namespace psi::oracle {

namespace {

// An operand decoded for the inner loop: significand and exponent shifted by -kMinExp, so
// that the bit position of a product is the plain sum of its operands' p.
struct Packed {
  std::int16_t m;
  std::int16_t p;
};
static_assert(ExactSum::kScale == -2 * kMinExp);

std::vector<Packed> pack(std::span<const Bf16> v, const char* what) {
  // Decoding through a 65,536-entry table keeps the per-element work to one lookup.
  static const std::vector<Packed> table = [] {
    std::vector<Packed> t(65536);
    for (std::uint32_t bits = 0; bits < 65536; ++bits) {
      Bf16 b = Bf16::from_bits(std::uint16_t(bits));
      if (!b.is_finite()) {
        t[bits] = {0, -1};  // marks a value with no exact value
        continue;
      }
      Dyadic d = to_dyadic(b);
      t[bits] = {std::int16_t(d.m), std::int16_t(d.e - kMinExp)};
    }
    return t;
  }();
  std::vector<Packed> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    out[i] = table[v[i].bits];
    if (out[i].p < 0) to_dyadic(v[i], what);  // throws the one-line error
  }
  return out;
}

// Bit position of a lone value (the bias): its exponent + kScale.
int bias_pos(Packed b) { return b.p - kMinExp; }

// Carries resolved: digits 0..kBins-1 in [0, 2^16) and the sign apart.
struct Magnitude {
  int sign = 0;
  std::array<std::int64_t, ExactSum::kBins> d{};

  int bit(long i) const { return int((d[std::size_t(i >> 4)] >> (i & 15)) & 1); }
  bool any_below(long i) const {  // any set bit at positions < i
    for (long j = 0; j < (i >> 4); ++j)
      if (d[std::size_t(j)] != 0) return true;
    return (d[std::size_t(i >> 4)] & ((std::int64_t{1} << (i & 15)) - 1)) != 0;
  }
  long top_bit() const {
    for (long j = ExactSum::kBins - 1; j >= 0; --j)
      if (d[std::size_t(j)] != 0) return 16 * j + std::bit_width(std::uint64_t(d[std::size_t(j)])) - 1;
    return -1;
  }
};

void propagate(std::array<std::int64_t, ExactSum::kBins>& d) {
  for (int j = 0; j + 1 < ExactSum::kBins; ++j) {
    std::int64_t carry = d[j] >> 16;  // floor division: leaves d[j] in [0, 2^16)
    d[j] -= carry * 65536;
    d[j + 1] += carry;
  }
}

Magnitude normalize(const std::array<std::int64_t, ExactSum::kBins>& bins) {
  Magnitude m;
  m.d = bins;
  propagate(m.d);
  // The top digit now carries the sign: the digits below it are non-negative and smaller than
  // its weight.
  if (m.d.back() < 0) {
    for (auto& x : m.d) x = -x;
    propagate(m.d);
    m.sign = -1;
  } else {
    m.sign = m.top_bit() < 0 ? 0 : 1;
  }
  return m;
}

Bf16 round_magnitude(const Magnitude& m) {
  if (m.sign == 0) return Bf16{};
  constexpr long kSubnormalStepPos = ExactSum::kScale + kMinExp;  // bit of 2^-133
  const long top = m.top_bit();
  const long step = std::max(top - 7, kSubnormalStepPos);
  std::uint32_t q = 0;
  for (long i = 0; i < 9 && step + i <= top; ++i) q |= std::uint32_t(m.bit(step + i)) << i;
  const int round_bit = m.bit(step - 1);
  if (round_bit && (m.any_below(step - 1) || (q & 1u))) ++q;
  // q <= 2^8: q * 2^(step - kScale) is exact in float32, or Inf when it reaches 2^128.
  float mag = std::ldexp(float(q), int(step - ExactSum::kScale));
  return bf16_rne(m.sign < 0 ? -mag : mag);
}

void check_k(std::int64_t k) {
  if (k + 1 >= ExactSum::kMaxTerms)
    throw Error("oracle: K = " + std::to_string(k) + " exceeds the fast exact path's limit of 2^32 - 2 terms");
}

// Rows x[0..R) against one weight row: R independent accumulators give the CPU independent
// dependency chains (consecutive products of one row often hit the same bin).
template <int R>
void dot_rows(const Packed* const* xr, const Packed* wc, std::int64_t K,
              std::array<std::int64_t, ExactSum::kBins>* acc) {
  for (std::int64_t k = 0; k < K; ++k) {
    const std::int32_t wm = wc[k].m;
    const int wp = wc[k].p;
    for (int r = 0; r < R; ++r) {
      const int p = xr[r][k].p + wp;
      acc[r][std::size_t(p >> 4)] += std::int64_t(xr[r][k].m * wm) << (p & 15);
    }
  }
}

}  // namespace

int ExactSum::sign() const { return normalize(bins_).sign; }

mpq_class ExactSum::to_mpq() const {
  Magnitude m = normalize(bins_);
  mpz_class z = 0;
  for (int j = kBins - 1; j >= 0; --j) {
    mpz_mul_2exp(z.get_mpz_t(), z.get_mpz_t(), kBinBits);
    z += long(m.d[std::size_t(j)]);
  }
  if (m.sign < 0) z = -z;
  mpq_class q(z);
  mpq_div_2exp(q.get_mpq_t(), q.get_mpq_t(), kScale);
  return q;
}

Bf16 ExactSum::round_bf16() const { return round_magnitude(normalize(bins_)); }

ExactSum exact_dot_fixed(std::span<const Bf16> x, std::span<const Bf16> w, std::optional<Bf16> b) {
  if (x.size() != w.size())
    throw Error("oracle: dot product of lengths " + std::to_string(x.size()) + " and " +
                std::to_string(w.size()));
  check_k(std::int64_t(x.size()));
  auto px = pack(x, "x");
  auto pw = pack(w, "w");
  ExactSum s;
  const Packed* xr = px.data();
  dot_rows<1>(&xr, pw.data(), std::int64_t(x.size()), &s.bins());
  if (b) {
    Packed pb = pack(std::span<const Bf16>(&*b, 1), "b")[0];
    s.add(pb.m, bias_pos(pb));
  }
  return s;
}

Bf16Tensor correctly_rounded_linear(std::span<const Bf16> x, std::span<const Bf16> w,
                                    std::span<const Bf16> b, std::int64_t K, std::int64_t row_begin,
                                    std::int64_t row_end, int threads) {
  if (K <= 0 || x.size() % std::size_t(K) != 0 || w.size() % std::size_t(K) != 0)
    throw Error("oracle: x (" + std::to_string(x.size()) + " values) and w (" +
                std::to_string(w.size()) + " values) are not whole rows of K = " + std::to_string(K));
  check_k(K);
  const std::int64_t rows = std::int64_t(x.size()) / K, N = std::int64_t(w.size()) / K;
  if (!b.empty() && std::int64_t(b.size()) != N)
    throw Error("oracle: bias has " + std::to_string(b.size()) + " values for N = " + std::to_string(N));
  if (row_begin < 0 || row_end > rows || row_begin > row_end)
    throw Error("oracle: rows " + std::to_string(row_begin) + ":" + std::to_string(row_end) +
                " outside 0:" + std::to_string(rows));
  const std::int64_t M = row_end - row_begin;
  auto px = pack(x.subspan(std::size_t(row_begin * K), std::size_t(M * K)), "x");
  auto pw = pack(w, "w");
  auto pb = pack(b, "b");
  Bf16Tensor y({M, N});

  constexpr int R = 4;
  auto work = [&](std::int64_t r0, std::int64_t r1) {
    std::array<std::array<std::int64_t, ExactSum::kBins>, R> acc;
    for (std::int64_t r = r0; r < r1; r += R) {
      const int nr = int(std::min<std::int64_t>(R, r1 - r));
      const Packed* xr[R];
      for (int i = 0; i < nr; ++i) xr[i] = px.data() + (r + i) * K;
      for (std::int64_t c = 0; c < N; ++c) {
        for (int i = 0; i < nr; ++i) acc[i].fill(0);
        const Packed* wc = pw.data() + c * K;
        if (nr == R) dot_rows<R>(xr, wc, K, acc.data());
        else
          for (int i = 0; i < nr; ++i) dot_rows<1>(&xr[i], wc, K, &acc[i]);
        for (int i = 0; i < nr; ++i) {
          ExactSum s;
          s.bins() = acc[i];
          if (!pb.empty()) s.add(pb[c].m, bias_pos(pb[c]));
          y.data[std::size_t((r + i) * N + c)] = s.round_bf16();
        }
      }
    }
  };
  // Slices of whole row blocks, one per thread.
  split_range(M, threads, R, work);
  return y;
}

}  // namespace psi::oracle
