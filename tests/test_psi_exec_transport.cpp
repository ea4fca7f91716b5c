// PSI executor transport correctness on the real block, cut into token row tiles of 32 rows
// (three video row tiles; the 72 keys as one block of journal pieces of 32, 32 and 8 rows): under chaos
// mode (random delays on every stream) the probes stay bitwise equal to model::block_forward
// for 24 seeds spread over the four schedules (validate mode on every other seed); validate
// mode passes every schedule on both configs; and each dependency the runtime can be made to
// drop (rt::Fault) is caught by validate mode on the block.
#include <gtest/gtest.h>

#include "tests/test_psi_exec_support.h"

using namespace psi_exec_test;

namespace {

pipeline::SyntheticShape tiny_shape() { return {.frames = 2, .height = 6, .width = 6, .audio_tokens = 20, .context_rows = 40}; }

exec::BlockRun run(const BlockCase& bc, const std::string& variant, const std::string& schedule,
                   exec::ExecOptions o) {
  o.row_tile = 32;
  return exec::run_block(bc.config, *bc.weights, bc.index, bc.inputs, model::numerics_variant(variant),
                         exec::schedule(schedule), exec::default_arena(bc.config), o);
}

std::string violation_of(const BlockCase& bc, rt::Fault fault) {
  try {
    run(bc, "baseline", "reuse+prefetch", {.validate = true, .fault = fault});
  } catch (const rt::ScheduleViolation& e) {
    return e.what();
  }
  return "no violation";
}

}  // namespace

TEST(PsiExecTransport, ChaosKeepsEveryScheduleBitwise) {
  const BlockCase bc("tiny", "ltx25", tiny_shape());
  const model::BlockTaps want[2] = {bc.reference(model::numerics_variant("baseline")),
                                    bc.reference(model::numerics_variant("modified"))};
  const auto& all = exec::schedules();
  for (std::uint64_t seed = 1; seed <= 24; ++seed) {
    const exec::Schedule& s = all[seed % all.size()];
    const int variant = int(seed / all.size()) % 2;
    const bool validate = seed % 2 == 1;
    const exec::BlockRun r = run(bc, variant ? "modified" : "baseline", s.name, {.validate = validate, .chaos_seed = seed});
    const std::string where = s.name + (variant ? " modified" : " baseline") + " seed " + std::to_string(seed) +
                              (validate ? " validate" : "");
    ASSERT_EQ(r.outcome, rt::Outcome::complete) << where << ": " << r.failure;
    expect_bitwise(r.probes, want[variant], where);
  }
}

TEST(PsiExecTransport, ValidateModePassesEverySchedule) {
  for (const char* config : {"tiny", "small"}) {
    const BlockCase bc(config, "ltx25", tiny_shape());
    const model::BlockTaps want = bc.reference(model::numerics_variant("modified"));
    for (const exec::Schedule& s : exec::schedules()) {
      const exec::BlockRun r = run(bc, "modified", s.name, {.validate = true});
      ASSERT_EQ(r.outcome, rt::Outcome::complete) << config << " " << s.name << ": " << r.failure;
      expect_bitwise(r.probes, want, std::string(config) + " " + s.name + " validate");
    }
  }
}

TEST(PsiExecTransport, EachRemovedDependencyIsCaughtOnTheBlock) {
  // Under reuse+prefetch every fill is on the copy stream and every state copy on the journal
  // stream, so each dropped wait leaves two streams unordered; validate mode finds it where it
  // first matters, whatever the timing.
  const BlockCase bc("tiny", "ltx25", tiny_shape());
  const std::string fill = violation_of(bc, rt::Fault::fill_skips_consumer_wait);
  EXPECT_EQ(fill.rfind("validate: fill page 0 with ", 0), 0u) << fill;
  EXPECT_NE(fill.find("writes page 0 while its read by "), std::string::npos) << fill;
  const std::string consume = violation_of(bc, rt::Fault::consume_skips_copy_wait);
  EXPECT_EQ(consume.rfind("validate: audio.attn1", 0), 0u) << consume;
  EXPECT_NE(consume.find("reads page 0 while its write by fill page 0"), std::string::npos) << consume;
  const std::string commit = violation_of(bc, rt::Fault::commit_skips_producer_wait);
  EXPECT_EQ(commit.rfind("validate: journal commit block 0 audio ", 0), 0u) << commit;
  EXPECT_NE(commit.find("on stream journal reads scratch"), std::string::npos) << commit;
  const std::string reload = violation_of(bc, rt::Fault::reload_skips_consumer_wait);
  EXPECT_EQ(reload.rfind("validate: journal reload block 0 ", 0), 0u) << reload;
  EXPECT_NE(reload.find("on stream journal writes "), std::string::npos) << reload;
  EXPECT_EQ(violation_of(bc, rt::Fault::none), "no violation");
}
