// Bad safetensors checkpoints, through the library (ckpt::SafetensorsFile), through the one
// command line that takes a checkpoint (`psi run one-token --checkpoint F`) and through `psi
// compare`, which reads a user's safetensors files: every malformed,
// truncated or inconsistent file is refused with one line naming the file and what is wrong,
// exit 2, and the run leaves no report and no temporary file behind.
#include <cstring>
#include <limits>
#include <optional>
#include <set>

#include "engine/bf16.h"
#include "engine/checkpoint/safetensors.h"
#include "tests/test_bad_input_checkpoint.h"
#include "tests/test_bad_input_support.h"

namespace ck = psi::ckpt;
using namespace psi::badinput;

namespace {

const bool kCounted = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new CountPrinter("safetensors"));
  return true;
}();

// The bytes of a safetensors file: length field (the header's size unless overridden), the
// header text, `data_bytes` zero bytes.
std::string st_bytes(const std::string& header, std::size_t data_bytes, std::optional<std::uint64_t> len = {}) {
  const std::uint64_t n = len.value_or(header.size());
  std::string out(8, '\0');
  std::memcpy(out.data(), &n, 8);
  return out + header + std::string(data_bytes, '\0');
}

std::string entry(const std::string& name, const std::string& dtype, const std::string& shape,
                  const std::string& offsets) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":" + offsets + "}";
}

struct Case {
  std::string name;     // also the file name
  std::string bytes;
  std::string mention;  // what the message must say besides the path
};

