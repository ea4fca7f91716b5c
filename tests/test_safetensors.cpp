// Safetensors: writer/reader round trip, slice reads, exact F16/F32 conversion, and one clear
// one-line error per kind of bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <unistd.h>

#include "engine/checkpoint/safetensors.h"
#include "engine/checkpoint/synth_source.h"
#include "engine/error.h"
#include "engine/synthinit.h"

namespace fs = std::filesystem;
namespace ck = psi::ckpt;
using psi::Bf16;

namespace {

class Safetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("psi_safetensors_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path path(const std::string& name) const { return dir_ / name; }

  // A file from a raw header text and `data_bytes` zero bytes; header_len overrides the length field.
  std::string raw(const std::string& name, const std::string& header, std::size_t data_bytes,
                  std::optional<std::uint64_t> header_len = std::nullopt) const {
    const fs::path p = path(name);
    std::ofstream f(p, std::ios::binary);
    const std::uint64_t len = header_len.value_or(header.size());
    f.write(reinterpret_cast<const char*>(&len), 8);
    f.write(header.data(), std::streamsize(header.size()));
    const std::string zeros(data_bytes, '\0');
    f.write(zeros.data(), std::streamsize(zeros.size()));
    return p.string();
  }

  fs::path dir_;
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const psi::Error& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "multi-line message";
    EXPECT_EQ(e.code(), psi::Exit::bad_input);
    return e.what();
  }
  return "no error";
}

std::vector<Bf16> values(std::size_t n, int salt) {
  std::vector<Bf16> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = psi::bf16_rne(float(int(i % 251) - 125) * 0.125f + float(salt));
  return v;
}

}  // namespace

TEST_F(Safetensors, RoundTripAndSlices) {
  const auto w = values(24 * 40, 0);
  const auto t3 = values(4 * 6 * 5, 1);
  const auto bias = values(24, 2);
  const fs::path p = path("model.safetensors");
  ck::write_safetensors(p,
                        {ck::bf16_tensor("blocks.0.w", {24, 40}, w), ck::bf16_tensor("blocks.0.t3", {4, 6, 5}, t3),
                         ck::bf16_tensor("blocks.0.bias", {24}, bias)},
                        {{"format", "pt"}});
  EXPECT_FALSE(fs::exists(p.string() + ".tmp-" + std::to_string(::getpid())));
  ck::SafetensorsFile f(p);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  EXPECT_EQ(f.entries().size(), 3u);
  EXPECT_EQ(f.shape("blocks.0.t3"), (psi::Shape{4, 6, 5}));
  EXPECT_EQ(f.entries().at("blocks.0.w").dtype, "BF16");

  std::vector<Bf16> all(w.size());
  f.read("blocks.0.w", {0, 24, 0, 40}, all);
  EXPECT_EQ(all, w);
  // Every slice equals the same slice of the whole tensor.
  for (auto s : {ck::Slice{3, 9, 0, 40}, ck::Slice{0, 1, 39, 40}, ck::Slice{5, 24, 7, 31}, ck::Slice{23, 24, 0, 1}}) {
    std::vector<Bf16> part(std::size_t(s.numel()));
    f.read("blocks.0.w", s, part);
    for (std::int64_t r = s.r0; r < s.r1; ++r)
      for (std::int64_t c = s.c0; c < s.c1; ++c)
        ASSERT_EQ(part[std::size_t((r - s.r0) * s.cols() + (c - s.c0))], w[std::size_t(r * 40 + c)]) << ck::slice_str(s);
  }
  std::vector<Bf16> t3_part(2 * 30);  // 3-D as [4, 30]
  f.read("blocks.0.t3", {1, 3, 0, 30}, t3_part);
  EXPECT_TRUE(std::equal(t3_part.begin(), t3_part.end(), t3.begin() + 30));
  std::vector<Bf16> bias_part(8);  // 1-D as [24, 1]: rows slice along with the weight's rows
  f.read("blocks.0.bias", {8, 16, 0, 1}, bias_part);
  EXPECT_TRUE(std::equal(bias_part.begin(), bias_part.end(), bias.begin() + 8));

  EXPECT_EQ(error_of([&] { f.read("blocks.0.w", {0, 25, 0, 40}, all); }),
            "blocks.0.w: rows [0, 25) cols [0, 40) is empty or outside its 2-D view [24, 40] of [24, 40]");
  EXPECT_EQ(error_of([&] { f.read("blocks.0.w", {0, 2, 0, 40}, all); }),
            "blocks.0.w: rows [0, 2) cols [0, 40) has 80 values but the buffer holds 960");
  EXPECT_EQ(error_of([&] { f.shape("blocks.0.nope"); }), p.string() + ": no tensor named blocks.0.nope");
}

