// psi probe: the linear probe's variants behave as their write boundaries say, the attention
// kernel on the recorded q/k/v is close to its own backend, outputs are written, bad input is
// rejected with exit 2.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <regex>
#include <string>

#include "engine/model/variant.h"
#include "engine/ops/activation.h"
#include "engine/ops/gemm.h"
#include "engine/sha256.h"
#include "engine/synthinit.h"
#include "hdf5/h5.h"
#include "probes/metrics.h"
#include "probes/probe_cases.h"
#include "tests/recordings.h"
#include "tests/hashed.h"

namespace fs = std::filesystem;
namespace probes = psi::probes;

namespace {

const probes::TensorResult& find(const probes::ProbeReport& r, const std::string& variant, const std::string& tensor,
                                 const std::string& backend) {
  for (const auto& t : r.results)
    if (t.variant == variant && t.tensor == tensor && t.backend == backend) return t;
  throw std::runtime_error("no result " + variant + "/" + tensor + "/" + backend);
}

// psi's output `tensor` of `variant`.
const psi::Bf16Tensor& output(const probes::ProbeReport& r, const std::string& variant, const std::string& tensor) {
  for (const auto& [v, outs] : r.outputs)
    if (v == variant)
      for (const auto& [name, t] : outs)
        if (name == tensor) return t;
  throw std::runtime_error("no output " + variant + "/" + tensor);
}

int run(const std::string& args, std::string* out = nullptr) {
  const std::string cmd = std::string(PSI_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string text;
  char buf[4096];
  while (std::size_t n = fread(buf, 1, sizeof buf, p)) text.append(buf, n);
  const int status = pclose(p);
  if (out) *out = text;
  return WEXITSTATUS(status);
}

}  // namespace

TEST(Probe, AudioFfUpVariants) {
  const auto r = probes::run_probe("audio-ff-up", {});
  const auto& dense = find(r, "dense", "proj_out", "official");
  const auto& baseline = find(r, "baseline", "proj_out", "official");
  const auto& modified = find(r, "modified", "proj_out", "official");
  ASSERT_TRUE(dense.distance && baseline.distance && modified.distance);
  // modified and dense do the same arithmetic (bias added in float32 before one BF16 write).
  EXPECT_EQ(output(r, "dense", "proj_out").data, output(r, "modified", "proj_out").data);
  // Writing the product BF16 before the bias adds differences: the paper's baseline effect.
  EXPECT_GT(baseline.distance->differing, 10 * modified.distance->differing);
  EXPECT_EQ(dense.distance->total, 126 * 8192);
}

// On the small block the official arithmetic (projections, attention core) leaves no probe
// further from the recorded MATH block than dense, and makes both audio attention modules
// bitwise. A regression in either shows here.
TEST(Probe, OfficialH200OnTheSmallBlock) {
  probes::ProbeOptions o;
  o.variants = {"dense", "official-h200"};
  const auto r = probes::run_probe("block-small", o);
  int probes_seen = 0;
  for (const auto& t : r.results) {
    if (t.variant != "official-h200" || t.backend != "math" || !t.distance) continue;
    const auto& dense = find(r, "dense", t.tensor, "math");
    ASSERT_TRUE(dense.distance);
    EXPECT_LE(t.distance->differing, dense.distance->differing) << t.tensor;
    ++probes_seen;
  }
  EXPECT_EQ(probes_seen, 10);
  EXPECT_EQ(find(r, "official-h200", "audio_attn1", "math").distance->differing, 0);
  EXPECT_EQ(find(r, "official-h200", "audio_attn2", "math").distance->differing, 0);
}

// The H200 tensor-core product reproduces the recorded official projections bit for bit, every
// element (the recording's SHA-256 of the whole tensor too), where psi's own order does not.
TEST(Probe, OfficialH200ReproducesTheRecordedProjections) {
  for (const auto& [c, tensors] : {std::pair<std::string, std::vector<std::string>>{"audio-ff-up", {"proj_out", "gelu_out"}},
                                   {"video-q-proj", {"q"}}}) {
    probes::ProbeOptions o;
    o.variants = {"official-h200", "dense"};
    const auto r = probes::run_probe(c, o);
    for (const auto& t : tensors) {
      const auto& official = find(r, "official-h200", t, "official");
      ASSERT_TRUE(official.distance) << c << " " << t;
      EXPECT_EQ(official.distance->differing, 0) << c << " " << t;
      EXPECT_GT(official.distance->total, 1000000) << c << " " << t;
      if (official.full_sha_equal) {
        EXPECT_TRUE(*official.full_sha_equal) << c << " " << t;
      }
      const auto& dense = find(r, "dense", t, "official");
      ASSERT_TRUE(dense.distance);
      EXPECT_GT(dense.distance->differing, 1000) << c << " " << t;  // psi's order is not cuBLAS's
    }
  }
}

TEST(Probe, AttentionKernelOnRecordedQkv) {
  const auto r = probes::run_probe("audio-self-attn", {});
  // Recorded q/k/v in: MATH-form attention lands within one BF16 ulp of the MATH recording, the
  // BF16-P online form within a few ulps of the FLASH recording.
  const auto& dense = find(r, "dense", "sdpa_out.on_recorded_qkv", "math");
  const auto& baseline = find(r, "baseline", "sdpa_out.on_recorded_qkv", "flash");
  const auto& modified = find(r, "modified", "sdpa_out.on_recorded_qkv", "math");
  ASSERT_TRUE(dense.distance && baseline.distance && modified.distance);
  EXPECT_EQ(dense.distance->sign_flips, 0);
  EXPECT_EQ(modified.distance->sign_flips, 0);
  EXPECT_LE(dense.distance->max_ulp_same_sign, 1);
  EXPECT_LE(modified.distance->max_ulp_same_sign, 1);
  EXPECT_LT(baseline.distance->rel_l2, 1e-4);
  // And with BF16 P against MATH the distance is the FLASH-like one, far larger.
  EXPECT_GT(find(r, "baseline", "sdpa_out.on_recorded_qkv", "math").distance->rel_l2, 10 * modified.distance->rel_l2);
}

// A near-zero element that changed sign reads tens of thousands of ULPs (every BF16 value near
// zero lies between): it is counted as a sign flip, and the ULP maximum is over the others. Zero
// against a nonzero value changes the sign too; +0 against -0 does not; a NaN keeps giving the
// largest ULP distance.
TEST(ProbeMetrics, SignFlipsAreCountedApartFromTheUlps) {
  const auto b = [](float f) { return psi::bf16_rne(f); };
  const std::vector<psi::Bf16> ref{b(1e-3f), b(-2e-3f), b(0.0f), b(-0.0f), b(1.0f), b(3.0f), b(5.0f)};
  std::vector<psi::Bf16> ours{b(-1e-3f), b(2e-3f), b(1e-3f), b(0.0f), psi::Bf16{std::uint16_t(b(1.0f).bits + 3)},
                              b(3.0f), b(5.0f)};
  ASSERT_GT(psi::bf16_ulp_distance(ours[0], ref[0]), 20000);
  psi::Distance d = psi::distance(ours, ref);
  EXPECT_EQ(d.differing, 5);
  EXPECT_EQ(d.sign_flips, 3);
  EXPECT_EQ(d.max_ulp_same_sign, 3);
  char l2[32];
  std::snprintf(l2, sizeof l2, "%.3e", d.rel_l2);
  EXPECT_EQ(probes::format_distance(d), std::string("differs 5/7 rel_l2 ") + l2 + " sign_flips 3 max_ulp_same_sign 3");
  ours[5] = psi::Bf16{0x7fc0};  // NaN
  d = psi::distance(ours, ref);
  EXPECT_EQ(d.sign_flips, 3);
  EXPECT_EQ(d.max_ulp_same_sign, std::numeric_limits<std::int64_t>::max());
  // Against a float64 reference, signs as ULPs are those of its BF16 rounding: 1e-50 rounds to +0.
  const std::vector<double> f64{1e-50, -1e-3, 2.0};
  d = psi::distance(std::vector<psi::Bf16>{b(-0.0f), b(1e-3f), b(2.0f)}, f64);
  EXPECT_EQ(d.differing, 2);
  EXPECT_EQ(d.sign_flips, 1);
  EXPECT_EQ(d.max_ulp_same_sign, 0);
}

TEST(Probe, AnyRecordingOfTheLayoutWorks) {
  // A recording of the audio-ff-up layout with another seed and other sizes, whose outputs are
  // psi's own dense arithmetic: the probe must regenerate the seed-7 weights from the file's
  // root attribute and weights_json, and then agree bit for bit.
  const fs::path file = fs::temp_directory_path() / ("psi_probe_seed7_" + std::to_string(::getpid()) + ".h5");
  const std::uint64_t seed = 7;
  const std::string w_name = "transformer_blocks.3.audio_ff.net.0.proj.weight", b_name = "transformer_blocks.3.audio_ff.net.0.proj.bias";
  const psi::Bf16Tensor x = psi::synthinit::make("input.other.x", {5, 64}, seed);
  const psi::Bf16Tensor w = psi::synthinit::make(w_name, {128, 64}, seed), b = psi::synthinit::make(b_name, {128}, seed);
  psi::Bf16Tensor proj = psi::ops::linear(x, w, &b), gelu(proj.shape);
  psi::ops::gelu_tanh(proj.ptr(), gelu.ptr(), proj.numel());
  {
    auto f = psi::hdf5::File::create(file);
    f.set_attr("/", "synthinit_global_seed", std::int64_t(seed));
    f.write_bf16("/probe_audio_ff_up/x", x, psi::test::hashed(x, {{"synthinit_name", std::string("input.other.x")}}));
    f.write_bf16("/probe_audio_ff_up/proj_out", proj, psi::test::hashed(proj));
    f.write_bf16("/probe_audio_ff_up/gelu_out", gelu, psi::test::hashed(gelu));
    f.write_text("/probe_audio_ff_up/weights_json",
                 "[{\"name\": \"" + w_name + "\", \"shape\": [128, 64]}, {\"name\": \"" + b_name + "\", \"shape\": [128]}]");
    f.commit();
  }
  probes::ProbeOptions o;
  o.reference = file;
  const auto r = probes::run_probe("audio-ff-up", o);
  fs::remove(file);
  EXPECT_EQ(r.seed, seed);
  EXPECT_TRUE(find(r, "dense", "proj_out", "official").distance->bitwise_equal());
  EXPECT_TRUE(find(r, "dense", "gelu_out", "official").distance->bitwise_equal());
  EXPECT_FALSE(find(r, "baseline", "proj_out", "official").distance->bitwise_equal());
}

TEST(ProbeCli, WritesOutputs) {
  const fs::path out = fs::temp_directory_path() / ("psi_probe_test_" + std::to_string(::getpid()) + ".h5");
  std::string text;
  // psi's GEMM order is not cuBLAS's: some elements differ, which is a measurement (exit 0) unless
  // bitwise equality is asked for.
  const int rc = run("probe video-q-proj --variant dense --out " + out.string(), &text);
  EXPECT_EQ(rc, 0) << text;
  EXPECT_NE(text.find("dense               q "), std::string::npos) << text;
  auto f = psi::hdf5::File::open_read(out);
  const auto q = f.read_bf16("/probe_video_q_proj/dense/q");
  EXPECT_EQ(q.shape, (psi::Shape{256, 4096}));
  EXPECT_EQ(f.attr_string("/probe_video_q_proj/dense/q", "sha256_full"), psi::sha256_hex(q));
  // Everything psi writes is psi-h5/1: psi compare sees the schema and the run it came from.
  EXPECT_EQ(f.attr_string("/", "schema"), "psi-h5/1");
  EXPECT_EQ(f.attr_string("/", "experiment"), "probe video-q-proj");
  // --require-bitwise checks claims: dense makes none (exit 2); official-h200 claims the
  // recorded projection, which it reproduces.
  std::string strict;
  EXPECT_EQ(run("probe video-q-proj --variant dense --require-bitwise", &strict), 2) << strict;
  EXPECT_EQ(run("probe video-q-proj --variant official-h200 --require-bitwise", &strict), 0) << strict;
  EXPECT_NE(strict.find("claim: official-h200 reproduces the recorded MATH path bit for bit: held (1 tensor bitwise equal)"),
            std::string::npos) << strict;
  std::string cmp;
  EXPECT_EQ(run("compare " + out.string() + " " + out.string(), &cmp), 0) << cmp;
  EXPECT_NE(cmp.find("psi-h5/1"), std::string::npos) << cmp;
  fs::remove(out);
}

// --variant all means every numerics variant; float64 named beside it is kept, repeats are not.
TEST(ProbeCli, AllWithFloat64) {
  std::string text;
  run("probe block-small --variant all --variant float64 --variant dense", &text);
  auto lines_of = [&](const std::string& variant) {
    int n = 0;
    for (std::size_t p = 0; (p = text.find("\n" + variant + " ", p)) != std::string::npos; ++p) ++n;
    return n;
  };
  for (const auto& v : psi::model::numerics_variant_names()) EXPECT_EQ(lines_of(v), 20) << v << "\n" << text;
  EXPECT_EQ(lines_of("float64"), 20) << text;
}

// Every RoPE table is checked once per cos/sin arithmetic but named on one line: with host and
// libdevice variants together each table's line used to appear twice, saying the same thing.
TEST(ProbeCli, EachRopeTableOnOneLine) {
  std::string text;
  ASSERT_EQ(run("probe block-small --variant dense --variant official-h200", &text), 0) << text;
  for (const std::string table : {"video.pe", "audio.pe", "video.cross_pe", "audio.cross_pe"}) {
    int n = 0;
    for (const char* after : {" ", ":"})
      for (std::size_t p = 0; (p = text.find("RoPE " + table + after, p)) != std::string::npos; ++p) ++n;
    EXPECT_EQ(n, 1) << table << "\n" << text;
    EXPECT_NE(text.find("RoPE " + table + " (host and libdevice cos/sin): psi's tables from the recorded positions "
                        "hash equal to the recording's sha256_full; the recorded tables are used"),
              std::string::npos) << text;
  }
}

// --explain-differences' own column ("1898 (2512 in 101 rows)") is three numbers: a legend line
// names each, and the numbers of a row are what the legend says (A counts a part of "differs").
TEST(ProbeCli, ExplainDifferencesHasALegend) {
  std::string text;
  ASSERT_EQ(run("probe block-small --variant dense --explain-differences", &text), 0) << text;
  EXPECT_NE(text.find("\nown \"A (B in C rows)\": A = differing elements that also differ when the module runs alone "
                      "on the recorded upstream probes (the rest are inherited); B = all elements where the module "
                      "alone differs from the recording; C = the token rows those B lie in\n"),
            std::string::npos) << text;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(text, m, std::regex("\ndense +attn1 +math +(\\d+)/\\d+ +(\\d+) \\((\\d+) in (\\d+) rows\\)")))
      << text;
  EXPECT_LE(std::stoll(m[2]), std::stoll(m[1]));
  EXPECT_LE(std::stoll(m[2]), std::stoll(m[3]));
  EXPECT_LE(std::stoll(m[4]), std::stoll(m[3]));
}

