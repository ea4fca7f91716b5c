#pragma once
// A complete safetensors checkpoint of the tiny model for the bad-input tests: every tensor
// the official implementation lists for trajectory_tiny, under the official key prefix, so
// that `psi run one-token --checkpoint F` runs on it, and one tensor can be spoiled at a time.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/bf16.h"
#include "engine/checkpoint/safetensors.h"
#include "hdf5/h5.h"
#include "tests/recordings.h"

namespace psi::badinput {

inline const std::string kPrefix = "model.diffusion_model.";

struct WeightEntry {
  std::string name;
  psi::Shape shape;
};

// Every tensor of the tiny model, from weights_json of the recorded trajectory_tiny.
inline std::vector<WeightEntry> tiny_weights() {
  auto f = psi::hdf5::File::open_read(psi::test::reference_file("probe_attn_traj.h5"));
  const auto j = nlohmann::json::parse(f.read_text("/trajectory_tiny/weights_json"));
  std::vector<WeightEntry> out;
  for (const auto& w : j) out.push_back({w["name"].get<std::string>(), w["shape"].get<psi::Shape>()});
  return out;
}

// Writes the checkpoint with every weight equal to 2^-7, except tensor `changed` (a model
// name), which `edit` changes.
inline std::filesystem::path tiny_checkpoint(const std::filesystem::path& p, const std::string& changed = {},
                                             const std::function<void(psi::ckpt::SafetensorsTensor&)>& edit = {}) {
  std::vector<psi::ckpt::SafetensorsTensor> ts;
  int edits = 0;
  for (const auto& w : tiny_weights()) {
    std::vector<psi::Bf16> v(std::size_t(psi::numel(w.shape)), psi::bf16_rne(0.0078125f));
    ts.push_back(psi::ckpt::bf16_tensor(kPrefix + w.name, w.shape, v));
    if (w.name == changed) {
      edit(ts.back());
      ++edits;
    }
  }
  EXPECT_EQ(edits, changed.empty() ? 0 : 1) << changed << " is not a tiny-model tensor";
  psi::ckpt::write_safetensors(p, ts);
  return p;
}

}  // namespace psi::badinput
