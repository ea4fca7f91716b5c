#pragma once
// psi probes in a run: their options, and their results as report records and table rows
// (probes and block-controls share them).
#include <vector>

#include "experiments/records.h"
#include "experiments/report.h"
#include "probes/probe_cases.h"

namespace psi::exp {

// The probe options of the run `o`: its kernel choices, and where psi's side runs (on CUDA on the
// device, probes/probe_cases.h; on the CPU on the host).
probes::ProbeOptions probe_options(const Options& o);

// One row per (variant, tensor, backend) of a probe run.
std::vector<ProbeRow> probe_rows(const probes::ProbeReport& r);

// Saves psi's outputs of every variant under /probes/<case>/<variant>/<tensor>.
void save_probe_outputs(Report& report, const probes::ProbeReport& r);

}  // namespace psi::exp
