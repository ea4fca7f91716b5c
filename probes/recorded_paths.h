#pragma once
// A block case's two recorded official paths side by side: the MATH recording and the FLASH one
// (its own file, or the MATH file's flash/ group), tensor by tensor on the rows both store, with
// FLASH's distance to MATH. What block-controls shows beside psi's paths; probes reads the
// recordings, the experiment reads this.
#include <optional>
#include <string>
#include <vector>

#include "engine/distance.h"
#include "probes/probe_cases.h"
#include "probes/recording.h"

namespace psi::probes {

struct RecordedPaths {
  std::string tensor;
  StoredTensor math;
  // Absent when the FLASH recording lacks the tensor or stores other rows than MATH.
  std::optional<StoredTensor> flash;
  std::optional<Distance> flash_vs_math;  // FLASH against MATH, on the stored rows
};

// Every tensor psi computed in `r` (its first variant's outputs) that the MATH recording holds,
// in that order (psi::Error when a recording cannot be read or checked).
std::vector<RecordedPaths> recorded_paths(const ProbeReport& r);

}  // namespace psi::probes
