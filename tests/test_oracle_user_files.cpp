// psi oracle explain / certify on a user's own files: each operand FILE[:NAME] in any format psi
// reads, W in either layout, y as BF16 bits or float32, no psi hash anywhere
// (tests/data/oracle/make_user_files.py wrote them with safetensors', NumPy's and h5py's own
// writers, from the eq. (5) operands of fixture.h5). The verdicts must be fixture.h5's, the exit
// status 0, and the SHA-256 printed of each operand the one of its bytes.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "hdf5/h5.h"
#include "tests/psi_command.h"

namespace fs = std::filesystem;

namespace {

const fs::path kData = fs::path(PSI_TEST_DATA) / "oracle";

using psi::testing::Outcome;

Outcome psi_run(const std::string& args) {
  const psi::testing::TempDir dir("psi_oracle_user");
  return psi::testing::run_psi_in(args, dir.path());
}

std::string in(const std::string& file) { return (kData / file).string(); }

// The operands of eq. (5) from a safetensors file of a runtime's own names, y as BF16 bits in .npy.
std::string safetensors_ops() {
  const std::string st = in("eq5.safetensors");
  return " --x " + st + ":attn.x --w " + st + ":blocks.0.to_q.weight --b " + st + ":blocks.0.to_q.bias --y " +
         in("y_bits.npy");
}

// fixture.h5 records each tensor's sha256_full: the same bits read from the user's files must
// give the same SHA-256.
std::string fixture_sha(const std::string& name) {
  return psi::hdf5::File::open_read(kData / "fixture.h5").attr_string("/" + name, "sha256_full");
}

TEST(OracleUserFiles, ExplainFromSafetensorsAndNpyGivesEquation5) {
  const Outcome run = psi_run("oracle explain --json --row 0 --col 0 --candidate gpu=0x3f81" + safetensors_ops());
  ASSERT_EQ(run.status, 0) << run.out << run.err;
  const auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["exact"]["fraction"], "129/2^7");
  EXPECT_EQ(j["correctly_rounded"]["bits"], "0x3f81");
  EXPECT_EQ(j["candidates"][0]["name"], "recorded");
  EXPECT_EQ(j["candidates"][0]["bits"], "0x3f80");
  EXPECT_EQ(j["candidates"][0]["ulp_distance"], 1);
  EXPECT_EQ(j["candidates"][1]["ulp_distance"], 0);
  EXPECT_TRUE(j["unverified"].is_null());
  EXPECT_TRUE(j["source"]["file"].is_null()) << "the operands came from two files";
  EXPECT_EQ(j["source"]["w"], in("eq5.safetensors") + ":/blocks.0.to_q.weight");
  const auto& read = j["source"]["read"];
  ASSERT_EQ(read.size(), 4u) << read.dump();
  const char* fixture_names[] = {"x", "w", "b", "y"};
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(read[i]["sha256"], fixture_sha(fixture_names[i])) << read[i].dump();
    EXPECT_EQ(read[i]["sha256_checked"], false) << "a user's file records no hash";
  }
  EXPECT_EQ(read[0]["stored"], "bf16");
  EXPECT_EQ(read[3]["stored"], "uint16, taken as BF16 bits");

  const Outcome text = psi_run("oracle explain --row 0 --col 0" + safetensors_ops());
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("operands   tensors of several files"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("  read W  " + in("eq5.safetensors") + ":/blocks.0.to_q.weight, bf16, SHA-256 " +
                          fixture_sha("w")),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("correctly rounded BF16  0x3f81"), std::string::npos) << text.out;
}

TEST(OracleUserFiles, CertifyFromSafetensorsAndNpyFindsTheOneElement) {
  const Outcome run = psi_run("oracle certify --json" + safetensors_ops());
  ASSERT_EQ(run.status, 0) << run.out << run.err;
  const auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["elements"], 6) << run.out;
  EXPECT_EQ(j["not_correctly_rounded"], 1) << run.out;
  EXPECT_EQ(j["worst"]["row"], 0);
  EXPECT_EQ(j["worst"]["col"], 0);
  EXPECT_EQ(j["source"]["read"].size(), 4u);
}

TEST(OracleUserFiles, WStoredInOutIsTransposed) {
  const std::string st = in("eq5.safetensors");
  const std::string ops = " --x " + st + ":attn.x --w " + in("w_in_out.npy") + " --b " + st +
                          ":blocks.0.to_q.bias --y " + in("y_bits.npy") + " --row 0 --col 0";
  const Outcome as_stored = psi_run("oracle explain" + ops);
  EXPECT_EQ(as_stored.status, 2) << as_stored.out;
  EXPECT_NE(as_stored.err.find("W must be stored [out, in]"), std::string::npos) << as_stored.err;

  const Outcome run = psi_run("oracle explain --json --w-layout in,out" + ops);
  ASSERT_EQ(run.status, 0) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["exact"]["fraction"], "129/2^7");
  EXPECT_EQ(j["source"]["w_layout"], "in,out");
  EXPECT_EQ(j["source"]["read"][1]["stored"], "float32 holding BF16 values");

  // Every element, not only (0, 0): certify agrees with the [out, in] reading.
  const Outcome cert = psi_run("oracle certify --json --w-layout in,out --x " + st + ":attn.x --w " + in("w_in_out.npy") +
                              " --b " + st + ":blocks.0.to_q.bias --y " + in("y_bits.npy"));
  ASSERT_EQ(cert.status, 0) << cert.err;
  EXPECT_EQ(nlohmann::json::parse(cert.out)["not_correctly_rounded"], 1) << cert.out;
}

