#pragma once
// A probe's distance to its recording as psi probe prints it (the distance itself:
// engine/distance.h).
#include <string>

#include "engine/distance.h"

namespace psi::probes {

// "bitwise-equal (5678 elements)" or
// "differs 1234/5678 rel_l2 1.23e-03 sign_flips 9 max_ulp_same_sign 5", the relative L2 named
// `rel_l2_name` (a distance to a float64 reference is another computation, named apart).
std::string format_distance(const Distance& d, const std::string& rel_l2_name = "rel_l2");

}  // namespace psi::probes