TEST_F(Safetensors, SynthInitCheckpointServesTheSameTilesAsTheSynthSource) {
  const std::string name = "transformer_blocks.0.attn1.to_q.weight";
  const psi::Shape shape{32, 64};
  const auto whole = psi::synthinit::make(name, shape, 5);
  const fs::path p = path("synth.safetensors");
  ck::write_safetensors(p, {ck::bf16_tensor("model.diffusion_model." + name, shape, whole.data)});
  ck::SafetensorsFile file(p, "model.diffusion_model.");
  ck::SynthSource synth(5, {{name, shape}});
  EXPECT_TRUE(file.contains(name));
  EXPECT_FALSE(file.contains("model.diffusion_model." + name));
  const ck::Slice s{8, 24, 16, 48};
  std::vector<Bf16> a(std::size_t(s.numel())), b(a.size());
  file.read(name, s, a);
  synth.read(name, s, b);
  EXPECT_EQ(a, b);
}

TEST_F(Safetensors, ExactF32AndF16ConversionOnly) {
  // 1.5, -2, 0.0078125 and 57344 are BF16 values; 1 + 2^-10 (an F16 value) is not.
  const float f32[4] = {1.5f, -2.0f, 0.0078125f, 57344.0f};
  std::vector<std::byte> b32(sizeof f32);
  std::memcpy(b32.data(), f32, sizeof f32);
  const std::uint16_t f16[3] = {0x3e00 /* 1.5 */, 0xc000 /* -2 */, 0x0001 /* 2^-24 */};
  std::vector<std::byte> b16(sizeof f16);
  std::memcpy(b16.data(), f16, sizeof f16);
  const std::uint16_t f16_bad[1] = {0x3c01 /* 1 + 2^-10 */};
  std::vector<std::byte> b16_bad(sizeof f16_bad);
  std::memcpy(b16_bad.data(), f16_bad, sizeof f16_bad);
  const fs::path p = path("mixed.safetensors");
  ck::write_safetensors(p, {{"a", "F32", {4}, b32}, {"h", "F16", {3}, b16}, {"bad", "F16", {1}, b16_bad}});
  ck::SafetensorsFile f(p);
  std::vector<Bf16> out(4);
  f.read("a", {0, 4, 0, 1}, out);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[std::size_t(i)].to_float(), f32[i]);
  std::vector<Bf16> h(3);
  f.read("h", {0, 3, 0, 1}, h);
  EXPECT_EQ(h[0].to_float(), 1.5f);
  EXPECT_EQ(h[1].to_float(), -2.0f);
  EXPECT_EQ(h[2].to_float(), std::ldexp(1.0f, -24));
  std::vector<Bf16> one(1);
  EXPECT_EQ(error_of([&] { f.read("bad", {0, 1, 0, 1}, one); }),
            p.string() + ": tensor bad element 0 (F16 1.000977) is not exactly representable in BF16");
}

TEST_F(Safetensors, WriterRefusesBadInputAndLeavesNothingBehind) {
  const fs::path p = path("w.safetensors");
  const auto v = values(4, 0);
  EXPECT_EQ(error_of([&] { ck::write_safetensors(p, {ck::bf16_tensor("x", {5}, v)}); }),
            p.string() + ": tensor x has 8 bytes but shape [5] of BF16 needs 10");
  EXPECT_EQ(error_of([&] { ck::write_safetensors(p, {ck::bf16_tensor("x", {4}, v), ck::bf16_tensor("x", {4}, v)}); }),
            p.string() + ": duplicate tensor name x");
  const fs::path missing = path("no/such/dir/w.safetensors");
  EXPECT_NE(error_of([&] { ck::write_safetensors(missing, {ck::bf16_tensor("x", {4}, v)}); }), "no error");
  EXPECT_FALSE(fs::exists(p));
  EXPECT_TRUE(fs::is_empty(dir_));
}

// A header of 100,000 tensors opens (nlohmann's callback parser took five minutes for it:
// quadratic in the tensor count; bench_safetensors measures the parse), and a key repeated inside
// one tensor's entry is still caught after 99,999 good ones.
TEST_F(Safetensors, ManyTensorsOpenAndDuplicatesAreStillCaught) {
  const int n = 100000;
  std::string header = "{";
  for (int i = 0; i < n; ++i)
    header += (i ? "," : "") + std::string("\"t") + std::to_string(i) + "\":{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[" +
              std::to_string(2 * i) + "," + std::to_string(2 * i + 2) + "]}";
  const std::string p = raw("many.safetensors", header + "}", std::size_t(2) * n);
  const ck::SafetensorsFile f(p);
  EXPECT_EQ(f.entries().size(), std::size_t(n));
  EXPECT_TRUE(f.contains("t99999"));
  const std::string dup = raw("many_dup.safetensors", header.substr(0, header.size() - 2) + "],\"dtype\":\"BF16\"}}",
                              std::size_t(2) * n);
  EXPECT_EQ(error_of([&] { ck::SafetensorsFile g(dup); }), dup + ": duplicate key \"dtype\" in the header");
}

