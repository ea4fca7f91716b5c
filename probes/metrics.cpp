#include "probes/metrics.h"

#include <cstdio>

namespace psi::probes {

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