// One case per way a checkpoint can be wrong.
std::vector<Case> bad_files() {
  const std::string ok = entry("a", "BF16", "[8,8]", "[0,128]");
  const std::string ok_file = st_bytes("{" + ok + "}", 128);
  std::vector<Case> c;
  c.push_back({"empty", "", "truncated: 0 bytes"});
  c.push_back({"seven_bytes", std::string(7, '\x01'), "truncated: 7 bytes"});
  c.push_back({"length_past_end", st_bytes("{" + ok + "}", 128, 1000), "header length 1000 runs past the end"});
  c.push_back({"length_max", st_bytes("{}", 0, std::numeric_limits<std::uint64_t>::max()), "runs past the end"});
  c.push_back({"length_zero", st_bytes("", 0), "header is not valid JSON"});
  c.push_back({"cut_in_header", ok_file.substr(0, 8 + 20), "runs past the end"});
  c.push_back({"cut_in_data", ok_file.substr(0, ok_file.size() - 1), "out of range of the 127-byte data section"});
  c.push_back({"not_json", st_bytes("PK\x03\x04 this is a zip", 0), "header is not valid JSON"});
  c.push_back({"json_unterminated", st_bytes("{\"a\": [1, 2", 0), "header is not valid JSON"});
  c.push_back({"json_array", st_bytes("[1, 2]", 0), "header is not a JSON object"});
  c.push_back({"json_trailing", st_bytes("{}{}", 0), "header is not valid JSON"});
  c.push_back({"name_latin1", st_bytes("{" + entry("caf\xe9", "BF16", "[1]", "[0,2]") + "}", 2), "not valid UTF-8"});
  c.push_back({"name_ff", st_bytes("{" + entry("\xff\xfe", "BF16", "[1]", "[0,2]") + "}", 2), "not valid UTF-8"});
  c.push_back({"name_overlong", st_bytes("{" + entry("\xc0\xaf", "BF16", "[1]", "[0,2]") + "}", 2), "not valid UTF-8"});
  c.push_back({"name_surrogate", st_bytes("{" + entry("\xed\xa0\x80", "BF16", "[1]", "[0,2]") + "}", 2), "not valid UTF-8"});
  c.push_back({"name_cut_sequence", st_bytes("{" + entry("x\xe2\x82", "BF16", "[1]", "[0,2]") + "}", 2), "not valid UTF-8"});
  c.push_back({"name_above_10ffff", st_bytes("{" + entry("\xf4\x90\x80\x80", "BF16", "[1]", "[0,2]") + "}", 2),
               "not valid UTF-8"});
  c.push_back({"duplicate_tensor", st_bytes("{" + ok + "," + entry("a", "BF16", "[8,8]", "[128,256]") + "}", 256),
               "duplicate key \"a\""});
  c.push_back({"duplicate_field",
               st_bytes(R"({"a":{"dtype":"BF16","dtype":"F32","shape":[1],"data_offsets":[0,2]}})", 2),
               "duplicate key \"dtype\""});
  c.push_back({"duplicate_after_prefix",
               st_bytes("{" + entry(kPrefix + "a", "BF16", "[1]", "[0,2]") + "," + entry("a", "BF16", "[1]", "[2,4]") + "}", 4),
               "duplicate tensor name a"});
  c.push_back({"dtype_i8", st_bytes("{" + entry("a", "I8", "[8]", "[0,8]") + "}", 8), "dtype I8 is not supported"});
  c.push_back({"dtype_f64", st_bytes("{" + entry("a", "F64", "[1]", "[0,8]") + "}", 8), "dtype F64 is not supported"});
  c.push_back({"dtype_lowercase", st_bytes("{" + entry("a", "bf16", "[1]", "[0,2]") + "}", 2), "dtype bf16 is not supported"});
  c.push_back({"dtype_number", st_bytes(R"({"a":{"dtype":16,"shape":[1],"data_offsets":[0,2]}})", 2), "dtype missing"});
  c.push_back({"shape_missing", st_bytes(R"({"a":{"dtype":"BF16","data_offsets":[0,2]}})", 2), "shape missing"});
  c.push_back({"shape_negative", st_bytes("{" + entry("a", "BF16", "[-1]", "[0,2]") + "}", 2), "not a non-negative integer"});
  c.push_back({"shape_fraction", st_bytes("{" + entry("a", "BF16", "[2.5]", "[0,5]") + "}", 5), "not a non-negative integer"});
  c.push_back({"shape_string", st_bytes("{" + entry("a", "BF16", "[\"8\"]", "[0,16]") + "}", 16), "not a non-negative integer"});
  c.push_back({"shape_overflow", st_bytes("{" + entry("a", "BF16", "[1099511627776,1099511627776]", "[0,2]") + "}", 2),
               "shape is too large"});
  c.push_back({"offsets_missing", st_bytes(R"({"a":{"dtype":"BF16","shape":[1]}})", 2), "data_offsets missing"});
  c.push_back({"offsets_three", st_bytes("{" + entry("a", "BF16", "[1]", "[0,2,4]") + "}", 4), "data_offsets missing"});
  c.push_back({"offsets_negative", st_bytes("{" + entry("a", "BF16", "[1]", "[-2,0]") + "}", 2), "not a non-negative integer"});
  c.push_back({"offsets_reversed", st_bytes("{" + entry("a", "BF16", "[1]", "[4,2]") + "}", 4), "out of range"});
  c.push_back({"offsets_past_data", st_bytes("{" + entry("a", "BF16", "[1]", "[126,128]") + "}", 64),
               "data_offsets [126, 128] out of range of the 64-byte data section"});
  c.push_back({"offsets_max",
               st_bytes("{" + entry("a", "BF16", "[1]", "[18446744073709551614,18446744073709551615]") + "}", 2),
               "out of range"});
  c.push_back({"offsets_overlap",
               st_bytes("{" + entry("a", "BF16", "[64]", "[0,128]") + "," + entry("b", "BF16", "[64]", "[64,192]") + "}", 192),
               "tensors a and b overlap"});
  c.push_back({"offsets_same",
               st_bytes("{" + entry("a", "BF16", "[4]", "[0,8]") + "," + entry("b", "BF16", "[4]", "[0,8]") + "}", 8),
               "overlap"});
  c.push_back({"bytes_vs_shape", st_bytes("{" + entry("a", "BF16", "[8,8]", "[0,100]") + "}", 128),
               "span 100 bytes but shape [8, 8] of BF16 needs 128"});
  c.push_back({"bytes_vs_dtype", st_bytes("{" + entry("a", "F32", "[8]", "[0,16]") + "}", 16),
               "span 16 bytes but shape [8] of F32 needs 32"});
  c.push_back({"entry_not_object", st_bytes(R"({"a":[0,2]})", 2), "entry is not an object"});
  c.push_back({"entry_extra_field",
               st_bytes(R"({"a":{"dtype":"BF16","shape":[1],"data_offsets":[0,2],"strides":[1]}})", 2),
               "unexpected field \"strides\""});
  c.push_back({"metadata_not_object", st_bytes(R"({"__metadata__":"pt"})", 0), "__metadata__ is not an object"});
  c.push_back({"metadata_number", st_bytes(R"({"__metadata__":{"format":1}})", 0), "__metadata__ value of \"format\""});
  return c;
}

fs::path write_case(const fs::path& dir, const Case& c) {
  const fs::path p = dir / (c.name + ".safetensors");
  write_bytes(p, c.bytes);
  return p;
}

}  // namespace

