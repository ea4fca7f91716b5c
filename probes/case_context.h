#pragma once
// What the probe case implementations share (not part of the public probe API): the context a
// case runs in, and the comparison of a variant's outputs with the recording.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/backend/backend_factory.h"
#include "engine/model/block.h"
#include "engine/model/variant.h"
#include "engine/model/weights.h"
#include "engine/progress.h"
#include "probes/probe_report.h"
#include "probes/provenance.h"
#include "probes/recording.h"

namespace psi::probes::detail {

using Outputs = std::vector<std::pair<std::string, Bf16Tensor>>;

struct CaseContext {
  Recording& rec;
  Recording* flash = nullptr;  // a separate FLASH recording, if any
  ProbeReport& report;
  std::vector<model::NumericsVariant> variants;  // with ProbeOptions::kernels
  std::optional<rt::BackendKind> runtime;  // ProbeOptions::runtime
  bool float64 = false;                    // also the float64 reference block (kFloat64Variant), block cases only
  bool explain = false;                    // ProbeOptions::explain
  std::int64_t differences = 0;            // ProbeOptions::differences
  Progress* progress = nullptr;            // one step per variant compared
};

// The weights a recording's manifest declares (recording_manifest): every parameter's name and shape.
std::vector<model::WeightSpec> recorded_weights(const Manifest& m);

// Compares one variant's outputs with every recorded backend. An output named
// "<dataset>.<how>" is compared with the recorded <dataset> (`backends`: subgroups such as
// "math", "flash"; an empty string means datasets at the group root) and stores the outputs.
// `exact`: the unrounded values of which `outputs` are the BF16 rounding (the float64 block).
// The float64 block is the reference then, so each distance is the recording's to those values
// (engine/distance.h's float64 form), as block-controls' float64 table measures every path.
void compare_and_keep(CaseContext& ctx, const std::string& variant, Outputs outputs,
                      const std::vector<std::string>& backends,
                      const std::vector<std::pair<std::string, F64Tensor>>* exact = nullptr);

void run_linear_case(CaseContext& ctx, const std::string& case_name);
void run_attention_case(CaseContext& ctx);
void run_block_case(CaseContext& ctx);

// Attributes the elements of `computed` (variant v's block) that differ from the MATH recording
// (ProbeAttribution); a note instead when the recording does not store every probe in full.
void explain_block(CaseContext& ctx, const model::ModelConfig& c, const model::BlockWeights& w,
                   const model::BlockInputs& in, const model::NumericsVariant& v, const model::BlockTaps& computed);

}  // namespace psi::probes::detail
