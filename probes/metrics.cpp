#include "probes/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "engine/error.h"
#include "engine/model/block_f64.h"
#include "engine/sign_flip.h"

namespace psi::probes {

bool is_sign_flip(Bf16 ours, Bf16 ref) { return psi::is_sign_flip(ours.to_float(), ref.to_float()); }

namespace {

// One element whose bits differ from the reference's.
void count_differing(Distance& d, Bf16 ours, Bf16 ref) {
  ++d.differing;
  if (is_sign_flip(ours, ref)) {
    ++d.sign_flips;
    return;
  }
  d.max_ulp_same_sign = std::max(d.max_ulp_same_sign, bf16_ulp_distance(ours, ref));
}

double relative_l2(double num, double den) { return num == 0.0 ? 0.0 : (den == 0.0 ? INFINITY : std::sqrt(num / den)); }

}  // namespace

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
    if (ours[i].bits != ref[i].bits) count_differing(d, ours[i], ref[i]);
  }
  d.rel_l2 = relative_l2(num, den);
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
    if (ours[i].bits != rounded.bits) count_differing(d, ours[i], rounded);
  }
  d.rel_l2 = relative_l2(num, den);
  return d;
}

std::string format_distance(const Distance& d, const std::string& rel_l2_name) {
  char buf[240];
  if (d.bitwise_equal()) {
    std::snprintf(buf, sizeof buf, "bitwise-equal (%lld elements)", (long long)d.total);
  } else {
    std::snprintf(buf, sizeof buf, "differs %lld/%lld %s %.3e sign_flips %lld max_ulp_same_sign %lld",
                  (long long)d.differing, (long long)d.total, rel_l2_name.c_str(), d.rel_l2, (long long)d.sign_flips,
                  (long long)d.max_ulp_same_sign);
  }
  return buf;
}

}  // namespace psi::probes