TEST(BadSafetensors, LibraryRefusesEveryMalformedFile) {
  const fs::path dir = fresh_dir("st_lib");
  for (const Case& c : bad_files()) {
    const fs::path p = write_case(dir, c);
    expect_error([&] { ck::SafetensorsFile f(p, kPrefix); }, psi::Exit::bad_input, {p.string() + ": ", c.mention}, c.name);
  }
}

TEST(BadSafetensors, LibraryRefusesWhatIsNotAFile) {
  const fs::path dir = fresh_dir("st_lib_nofile");
  expect_error([&] { ck::SafetensorsFile f(dir / "missing.safetensors"); }, psi::Exit::bad_input,
               {(dir / "missing.safetensors").string() + ": no such file"}, "missing file");
  expect_error([&] { ck::SafetensorsFile f(dir); }, psi::Exit::bad_input, {dir.string() + ": not a regular file"},
               "a directory");
}

// The same files through `psi compare` (A and B), which reads safetensors files of any numeric
// dtype: each refused as the library refuses it, except those too short for a header or whose
// length field does not fit the file, which psi does not take for safetensors at all, and the
// three it reads (I8, F64, and two names that only a checkpoint's prefix made one). Then what
// only compare refuses: dtypes it does not compare, and names that are no dataset path.
TEST(BadSafetensors, CompareRefusesEveryMalformedFile) {
  const fs::path dir = fresh_dir("st_compare");
  const fs::path good = dir / "good.safetensors";
  ck::write_safetensors(good, {ck::bf16_tensor("a", {8, 8}, std::vector<psi::Bf16>(64))});
  const std::set<std::string> not_taken = {"empty",         "seven_bytes", "length_past_end", "length_max",
                                           "length_zero",   "cut_in_header", "not_json",      "json_array"};
  const std::set<std::string> read = {"dtype_i8", "dtype_f64", "duplicate_after_prefix"};
  std::vector<Case> cases;
  for (const Case& c : bad_files()) {
    if (read.count(c.name)) continue;
    cases.push_back(c);
    if (not_taken.count(c.name)) cases.back().mention = "not an HDF5, NumPy .npy or safetensors file";
  }
  cases.push_back({"dtype_u64", st_bytes("{" + entry("a", "U64", "[1]", "[0,8]") + "}", 8), "is U64, which psi does not compare"});
  cases.push_back({"dtype_f8", st_bytes("{" + entry("a", "F8_E4M3", "[1]", "[0,1]") + "}", 1), "dtype F8_E4M3 is not supported"});
  cases.push_back({"name_dotdot", st_bytes("{" + entry("x/../a", "BF16", "[1]", "[0,2]") + "}", 2), "'..' part"});
  cases.push_back({"name_slash_end", st_bytes("{" + entry("x/", "BF16", "[1]", "[0,2]") + "}", 2), "an empty"});
  cases.push_back({"name_group_clash",
                   st_bytes("{" + entry("a", "BF16", "[1]", "[0,2]") + "," + entry("a/b", "BF16", "[1]", "[2,4]") + "}", 4),
                   "cannot be both a tensor and a group"});
  for (const Case& c : cases) {
    const fs::path p = write_case(dir, c);
    for (const std::vector<std::string>& args : {std::vector<std::string>{"compare", p.string(), good.string()},
                                                  std::vector<std::string>{"compare", good.string(), p.string()}})
      expect_rejected(run_psi(args), args, psi::Exit::bad_input, {p.string() + ": ", c.mention});
  }
}

// A checkpoint that shrinks after it was opened (another process rewrites it): reading a tensor
// beyond the new end is one clear error. psi mapped the file and died of SIGBUS.
TEST(BadSafetensors, CheckpointThatShrinksWhileReadIsRefused) {
  const fs::path dir = fresh_dir("st_lib_shrink");
  const fs::path p = dir / "shrinks.safetensors";
  {
    std::vector<ck::SafetensorsTensor> t;
    t.push_back(ck::bf16_tensor("a", {64, 64}, std::vector<psi::Bf16>(64 * 64, psi::Bf16::from_bits(0x3f80))));
    ck::write_safetensors(p, t);
  }
  ck::SafetensorsFile f(p);
  std::vector<psi::Bf16> out(64 * 64);
  f.read("a", {0, 64, 0, 64}, out);
  EXPECT_EQ(out.back().bits, 0x3f80);
  fs::resize_file(p, fs::file_size(p) - 64 * 64);
  expect_error([&] { f.read("a", {0, 64, 0, 64}, out); }, psi::Exit::bad_input,
               {p.string() + ": ends at byte ", "(changed while psi read it?)"}, "a checkpoint cut after it was opened");
}

