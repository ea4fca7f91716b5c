// The fragility audit (experiments/fragility.h, `psi kernels fragile`): an order's count is what
// the forward itself gives when the configuration runs that order; the fragile elements are
// those some order changes; margins are fractions of a rounding gap; the report is written as
// it is printed.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "engine/official/kernel_config.h"
#include "experiments/fragility.h"
#include "experiments/kernel_search.h"
#include "experiments/trajectory_ops.h"
#include "psi_command.h"
#include "tests/recordings.h"

namespace {

namespace fs = std::filesystem;

const psi::exp::TinyTrajectory& tiny() {
  static const psi::exp::TinyTrajectory t(psi::test::reference_dir(), 1);
  return t;
}

const std::vector<psi::exp::OpFragility>& audit() {
  static const auto a = psi::exp::audit_step(tiny(), 1, false, {});
  return a;
}

const psi::exp::CapturedOp& op_of(const psi::exp::OpCapture& c, const std::string& site) {
  for (const auto& op : c.ops())
    if (op.site == site) return op;
  throw std::runtime_error(site + " not captured");
}

std::int64_t count_of(const psi::exp::OpFragility& f, const std::string& order) {
  for (const auto& [name, n] : f.by_order)
    if (name == order) return n;
  ADD_FAILURE() << order << " not in " << f.site;
  return -1;
}

TEST(Fragility, FragileElementsAreThoseSomeOrderChanges) {
  std::int64_t fragile = 0;
  for (const auto& f : audit()) {
    std::int64_t largest = 0, sum = 0;
    for (const auto& [name, n] : f.by_order) {
      largest = std::max(largest, n);
      sum += n;
    }
    EXPECT_GE(f.fragile, largest) << f.site;
    EXPECT_LE(f.fragile, sum) << f.site;
    EXPECT_LE(f.fragile, f.elements) << f.site;
    EXPECT_GE(f.largest_margin, 0.0) << f.site;
    EXPECT_LE(f.largest_margin, 0.5) << f.site;
    if (f.fragile == 0) {
      EXPECT_EQ(f.largest_margin, 0.0) << f.site;
    }
    EXPECT_EQ(f.by_order.size(), f.attention ? 7u : 5u) << f.site;
    fragile += f.fragile;
  }
  // Some elements of the step are decided by the order: what makes the capture necessary.
  EXPECT_GT(fragile, 0);
}

// The first operator of the forward runs on the same inputs whatever the kernels: its count for
// an order is the elements the forward's own output changes in when the configuration runs that
// order for its shape; and likewise the first attention core's for a split of its scores, when
// only its own shape is changed.
TEST(Fragility, AnOrdersCountIsWhatTheForwardGivesUnderThatOrder) {
  psi::exp::OpCapture base;
  psi::exp::observed_step(tiny(), 1, {}, base);
  const auto run_with = [&](const psi::official::ShapeKey& key, psi::official::KernelChoice c) {
    psi::official::KernelConfig changed;
    changed.set(key, c);
    psi::exp::OpCapture cap;
    psi::exp::observed_step(tiny(), 1, changed, cap);
    return cap;
  };
  const auto differing = [](const psi::Bf16Tensor& a, const psi::Bf16Tensor& b) {
    std::int64_t n = 0;
    for (std::size_t i = 0; i < a.data.size(); ++i) n += a.data[i].bits != b.data[i].bits;
    return n;
  };
  const auto& first = audit().front();
  ASSERT_EQ(first.site, "patchify_proj");
  for (int split : {2, 4, 8}) {
    const auto cap = run_with({psi::official::ChainKind::tensor_core, {72, 256, 128}}, {split, 16, false});
    EXPECT_EQ(differing(op_of(cap, "patchify_proj").out, op_of(base, "patchify_proj").out),
              count_of(first, "split-k-" + std::to_string(split)));
  }
  const auto cap = run_with({psi::official::ChainKind::tensor_core, {72, 256, 128}}, {1, 16, true});
  EXPECT_EQ(differing(op_of(cap, "patchify_proj").out, op_of(base, "patchify_proj").out),
            count_of(first, "fp32-fma-chain"));
  const std::string sdpa = "transformer_blocks.0.video.attn1.sdpa";
  const auto it = std::find_if(audit().begin(), audit().end(), [&](const auto& f) { return f.site == sdpa; });
  ASSERT_NE(it, audit().end());
  ASSERT_GT(count_of(*it, "scores-split-8"), 0);
  // Its inputs come from products of other shapes, which the change leaves alone.
  const auto scores = run_with({psi::official::ChainKind::f32_scores, {72, 72, 128}}, {8, 16, false});
  EXPECT_EQ(differing(op_of(scores, sdpa).out, op_of(base, sdpa).out), count_of(*it, "scores-split-8"));
}

TEST(Fragility, CommandPrintsAndWritesTheAudit) {
  const fs::path dir = fs::temp_directory_path() / ("psi_fragility_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path out = dir / "fragile.json";
  const auto r = psi::testing::run_psi_in("kernels fragile --step 1 --out " + out.string(), dir);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("\ntransformer_blocks.0.video.attn1.sdpa "), std::string::npos) << r.out;
  std::int64_t fragile = 0, elements = 0;
  for (const auto& f : audit()) {
    fragile += f.fragile;
    elements += f.elements;
  }
  EXPECT_NE(r.out.find(std::to_string(audit().size()) + " operators, " + std::to_string(fragile) + " of " +
                       std::to_string(elements) + " output elements fragile"),
            std::string::npos)
      << r.out;
  std::ifstream in(out);
  std::string first;
  std::getline(in, first);
  EXPECT_EQ(first, "{\"schema\": \"psi-fragility/1\",");
  std::ifstream whole(out);
  const auto j = nlohmann::json::parse(std::string(std::istreambuf_iterator<char>(whole), {}));
  EXPECT_EQ(j["schema"], "psi-fragility/1");
  EXPECT_EQ(j["operators"], psi::exp::to_json(audit()));
  // A second run refuses nothing of its own (psi wrote it) and replaces it.
  EXPECT_EQ(psi::testing::run_psi_in("kernels fragile --step 1 --out " + out.string(), dir).status, 0);
  fs::remove_all(dir);
}

}  // namespace
