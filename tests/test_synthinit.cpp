#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/sha256.h"
#include "engine/synthinit.h"
#include "hdf5/h5.h"
#include "tests/recordings.h"

namespace si = psi::synthinit;
namespace fs = std::filesystem;

namespace {
fs::path reference_dir() { return psi::test::reference_dir(); }
}  // namespace

TEST(SynthInit, Fnv1a) {
  EXPECT_EQ(si::fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(si::fnv1a64("a"), 0xaf63dc4c8601ec8cull);  // published FNV-1a test vector
}

TEST(SynthInit, RoleTableOrder) {
  EXPECT_EQ(si::classify("input.video.x", {1, 2}).role, si::Role::input);
  EXPECT_EQ(si::classify("input.foo.weight", {4, 4}).role, si::Role::input);  // input.* first
  EXPECT_EQ(si::classify("keyframes_abs_pos_embedding", {1, 4096}).role, si::Role::keyframe_embedding);
  EXPECT_EQ(si::classify("transformer_blocks.0.scale_shift_table", {9, 4096}).e, 2);
  auto g = si::classify("transformer_blocks.0.attn1.q_norm.weight", {4096});
  EXPECT_EQ(g.role, si::Role::rms_gain);
  EXPECT_EQ(g.offset, 1.0f);
  EXPECT_EQ(si::classify("x.bias", {7}).e, 3);
  EXPECT_EQ(si::classify("x.weight", {8, 4096}).e, 6);
  EXPECT_EQ(si::classify("x.weight", {8, 2048}).e, 6);   // 4^6 = 4096 >= 2048
  EXPECT_EQ(si::classify("x.weight", {8, 16384}).e, 7);
  EXPECT_EQ(si::classify("x.weight", {8, 128}).e, 4);
  EXPECT_EQ(si::classify("x.weight", {8, 1}).e, 0);
  EXPECT_THROW(si::classify("x.weight", {8}), psi::Error);  // 1-D weight that is not a norm gain
  EXPECT_THROW(si::classify("something.else", {8}), psi::Error);
}

TEST(SynthInit, SpecCheckValues) {
  auto t = si::make("transformer_blocks.0.attn1.to_q.weight", {4096, 4096}, 0);
  EXPECT_EQ(t.data[0].bits, 0xbb9a);
  EXPECT_EQ(t.data[1].bits, 0xbaaf);
  EXPECT_EQ(t.data[2].bits, 0xbc0b);
  EXPECT_EQ(t.data[3].bits, 0xbc05);
  EXPECT_EQ(t.data[0].to_float(), -0.00469970703125f);
  EXPECT_EQ(t.data[3].to_float(), -0.00811767578125f);
}

TEST(SynthInit, SliceEqualsWhole) {
  psi::Shape shape{64, 96};
  auto whole = si::make("transformer_blocks.3.ff.net.2.weight", shape, 185);
  std::vector<psi::Bf16> part(100);
  si::fill("transformer_blocks.3.ff.net.2.weight", shape, 185, part, 1234);
  for (int j = 0; j < 100; ++j) EXPECT_EQ(part[j], whole.data[1234 + j]);
  EXPECT_THROW(si::fill("transformer_blocks.3.ff.net.2.weight", shape, 185, part, 6100), psi::Error);
}

TEST(SynthInit, SeedAndNameChangeValues) {
  auto a = si::make("x.bias", {256}, 0), b = si::make("x.bias", {256}, 1), c = si::make("y.bias", {256}, 0);
  EXPECT_NE(psi::sha256_hex(a), psi::sha256_hex(b));
  EXPECT_NE(psi::sha256_hex(a), psi::sha256_hex(c));
}

// Every weight listed in every recording's weights_json regenerates bit for bit (SHA-256), and
// so does every SynthInit input the recordings store.
TEST(SynthInit, MatchesEveryRecordedWeightAndInput) {
  ASSERT_TRUE(fs::is_directory(reference_dir())) << reference_dir();
  int weights = 0, inputs = 0;
  for (auto& entry : fs::directory_iterator(reference_dir())) {
    if (entry.path().extension() != ".h5") continue;
    auto file = psi::hdf5::File::open_read(entry.path());
    std::uint64_t seed = 0;
    if (auto s = file.attr("/", "synthinit_global_seed")) seed = std::uint64_t(std::get<std::int64_t>(*s));
    for (auto& ds : file.list_datasets()) {
      const std::string& path = ds.path;
      if (path.ends_with("/weights_json")) {
        auto j = nlohmann::json::parse(file.read_text(path));
        for (auto& w : j) {
          if (!w.contains("sha256")) continue;
          psi::Shape shape = w["shape"].get<psi::Shape>();
          auto t = si::make(w["name"].get<std::string>(), shape, seed);
          EXPECT_EQ(psi::sha256_hex(t), w["sha256"].get<std::string>()) << entry.path() << " " << w["name"];
          ++weights;
        }
      } else if (auto name = file.attr(path, "synthinit_name"); name && ds.kind == psi::hdf5::ElemKind::bf16) {
        auto full = nlohmann::json::parse(file.attr_string(path, "full_shape")).get<psi::Shape>();
        auto t = si::make(std::get<std::string>(*name), full, seed);
        EXPECT_EQ(psi::sha256_hex(t), file.attr_string(path, "sha256_full")) << entry.path() << " " << path;
        ++inputs;
      }
    }
  }
  EXPECT_GT(weights, 900);
  EXPECT_GT(inputs, 50);
}