// Every shape entry must fit psi's signed 64-bit dimensions: an entry above 2^63 - 1 beside a
// zero one passes the byte-count check (0 elements) and used to become a negative dimension.
TEST(BadSafetensors, ShapeEntryAboveInt64IsRefused) {
  const fs::path dir = fresh_dir("st_lib_int64");
  const fs::path p = dir / "huge_dim.safetensors";
  write_bytes(p, st_bytes("{" + entry("a", "BF16", "[0,9223372036854775813]", "[0,0]") + "}", 0));
  expect_error([&] { ck::SafetensorsFile f(p); }, psi::Exit::bad_input, {p.string(), "tensor a", "too large"},
               "shape entry > INT64_MAX");
}

// The same files through `psi run one-token --checkpoint F`: exit 2, one line naming the file,
// and neither the report nor its temporary file is left in the output folder.
TEST(BadSafetensors, RunWithCheckpointRefusesEveryMalformedFile) {
  const fs::path in = fresh_dir("st_cli_in");
  const fs::path out = fresh_dir("st_cli_out");
  for (const Case& c : bad_files()) {
    const fs::path p = write_case(in, c);
    const std::vector<std::string> args{"run", "one-token", "--checkpoint", p.string(), "--out", (out / "r.h5").string()};
    expect_rejected(run_psi(args), args, psi::Exit::bad_input, {p.string() + ": ", c.mention});
    EXPECT_EQ(leftovers(out), std::vector<std::string>{}) << c.name;
  }
}


// Well-formed files whose content does not fit the model: each refused naming the file and the
// tensor. The complete checkpoint runs (exit 0), so the refusals are about what each one
// changes.
TEST(BadSafetensors, RunRefusesCheckpointsThatDoNotFitTheModel) {
  const fs::path in = fresh_dir("st_fit_in");
  const fs::path out = fresh_dir("st_fit_out");
  const std::string first = "patchify_proj.weight";  // the model's first load
  auto run = [&](const fs::path& ckpt) {
    std::vector<std::string> args{"run", "one-token", "--quick", "--checkpoint", ckpt.string(), "--out",
                                  (out / "r.h5").string()};
    return std::pair{args, run_psi(args)};
  };

  {
    const fs::path p = in / "no_tensors.safetensors";
    ck::write_safetensors(p, {}, {{"format", "pt"}});
    auto [args, r] = run(p);
    expect_rejected(r, args, psi::Exit::bad_input, {p.string(), "no tensor '" + first + "'"});
  }
  {
    const fs::path p = in / "other_prefix.safetensors";
    ck::write_safetensors(p, {ck::bf16_tensor("model.other_model." + first, {1}, std::vector<psi::Bf16>(1))});
    auto [args, r] = run(p);
    expect_rejected(r, args, psi::Exit::bad_input, {p.string(), "no tensor '" + first + "'"});
  }
  {
    const fs::path p = tiny_checkpoint(in / "wrong_shape.safetensors", "transformer_blocks.0.attn1.to_q.weight",
                                       [&](ck::SafetensorsTensor& t) {
                                         t.shape = {t.shape[1], t.shape[0] / 2};
                                         t.bytes.resize(t.bytes.size() / 2);
                                       });
    auto [args, r] = run(p);
    expect_rejected(r, args, psi::Exit::bad_input,
                    {p.string(), "tensor 'transformer_blocks.0.attn1.to_q.weight' has shape", "the model needs"});
  }
  {
    // 1 + 2^-10 is an F32 value BF16 cannot hold: refused when read, never rounded.
    const fs::path p = tiny_checkpoint(in / "inexact_f32.safetensors", "transformer_blocks.0.attn1.to_q.bias",
                                       [&](ck::SafetensorsTensor& t) {
                                         std::vector<float> f(t.bytes.size() / 2, 1.0f);
                                         f[3] = 1.0f + 0.0009765625f;
                                         t.dtype = "F32";
                                         t.bytes.resize(f.size() * 4);
                                         std::memcpy(t.bytes.data(), f.data(), t.bytes.size());
                                       });
    auto [args, r] = run(p);
    expect_rejected(r, args, psi::Exit::bad_input,
                    {p.string(), "transformer_blocks.0.attn1.to_q.bias element 3", "not exactly representable in BF16"});
  }
  EXPECT_EQ(leftovers(out), std::vector<std::string>{});

  const fs::path good = tiny_checkpoint(in / "complete.safetensors");
  auto [args, r] = run(good);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(fs::exists(out / "r.h5"));
}
