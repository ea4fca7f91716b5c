#include "probes/metrics.h"

#include <cmath>
#include <cstdio>

#include "engine/error.h"

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
