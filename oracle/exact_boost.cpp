#include "oracle/exact_boost.h"

#include <cmath>
#include <string>

#include "engine/error.h"

namespace psi::oracle {

namespace {

using boost::multiprecision::cpp_int;

// f = fr * 2^ex with 0.5 <= |fr| < 1 and at most 24 significant bits, so fr * 2^24 is an
// exact integer; the value is that integer times 2^(ex - 24).
BoostRational to_boost(Bf16 v) {
  if (!v.is_finite()) throw Error("oracle: non-finite BF16 value has no exact rational value");
  float f = v.to_float();
  if (f == 0.0f) return BoostRational(0);
  int ex = 0;
  float fr = std::frexp(f, &ex);
  cpp_int m = cpp_int(std::int64_t(std::ldexp(fr, 24)));
  int e = ex - 24;
  if (e >= 0) return BoostRational(cpp_int(m << e));
  return BoostRational(m, cpp_int(cpp_int(1) << -e));
}

}  // namespace

BoostRational exact_dot_boost(std::span<const Bf16> x, std::span<const Bf16> w, std::optional<Bf16> b) {
  if (x.size() != w.size())
    throw Error("oracle: dot product of lengths " + std::to_string(x.size()) + " and " +
                std::to_string(w.size()));
  BoostRational sum = b ? to_boost(*b) : BoostRational(0);
  for (std::size_t k = 0; k < x.size(); ++k) sum += to_boost(x[k]) * to_boost(w[k]);
  return sum;
}

mpq_class to_mpq(const BoostRational& r) {
  mpq_class q(boost::multiprecision::numerator(r).str() + "/" +
              boost::multiprecision::denominator(r).str());
  q.canonicalize();
  return q;
}

}  // namespace psi::oracle
