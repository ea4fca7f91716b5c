// The numerics variant registry (engine/model/variant.h): its entries are well formed, and what
// lists variants lists the registry — psi probe's help and every table that shows paths — so that
// a variant built from existing knobs is one entry. The tables are fed a case record holding
// every registered variant, each with its own numbers, and must show each one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/model/variant.h"
#include "experiments/experiment.h"
#include "report/table.h"

namespace model = psi::model;


namespace {

std::string run_psi(const std::string& args) {
  const std::string cmd = std::string(PSI_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string text;
  char buf[4096];
  while (std::size_t n = fread(buf, 1, sizeof buf, p)) text.append(buf, n);
  pclose(p);
  return text;
}

// A distance as the records write it, distinct per variant so that a table cannot show one
// variant's numbers under another's name unnoticed.
nlohmann::json distance(std::size_t i) {
  return {{"differing", 10 + i}, {"total", 1000}, {"rel_l2", 1e-3 * double(i + 1)}, {"sign_flips", i},
          {"max_ulp_same_sign", 2 + i}};
}

nlohmann::json with(nlohmann::json j, const nlohmann::json& more) {
  j.update(more);
  return j;
}

}  // namespace

TEST(Variant, RegistryEntriesAreWellFormed) {
  const auto& all = model::numerics_variants();
  ASSERT_FALSE(all.empty());
  std::set<std::string> names, claims;
  std::map<model::VariantRole, int> roles;
  for (const model::NumericsVariant& v : all) {
    EXPECT_TRUE(names.insert(v.name).second) << "two variants named " << v.name;
    // Tables key cells by name beside labels with spaces ("official FLASH (recorded)").
    EXPECT_EQ(v.name.find(' '), std::string::npos) << v.name;
    EXPECT_FALSE(v.summary.empty()) << v.name;
    EXPECT_EQ(&model::numerics_variant(v.name), &v) << v.name;
    if (!v.claims.empty()) EXPECT_TRUE(claims.insert(v.claims).second) << "two variants claim " << v.claims;
    ++roles[v.role];
  }
  EXPECT_EQ(model::numerics_variant_names(), std::vector<std::string>(
                                                 [&] {
                                                   std::vector<std::string> n;
                                                   for (const auto& v : all) n.push_back(v.name);
                                                   return n;
                                                 }()));
  // The roles the tables' arithmetic is taken over are each held once.
  for (auto role : {model::VariantRole::psi_reference, model::VariantRole::paper_baseline,
                    model::VariantRole::paper_modified}) {
    EXPECT_EQ(roles[role], 1) << int(role);
    EXPECT_EQ(model::variant_with_role(role).role, role);
  }
  EXPECT_THROW(model::variant_with_role(model::VariantRole::measured), psi::Error);
  // The trajectories measure every path against the reference as they go: it runs first.
  EXPECT_EQ(all.front().role, model::VariantRole::psi_reference);
  // The official paths the tables measure from.
  EXPECT_EQ(model::variant_claiming("math").claims, "math");
  EXPECT_EQ(model::variant_claiming("flash").claims, "flash");
  EXPECT_THROW(model::variant_claiming("no-such-path"), psi::Error);
}

TEST(Variant, ProbeHelpAndUnknownNamesListTheRegistry) {
  const std::string help = run_psi("probe --help");
  EXPECT_NE(help.find(model::numerics_variant_list() + " or all"), std::string::npos) << help;
  const std::string refused = run_psi("probe audio-ff-up --variant no-such-variant");
  EXPECT_NE(refused.find("(known: " + model::numerics_variant_list() + ";"), std::string::npos) << refused;
}

// block-controls: the main table's rows, the float64 table's columns and the device summary's
// columns (the variants that claim no recording) are the registry's, in its order.
TEST(Variant, BlockControlsTablesShowEveryVariant) {
  const auto& all = model::numerics_variants();
  nlohmann::json rows = nlohmann::json::array(), f64 = nlohmann::json::array();
  for (std::size_t i = 0; i < all.size(); ++i) {
    for (const char* tensor : {"video_out", "audio_out"})
      rows.push_back(with({{"variant", all[i].name}, {"tensor", tensor}, {"backend", "math"}, {"rows", "all"}},
                          distance(i)));
    f64.push_back(with({{"path", "psi " + all[i].name}, {"tensor", "video_out"}, {"rows", "all"}}, distance(i)));
  }
  nlohmann::json flash_vs_math = nlohmann::json::array();
  for (const char* tensor : {"video_out", "audio_out"})
    flash_vs_math.push_back(with({{"tensor", tensor}}, distance(99)));
  const nlohmann::json cases = nlohmann::json::array({{{"case", "block-small"},
                                                       {"index", 0},
                                                       {"file", "block_small.h5"},
                                                       {"rows", rows},
                                                       {"official_flash_vs_math", flash_vs_math},
                                                       {"float64_rows", f64},
                                                       {"official_timing_and_memory", nlohmann::json::object()}}});
  const psi::exp::Experiment& e = psi::exp::find_experiment("block-controls");
  const auto tables = e.tabulate(cases, nlohmann::json::object());
  ASSERT_GE(tables.size(), 2u);
  std::vector<std::string> main_rows, f64_columns;
  for (const auto& row : tables[0].rows)
    if (row[0].starts_with("psi ")) main_rows.push_back(row[0]);
  for (const auto& c : tables[1].columns)
    if (c.starts_with("psi ")) f64_columns.push_back(c);
  std::vector<std::string> expected;
  for (const auto& v : all) expected.push_back("psi " + v.name);
  EXPECT_EQ(main_rows, expected);
  EXPECT_EQ(f64_columns, expected);
  const std::string summary = e.device_summary(psi::exp::DeviceSummaryInput{cases, {}, "cpu", "test", {}});
  // The header names the columns in order; each column's cells are that variant's own numbers.
  std::string header = "| probe |", cells = "| video_out |";
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (!all[i].claims.empty()) continue;
    char cell[64];
    std::snprintf(cell, sizeof cell, "%.2e (%zu / 1,000)", 1e-3 * double(i + 1), 10 + i);
    header += " psi " + all[i].name + " |";
    cells += std::string(" ") + cell + " |";
  }
  std::string squeezed;  // the Markdown table without its padding
  for (char c : summary)
    if (c != ' ' || squeezed.empty() || squeezed.back() != ' ') squeezed += c;
  EXPECT_NE(squeezed.find(header + " official FLASH (recorded) |"), std::string::npos) << header << "\n" << summary;
  EXPECT_NE(squeezed.find(cells + " 1.00e-01 |"), std::string::npos) << cells << "\n" << summary;
  EXPECT_NE(e.summary.find(model::numerics_variant_list()), std::string::npos) << e.summary;
}

