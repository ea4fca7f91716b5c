#include "probes/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "engine/error.h"
#include "engine/model/block_f64.h"

namespace psi::probes {

Distance distance(std::span<const Bf16> ours, std::span<const Bf16> ref) {
  if (ours.size() != ref.size())
    throw Error("distance: " + std::to_string(ours.size()) + " elements against a reference of " +
                std::to_string(ref.size()));
  Distance d;
  d.total = std::int64_t(ref.size());
  double num = 0.0, den = 0.0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double a = ours[i].to_float(), b = ref[i].to_float();
    num += (a - b) * (a - b);
    den += b * b;
    if (ours[i].bits != ref[i].bits) {
      ++d.differing;
      const std::int64_t u = bf16_ulp_distance(ours[i], ref[i]);
      if (u > d.max_ulp) d.max_ulp = u;
    }
  }
  d.rel_l2 = num == 0.0 ? 0.0 : (den == 0.0 ? INFINITY : std::sqrt(num / den));
  return d;
}

Distance distance(std::span<const Bf16> ours, std::span<const double> ref) {
  if (ours.size() != ref.size())
    throw Error("distance: " + std::to_string(ours.size()) + " elements against a float64 reference of " +
                std::to_string(ref.size()));
  Distance d;
  d.total = std::int64_t(ref.size());
  double num = 0.0, den = 0.0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double a = ours[i].to_float(), b = ref[i];
    num += (a - b) * (a - b);
    den += b * b;
    const Bf16 rounded = model::bf16_of_f64(b);
    if (ours[i].bits != rounded.bits) {
      ++d.differing;
      d.max_ulp = std::max(d.max_ulp, bf16_ulp_distance(ours[i], rounded));
    }
  }
  d.rel_l2 = num == 0.0 ? 0.0 : (den == 0.0 ? INFINITY : std::sqrt(num / den));
  return d;
}

std::string format_distance(const Distance& d) {
  char buf[160];
  if (d.bitwise_equal()) {
    std::snprintf(buf, sizeof buf, "bitwise-equal (%lld elements)", (long long)d.total);
  } else {
    std::snprintf(buf, sizeof buf, "differs %lld/%lld rel_l2 %.3e max_ulp %lld", (long long)d.differing,
                  (long long)d.total, d.rel_l2, (long long)d.max_ulp);
  }
  return buf;
}

}  // namespace psi::probes
