// The experiments, as their files register them (Registration). The library is linked whole
// (CMakeLists.txt), so that every experiment file's registration is in every program.
#include <algorithm>
#include <set>

#include "engine/error.h"
#include "experiments/experiment.h"

namespace psi::exp {

namespace {

struct Registered {
  int order;
  Experiment experiment;
};

// Filled during static initialisation, before main: a function's static, so that it exists
// before the first registration whatever the order the files initialise in.
std::vector<Registered>& registered() {
  static std::vector<Registered> all;
  return all;
}

}  // namespace

Registration::Registration(int order, Experiment e) { registered().push_back({order, std::move(e)}); }

const std::vector<Experiment>& experiments() {
  static const std::vector<Experiment> all = [] {
    std::vector<Registered> r = registered();
    std::sort(r.begin(), r.end(), [](const Registered& a, const Registered& b) { return a.order < b.order; });
    std::vector<Experiment> out;
    std::set<std::string> names;
    for (std::size_t i = 0; i < r.size(); ++i) {
      if (i > 0 && r[i].order == r[i - 1].order)
        throw Error("experiments " + r[i - 1].experiment.name + " and " + r[i].experiment.name +
                    " are both registered at place " + std::to_string(r[i].order));
      if (!names.insert(r[i].experiment.name).second)
        throw Error("experiment " + r[i].experiment.name + " is registered twice");
      out.push_back(std::move(r[i].experiment));
    }
    return out;
  }();
  return all;
}

}  // namespace psi::exp
