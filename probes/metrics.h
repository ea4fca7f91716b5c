#pragma once
// A probe's distance to its recording as psi probe prints it (the distance itself:
// engine/distance.h; its metrics: engine/metric.h).
#include <string>

#include "engine/distance.h"

namespace psi::probes {

// "bitwise-equal (5678 elements)" or
// "differs 1234/5678 rel_l2 1.23e-03 sign_flips 9 max_ulp_same_sign 5", every metric by its key;
// `to_float64`: a recording against the float64 block, where a metric measured against the
// reference's unrounded values is another computation, named apart (rel_l2_to_float64).
std::string format_distance(const Distance& d, bool to_float64 = false);

// The legend lines psi probe prints above its rows: what each metric means for the rows against
// a recording, and for the float64 rows.
std::string metrics_legend();
std::string metrics_legend_to_float64();

}  // namespace psi::probes