TEST(ProbeCli, BadInputIsExit2) {
  std::string text;
  EXPECT_EQ(run("probe no-such-case", &text), 2);
  EXPECT_NE(text.find("unknown probe case"), std::string::npos) << text;
  EXPECT_EQ(run("probe audio-ff-up --variant nope", &text), 2);
  EXPECT_EQ(run("probe audio-ff-up --reference /nonexistent/file.h5", &text), 2);
  EXPECT_NE(text.find("/nonexistent/file.h5"), std::string::npos) << text;
  // A recording without the case's group.
  EXPECT_EQ(run("probe audio-ff-up --reference " + (psi::test::reference_file("block_small.h5")).string(), &text), 2);
  EXPECT_NE(text.find("probe_audio_ff_up"), std::string::npos) << text;
}

// A recording of the layout that lacks one of the tensors psi computes is refused, naming the
// tensor and where it was looked for: before, its rows were left out of every table and the
// probe ended with exit 0.
TEST(Probe, ARecordingWithoutAComputedTensorIsRefused) {
  const fs::path file = fs::temp_directory_path() / ("psi_probe_no_gelu_" + std::to_string(::getpid()) + ".h5");
  const std::string w_name = "transformer_blocks.3.audio_ff.net.0.proj.weight", b_name = "transformer_blocks.3.audio_ff.net.0.proj.bias";
  const psi::Bf16Tensor x = psi::synthinit::make("input.other.x", {5, 64}, 0);
  const psi::Bf16Tensor w = psi::synthinit::make(w_name, {128, 64}, 0), b = psi::synthinit::make(b_name, {128}, 0);
  {
    auto f = psi::hdf5::File::create(file);
    f.set_attr("/", "synthinit_global_seed", std::int64_t(0));
    f.write_bf16("/probe_audio_ff_up/x", x, psi::test::hashed(x, {{"synthinit_name", std::string("input.other.x")}}));
    const psi::Bf16Tensor proj = psi::ops::linear(x, w, &b);
    f.write_bf16("/probe_audio_ff_up/proj_out", proj, psi::test::hashed(proj));
    f.write_text("/probe_audio_ff_up/weights_json",
                 "[{\"name\": \"" + w_name + "\", \"shape\": [128, 64]}, {\"name\": \"" + b_name + "\", \"shape\": [128]}]");
    f.commit();
  }
  probes::ProbeOptions o;
  o.reference = file;
  try {
    probes::run_probe("audio-ff-up", o);
    ADD_FAILURE() << "a recording without gelu_out was accepted";
  } catch (const psi::Error& e) {
    EXPECT_EQ(e.code(), psi::Exit::bad_input);
    EXPECT_EQ(std::string(e.what()), file.string() + ": the recording holds no gelu_out (looked for "
                                                     "/probe_audio_ff_up/gelu_out); psi computed it and has nothing "
                                                     "to compare it with");
  }
  fs::remove(file);
}