// full-prompt: a row per variant, and the per-case table's Δ taken over the paper's baseline and
// modified rows as the registry marks them.
TEST(Variant, FullPromptTablesShowEveryVariant) {
  const auto& all = model::numerics_variants();
  nlohmann::json paths = nlohmann::json::object();
  for (std::size_t i = 0; i < all.size(); ++i)
    paths[all[i].name] = {{"wall_mean_s", 1.0},
                          {"wall_sd_s", 0.0},
                          {"run", nullptr},
                          {"endpoint_video_rel_l2", 1e-3 * double(i)},
                          {"endpoint_audio_rel_l2", 1e-3 * double(i)},
                          {"official_video_rel_l2", 1e-2 * double(i + 1)},
                          {"official_audio_rel_l2", 1e-2 * double(i + 1)}};
  const nlohmann::json cases =
      nlohmann::json::array({{{"prompt", "chef"}, {"context_mask", nullptr}, {"run", 1}, {"paths", paths}, {"index", 0}}});
  const psi::exp::Experiment& e = psi::exp::find_experiment("full-prompt");
  const auto tables = e.tabulate(cases, nlohmann::json::object());
  ASSERT_EQ(tables.size(), 2u);
  std::vector<std::string> rows;
  for (const auto& row : tables[0].rows) rows.push_back(row[0]);
  EXPECT_EQ(rows, model::numerics_variant_names());
  const auto& per_case = tables[1];
  ASSERT_EQ(per_case.rows.size(), 1u);
  const auto column = [&](const std::string& name) {
    const auto it = std::find(per_case.columns.begin(), per_case.columns.end(), name);
    EXPECT_NE(it, per_case.columns.end()) << name;
    return per_case.rows[0][std::size_t(it - per_case.columns.begin())];
  };
  const auto& base = model::variant_with_role(model::VariantRole::paper_baseline).name;
  const auto& mod = model::variant_with_role(model::VariantRole::paper_modified).name;
  const auto index = [&](const std::string& name) {
    const auto n = model::numerics_variant_names();
    return double(std::find(n.begin(), n.end(), name) - n.begin());
  };
  char delta[32];
  std::snprintf(delta, sizeof delta, "%+.2e", 1e-2 * (index(mod) - index(base)));
  EXPECT_EQ(column("Δ video (mod − base)"), delta);
  EXPECT_NE(e.summary.find(model::numerics_variant_list()), std::string::npos) << e.summary;
}