TEST(OracleUserFiles, Float32OutputIsRoundedToBf16AndSaysSo) {
  const std::string st = in("eq5.safetensors");
  const Outcome run = psi_run("oracle explain --json --row 0 --col 0 --x " + st + ":attn.x --w " + st +
                             ":blocks.0.to_q.weight --b " + st + ":blocks.0.to_q.bias --y " + in("y_f32.npy"));
  ASSERT_EQ(run.status, 0) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  // 1 + 2^-10 rounds to 1.0 (0x3f80), one BF16 ULP below the correctly rounded 129/128.
  EXPECT_EQ(j["candidates"][0]["bits"], "0x3f80");
  EXPECT_EQ(j["candidates"][0]["ulp_distance"], 1);
  EXPECT_NE(j["source"]["read"][3]["stored"].get<std::string>().find("float32, rounded to the nearest BF16"),
            std::string::npos);
  EXPECT_NE(j["source"]["read"][3]["stored"].get<std::string>().find("1 of 6 values were not BF16 values"),
            std::string::npos)
      << j["source"]["read"][3].dump();
}

TEST(OracleUserFiles, PlainH5pyFileWithoutHashesOrDtypeIsReadAsItIs) {
  // h5py keeps BF16 as plain uint16: no dtype attribute, no sha256_full. One file, names in it.
  const Outcome run = psi_run("oracle explain --json --file " + in("eq5_h5py.h5") + " --x x --w w --b b --y y --row 0 --col 0");
  ASSERT_EQ(run.status, 0) << run.out << run.err;
  const auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["exact"]["fraction"], "129/2^7");
  EXPECT_EQ(j["candidates"][0]["bits"], "0x3f80");
  EXPECT_EQ(j["source"]["file"], in("eq5_h5py.h5"));
  EXPECT_EQ(j["source"]["x"], "/x");
  EXPECT_TRUE(j["unverified"].is_null());
  EXPECT_EQ(j["source"]["read"][0]["sha256"], fixture_sha("x"));
}

TEST(OracleUserFiles, BadOperandsAreRefusedNamingTheCause) {
  const std::string st = in("eq5.safetensors");
  auto refused = [](const Outcome& r, const std::string& cause) {
    EXPECT_EQ(r.status, 2) << r.out << r.err;
    EXPECT_TRUE(r.err.starts_with("psi: error: ")) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
    EXPECT_NE(r.err.find(cause), std::string::npos) << r.err;
  };
  const std::string wb = " --w " + st + ":blocks.0.to_q.weight --b " + st + ":blocks.0.to_q.bias --row 0 --col 0";
  refused(psi_run("oracle explain --x " + in("x_not_bf16.npy") + wb),
          "x element [1, 2] is 0.100000001 (float32 0x3dcccccd), not a BF16 value");
  refused(psi_run("oracle explain --x " + st + wb), "holds 3 tensors (/attn.x, /blocks.0.to_q.bias, /blocks.0.to_q.weight); "
                                                    "name the x operand as FILE:NAME");
  refused(psi_run("oracle explain --x " + st + ":attn.q" + wb), ":/attn.q: no such tensor for x (the file's tensors: ");
  refused(psi_run("oracle explain --x " + in("missing.npy") + ":x" + wb), "missing.npy: no such file");
  refused(psi_run("oracle explain --x " + st + ":attn.x --w " + st + ":blocks.0.to_q.bias --row 0 --col 0"),
          "does not fit x [2, 8]");
  refused(psi_run("oracle explain --probe probe_video_q_proj --row 0 --col 0"), "give either --probe NAME (with --file RECORDING)");
  refused(psi_run("oracle explain --file " + in("fixture.h5") + " --probe p --w-layout in,out --row 0 --col 0"),
          "--w-layout is for --w");
  // Candidates are told apart by name: two of one name, or one named as psi names the recorded
  // output, would make two rows no reader can tell apart.
  refused(psi_run("oracle explain --candidate gpu=0x3f81 --candidate gpu=0x3f80" + safetensors_ops() + " --row 0 --col 0"),
          "oracle explain: --candidate gpu is given twice; each candidate needs its own name");
  refused(psi_run("oracle explain --candidate recorded=0x3f81" + safetensors_ops() + " --row 0 --col 0"),
          "oracle explain: --candidate recorded: psi names the recorded output's value so; each candidate needs its own name");
}

}  // namespace
