#include "experiments/drivers.h"

namespace psi::exp {

const std::vector<Experiment>& experiments() {
  static const std::vector<Experiment> all = {
      {"one-token", "Table III",
       "one-token 8+3 replay: invocation wall and per-state relative L2 of dense, baseline and modified PSI "
       "to the recorded official trajectory",
       run_one_token, tabulate_one_token, false},
  };
  return all;
}

}  // namespace psi::exp
