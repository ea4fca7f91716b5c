#pragma once
// What the experiments that compute on recordings can honour of --model, --profile, --seed and
// --checkpoint. They run at the recorded shapes with the recording's SynthInit weights and
// seed, so an option that asks for something else would be ignored: it is refused, and the
// options are set to what the run really uses, so that the report records that. Each such
// experiment's settle rule (Experiment::settle) is in its file and names its recordings.
#include <string>
#include <string_view>
#include <vector>

#include "experiments/experiment.h"

namespace psi::exp {

// A recording file under the reference folder and one group in it (whose seed is the file's).
struct Recorded {
  std::string file;
  std::string group;
};

// The recording of a probe case (probes/probe_cases.cpp, where every case's file and group are
// written once); `flash` its FLASH file.
Recorded recording_of(std::string_view probe_case, bool flash = false);

// The recordings `files` (names under the reference folder) are of config `model`/`profile`:
// refuses what `experiment` cannot honour and settles the model and the recordings' one seed.
void settle_on_recordings(Options& o, const std::string& experiment, const std::string& model,
                          const std::string& profile, const std::vector<Recorded>& files);

}  // namespace psi::exp