// A failed claim says where (issue 43.3): official-h200 claims the recorded projection; against
// a copy of the recording with seven elements of q moved by one ULP (its sha256_full updated, so
// the copy is a well-formed recording), --require-bitwise fails and psi probe prints the first
// five of them (flat and multi-index, both values as bits and decimal, the ULP distance) and the
// command that lists the rest, which lists all seven.
TEST(Probe, FailedClaimPrintsWhereItFails) {
  const fs::path file = fs::temp_directory_path() / ("psi_probe_edited_q_" + std::to_string(::getpid()) + ".h5");
  fs::copy_file(psi::test::reference_file("probes_linear.h5"), file, fs::copy_options::overwrite_existing);
  fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write);
  const std::string q = "/probe_video_q_proj/q";
  const psi::Bf16Tensor recorded = psi::hdf5::File::open_read(file).read_bf16(q);
  // Row-major [256, 4096]: (3, 17), (3, 18), (40, 0), (41, 4095), (100, 100), (200, 1), (255, 4095).
  const std::vector<std::int64_t> moved{3 * 4096 + 17, 3 * 4096 + 18, 40 * 4096, 41 * 4096 + 4095,
                                        100 * 4096 + 100, 200 * 4096 + 1, 255 * 4096 + 4095};
  psi::Bf16Tensor edited = recorded;
  for (const std::int64_t i : moved) {
    ASSERT_NE(edited.data[std::size_t(i)].bits & 0x7fffu, 0u) << i;  // one ULP away, same sign
    edited.data[std::size_t(i)].bits ^= 1u;
  }
  {
    psi::hdf5::Handle f(H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
    psi::hdf5::Handle d(H5Dopen2(f.get(), q.c_str(), H5P_DEFAULT), H5Dclose);
    ASSERT_GE(H5Dwrite(d.get(), H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, edited.data.data()), 0);
    ASSERT_GE(H5Adelete(d.get(), "sha256_full"), 0);
    const std::string sha = psi::sha256_hex(edited);
    psi::hdf5::Handle s(H5Screate(H5S_SCALAR), H5Sclose);
    psi::hdf5::Handle ty(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(ty.get(), sha.size());
    psi::hdf5::Handle a(H5Acreate2(d.get(), "sha256_full", ty.get(), s.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
    ASSERT_GE(H5Awrite(a.get(), ty.get(), sha.c_str()), 0);
  }
  std::string text;
  ASSERT_EQ(run("probe video-q-proj --reference " + file.string() + " --variant official-h200 --require-bitwise", &text), 1)
      << text;
  EXPECT_NE(text.find("claim: official-h200 reproduces the recorded MATH path bit for bit: FAILED (1 of 1 differ: q)"),
            std::string::npos) << text;
  EXPECT_NE(text.find("q vs the recording (all): the first 5 of 7 differing elements, by index in the [256, 4096] tensor"),
            std::string::npos) << text;
  const auto line = [&](std::int64_t i) {
    char buf[200];
    const psi::Bf16 ours = recorded.data[std::size_t(i)], ref = edited.data[std::size_t(i)];
    std::snprintf(buf, sizeof buf, "[%lld, %lld] (flat %lld): psi 0x%04x (%.9g) recorded 0x%04x (%.9g), 1 ulp",
                  (long long)(i / 4096), (long long)(i % 4096), (long long)i, unsigned(ours.bits),
                  double(ours.to_float()), unsigned(ref.bits), double(ref.to_float()));
    return std::string(buf);
  };
  for (std::size_t k = 0; k < moved.size(); ++k)
    EXPECT_EQ(text.find(line(moved[k])) != std::string::npos, k < 5) << line(moved[k]) << "\n" << text;
  // The command it names, run as printed, lists every one of them.
  const std::string prefix = "  more of them: psi ";
  const std::size_t at = text.find(prefix);
  ASSERT_NE(at, std::string::npos) << text;
  const std::string more = text.substr(at + prefix.size(), text.find('\n', at) - at - prefix.size());
  EXPECT_EQ(more, "probe video-q-proj --reference " + file.string() + " --variant official-h200 --differences 100");
  std::string all;
  EXPECT_EQ(run(more, &all), 0) << all;
  EXPECT_NE(all.find("the first 7 of 7 differing elements"), std::string::npos) << all;
  for (const std::int64_t i : moved) EXPECT_NE(all.find(line(i)), std::string::npos) << line(i) << "\n" << all;
  EXPECT_EQ(all.find("more of them"), std::string::npos) << all;
  fs::remove(file);
}