TEST_F(Safetensors, BadInputsGiveOneLineErrors) {
  const std::string ok_entry = R"("a":{"dtype":"BF16","shape":[8,8],"data_offsets":[0,128]})";
  auto open = [](const std::string& p) { return error_of([&] { ck::SafetensorsFile f(p); }); };

  {
    const fs::path p = path("short.safetensors");
    std::ofstream(p, std::ios::binary).write("\x05\0\0", 3);
    EXPECT_EQ(open(p.string()), p.string() + ": truncated: 3 bytes, shorter than the 8-byte header length");
  }
  const std::string ok_header = "{" + ok_entry + "}";
  std::string p = raw("past_end.safetensors", ok_header, 128, 1000);
  EXPECT_EQ(open(p), p + ": header length 1000 runs past the end of the file (" +
                         std::to_string(8 + ok_header.size() + 128) + " bytes)");

  p = raw("json.safetensors", "{\"a\": [1, 2", 0);
  EXPECT_TRUE(open(p).starts_with(p + ": header is not valid JSON: ")) << open(p);

  p = raw("array.safetensors", "[1, 2]", 0);
  EXPECT_EQ(open(p), p + ": header is not a JSON object");

  p = raw("range.safetensors", R"({"a":{"dtype":"BF16","shape":[8,8],"data_offsets":[0,128]}})", 100);
  EXPECT_EQ(open(p), p + ": tensor a: data_offsets [0, 128] out of range of the 100-byte data section");

  p = raw("truncated_data.safetensors", "{" + ok_entry + "}", 127);
  EXPECT_EQ(open(p), p + ": tensor a: data_offsets [0, 128] out of range of the 127-byte data section");

  p = raw("overlap.safetensors",
          R"({"a":{"dtype":"BF16","shape":[64],"data_offsets":[0,128]},"b":{"dtype":"BF16","shape":[64],"data_offsets":[64,192]}})",
          192);
  EXPECT_EQ(open(p), p + ": tensors a and b overlap (data_offsets [0, 128] and [64, 192])");

  p = raw("size.safetensors", R"({"a":{"dtype":"BF16","shape":[8,8],"data_offsets":[0,100]}})", 128);
  EXPECT_EQ(open(p), p + ": tensor a: data_offsets [0, 100] span 100 bytes but shape [8, 8] of BF16 needs 128");

  p = raw("dtype.safetensors", R"({"a":{"dtype":"I8","shape":[8],"data_offsets":[0,8]}})", 8);
  EXPECT_EQ(open(p), p + ": tensor a: dtype I8 is not supported (BF16; F16/F32 converted exactly)");

  p = raw("negative.safetensors", R"({"a":{"dtype":"BF16","shape":[-8],"data_offsets":[0,16]}})", 16);
  EXPECT_EQ(open(p), p + ": tensor a: shape entry -8 is not a non-negative integer");

  p = raw("utf8.safetensors", "{\"a\xff\":{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[0,2]}}", 2);
  EXPECT_EQ(open(p), p + ": header is not valid UTF-8 at header byte 3 (tensor names must be UTF-8)");

  p = raw("overlong.safetensors", "{\"a\xc0\xaf\":{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[0,2]}}", 2);
  EXPECT_EQ(open(p), p + ": header is not valid UTF-8 at header byte 3 (tensor names must be UTF-8)");

  p = raw("dup.safetensors", "{" + ok_entry + "," + ok_entry + "}", 128);
  EXPECT_EQ(open(p), p + ": duplicate key \"a\" in the header");

  p = raw("dup_field.safetensors", R"({"a":{"dtype":"BF16","dtype":"F32","shape":[1],"data_offsets":[0,2]}})", 2);
  EXPECT_EQ(open(p), p + ": duplicate key \"dtype\" in the header");

  p = raw("strip.safetensors",
          R"({"model.diffusion_model.a":{"dtype":"BF16","shape":[1],"data_offsets":[0,2]},"a":{"dtype":"BF16","shape":[1],"data_offsets":[2,4]}})",
          4);
  EXPECT_EQ(error_of([&] { ck::SafetensorsFile f(p, "model.diffusion_model."); }),
            p + ": duplicate tensor name a after stripping the prefix \"model.diffusion_model.\"");

  EXPECT_EQ(open(path("absent.safetensors").string()),
            path("absent.safetensors").string() + ": no such file");
}
