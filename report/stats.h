#pragma once
// Mean and sample standard deviation of repeated timings, as every table prints them.
#include <vector>

namespace psi::report {

double mean(const std::vector<double>& v);       // NaN for no values
double sample_sd(const std::vector<double>& v);  // n − 1 in the denominator; 0 for fewer than two values

}  // namespace psi::report
