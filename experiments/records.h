#pragma once
// The case records two experiments share. Every other record is its experiment's own, in its
// experiment's file (docs/experiments.md). Each record names its keys once, in its field list
// (experiments/record_fields.h); recorded reports read back through the same list (`psi merge`
// re-tabulates shard files), so a key added later is optional there and read as today's tables
// read its absence. A case's "index" is the Report's (Report::add_case), not the driver's.
//
// Three parts stay JSON inside a record: "run" (the executor's run report, written by
// engine/runtime/run_report.cpp) and "explanation" (oracle/explain.cpp) are other layers'
// records, whose numbers the tables read as those layers write them; "per_invocation"
// (trajectory_support.cpp) is stored for the reader of the report, and the tables read only its
// "wall_s" (Tables II and III add them up).
#include <cstdint>
#include <optional>
#include <string>

#include "engine/distance.h"
#include "engine/metric.h"
#include "experiments/record_fields.h"

namespace psi::exp {

// One saved state of a trajectory against a reference trajectory (compare_states): one-token's
// "states" / "states_f64", and full-prompt's endpoints.
struct StateDistance {
  std::string state;
  double video_rel_l2 = 0, audio_rel_l2 = 0;
  std::int64_t video_differing = 0, audio_differing = 0, video_total = 0, audio_total = 0;
  bool finite = true;
  static auto fields() {
    using R = StateDistance;
    return std::tuple{field("state", &R::state),
                      field("video_rel_l2", &R::video_rel_l2),
                      field("audio_rel_l2", &R::audio_rel_l2),
                      field("video_differing", &R::video_differing),
                      field("audio_differing", &R::audio_differing),
                      field("video_total", &R::video_total),
                      field("audio_total", &R::audio_total),
                      field("finite", &R::finite)};
  }
};

// A distance (engine/distance.h) as a record writes it, flat in its record: the counts, then every
// metric (engine/metric.h) by its key. A metric not in every report (sign_flips and
// max_ulp_same_sign, absent in reports before sign flips were counted apart) reads as 0 where it
// is absent; ProbeRow says which rows those are.
template <>
struct FieldsOf<Distance> {
  static auto list() {
    using R = Distance;
    return std::apply(
        [](const auto&... m) {
          return std::tuple{field("differing", &R::differing), field("total", &R::total),
                            (m.in_every_report ? field(m.key, m.member) : field_if_present(m.key, m.member))...};
        },
        kDistanceMetrics);
  }
};

// One (variant, tensor, backend) of a psi probe run (probe_rows): probes' and block-controls'
// "rows". The distance is absent where the recording stores nothing to compare.
struct ProbeRow {
  std::string variant, tensor, backend, rows;
  std::optional<Distance> distance;  // flat in the row
  std::optional<bool> full_sha_equal;
  // Only in reports before sign flips were counted apart: the largest ULP distance over every
  // differing element, sign flips included, which no table shows; such a row has neither
  // sign_flips nor max_ulp_same_sign.
  std::optional<std::int64_t> max_ulp;
  bool counts_sign_flips() const { return !max_ulp; }
  static auto fields() {
    using R = ProbeRow;
    return std::tuple{field("variant", &R::variant), field("tensor", &R::tensor), field("backend", &R::backend),
                      field("rows", &R::rows), fields_flat(&R::distance),
                      field_optional("full_sha_equal", &R::full_sha_equal), field_optional("max_ulp", &R::max_ulp)};
  }
};

}  // namespace psi::exp
