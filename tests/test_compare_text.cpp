// psi compare on text and on tensors stored in part (issue 57, class 4): only a dataset that
// declares JSON text (hdf5::is_json_text) is read as JSON; JSON numbers compare by their exact
// value, the sign of zero kept; a key named twice in one object is refused; and "equal" of two
// tensors stored in part needs their whole-tensor hashes equal too. The files are psi's own
// HDF5 layer's, written here; the recordings' weights_json is JSON by their schema.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "engine/tensor.h"
#include "hdf5/h5.h"
#include "hdf5/schema.h"
#include "hdf5/state_file.h"
#include "tests/compare_cli.h"
#include "tests/recordings.h"

namespace {

namespace fs = std::filesystem;
using psi::testing::compare;
using psi::testing::Outcome;
using psi::testing::TempDir;

// A plain HDF5 file holding `text` as the uint8 dataset /t with attributes `a` (a new file each
// call: psi's writer replaces no file it did not write).
fs::path text_file(const TempDir& d, const std::string& name, const std::string& text, const psi::hdf5::Attrs& a) {
  static int made = 0;
  const fs::path p = d / (std::to_string(made++) + "_" + name);
  auto f = psi::hdf5::File::create(p);
  f.write_elements("/t", psi::hdf5::ElemKind::u8, {std::int64_t(text.size())}, text.data(), a);
  f.commit();
  return p;
}

const psi::hdf5::Attrs kJson{{psi::hdf5::attr::content, std::string(psi::hdf5::kJsonContent)}};

// Bytes that are not declared JSON compare as bytes, even where they parse as JSON; declared
// JSON compares field by field, and the verdict says the bytes differ.
TEST(CompareText, OnlyDeclaredJsonIsReadAsJson) {
  const TempDir d("psi_compare_text");
  for (const psi::hdf5::Attrs& undeclared :
       {psi::hdf5::Attrs{}, psi::hdf5::Attrs{{"dtype", std::string("utf8")}},
        psi::hdf5::Attrs{{psi::hdf5::attr::content, std::string("text/plain")}}}) {
    const Outcome r = compare(text_file(d, "a.h5", "[1,2 ]", undeclared), text_file(d, "b.h5", "[1, 2]", undeclared), d);
    EXPECT_EQ(r.status, 1) << r.out << r.err;
    EXPECT_NE(r.out.find(" 2/6 "), std::string::npos) << r.out;  // the two bytes ',' and ' '
    EXPECT_EQ(r.out.find("JSON"), std::string::npos) << r.out;
  }
  const Outcome r = compare(text_file(d, "a.h5", "[1,2 ]", kJson), text_file(d, "b.h5", "[1, 2]", kJson), d);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("JSON, compared field by field (equal as JSON; the texts differ in bytes)"), std::string::npos) << r.out;
  // Its own verdict: "bitwise equal" means equal bytes.
  EXPECT_NE(r.out.find("\nequal_as_json "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("summary: 1 compared (0 bitwise equal, 1 equal as JSON only, 0 differ)"), std::string::npos) << r.out;
  const Outcome same = compare(text_file(d, "a.h5", "[1, 2]", kJson), text_file(d, "b.h5", "[1, 2]", kJson), d);
  EXPECT_EQ(same.status, 0) << same.out << same.err;
  EXPECT_NE(same.out.find("summary: 1 compared (1 bitwise equal, 0 differ)"), std::string::npos) << same.out;
}

// Numbers by exact value: what a double would merge stays apart, what is one value written two
// ways is equal.
TEST(CompareText, JsonNumbersCompareByExactValue) {
  const TempDir d("psi_compare_numbers");
  const struct {
    std::string a, b, shown;  // shown: the first differing field as the note gives it
  } differ[] = {
      {"[9007199254740993]", "[9007199254740992]", "A=9007199254740993 B=9007199254740992"},
      {"[18446744073709551616]", "[18446744073709551615]", "A=18446744073709551616 B=18446744073709551615"},
      {"[-0.0]", "[0.0]", "A=-0 B=0"},
      {"[-0]", "[0]", "A=-0 B=0"},
      {"[1e-400]", "[0]", "A=1e-400 B=0"},
      {"[1e400]", "[1e401]", "A=1e400 B=1e401"},
      {"[0.30000000000000004]", "[0.3]", "A=0.30000000000000004 B=0.3"},
  };
  for (const auto& c : differ) {
    const Outcome r = compare(text_file(d, "a.h5", c.a, kJson), text_file(d, "b.h5", c.b, kJson), d);
    EXPECT_EQ(r.status, 1) << c.a << " vs " << c.b << "\n" << r.out << r.err;
    EXPECT_NE(r.out.find("first differing field [0]: " + c.shown), std::string::npos) << r.out;
  }
  const std::pair<std::string, std::string> equal[] = {
      {"[1.0]", "[1]"}, {"[10e-1]", "[1]"}, {"[100]", "[1E2]"}, {"[0.1]", "[1e-1]"}, {"[-0.0]", "[-0e5]"}, {"[1e400]", "[10e399]"}};
  for (const auto& [a, b] : equal) {
    const Outcome r = compare(text_file(d, "a.h5", a, kJson), text_file(d, "b.h5", b, kJson), d);
    EXPECT_EQ(r.status, 0) << a << " vs " << b << "\n" << r.out << r.err;
  }
}

// A key named twice is refused (which of the two would be compared?), as is declared JSON that
// is not JSON: exit 2, one line naming the file and dataset.
TEST(CompareText, DuplicateKeysAndMalformedJsonAreRefused) {
  const TempDir d("psi_compare_dup");
  const fs::path good = text_file(d, "good.h5", R"({"a": {"b": 1}})", kJson);
  const struct {
    std::string text, why;
  } bad[] = {
      {R"({"a": {"b": 1, "b": 2}})", "duplicate key 'b' in the object at .a"},
      {R"({"a": 1, "a": 1})", "duplicate key 'a' in the object at the top"},
      {R"({"a": 01})", "not valid JSON (the number '01')"},
      {R"({"a": [1, 2})", "not valid JSON"},
  };
  for (const auto& b : bad) {
    const fs::path f = text_file(d, "bad.h5", b.text, kJson);
    const Outcome r = compare(f, good, d);
    EXPECT_EQ(r.status, 2) << b.text << "\n" << r.out << r.err;
    EXPECT_TRUE(r.err.starts_with("psi: error: ")) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
    EXPECT_NE(r.err.find(f.string() + ":/t: " + b.why), std::string::npos) << b.text << "\n" << r.err;
  }
}

// What psi writes as JSON declares it; a report written before the attribute, and the
// recordings' weights_json, are JSON by their schema.
TEST(CompareText, PsiJsonAndOldReportsAndRecordingsAreJson) {
  const TempDir d("psi_compare_schema");
  psi::hdf5::RunInfo run;
  run.experiment = "capacity";
  const auto report = [&](const std::string& name, bool declared, const std::string& tables) {
    psi::hdf5::StateWriter w(d / name, run);
    if (declared) w.write_json("/report/tables", tables);
    else w.write_text("/report/tables", tables);
    w.commit();
    return d / name;
  };
  const fs::path now = report("now.h5", true, "[{\"a\": 1}]"), old = report("old.h5", false, "[{\"a\":1}]");
  const auto f = psi::hdf5::File::open_read(now);
  EXPECT_EQ(f.attr_string("/report/tables", psi::hdf5::attr::content), psi::hdf5::kJsonContent);
  const Outcome r = compare(now, old, d);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("JSON, compared field by field"), std::string::npos) << r.out;
  const fs::path changed = report("changed.h5", false, "[{\"a\":2}]");
  EXPECT_EQ(compare(old, changed, d).status, 1);
  const fs::path rec = psi::test::reference_file("probes_linear.h5");
  const Outcome w = compare(rec, rec, d, " --only weights_json");
  EXPECT_EQ(w.status, 0) << w.out << w.err;
  EXPECT_NE(w.out.find("JSON, compared field by field"), std::string::npos) << w.out;
}

// Two tensors stored in part whose stored rows agree but whose sha256_full differ are not equal;
// with equal hashes they are.
TEST(CompareText, TensorsStoredInPartAreEqualOnlyWithEqualHashes) {
  const TempDir d("psi_compare_partial");
  psi::hdf5::RunInfo run;
  run.experiment = "capacity";
  const auto file = [&](const std::string& name, float last) {
    psi::F32Tensor t({1, 4, 2});
    for (std::size_t i = 0; i < t.data.size(); ++i) t.data[i] = float(i);
    t.data.back() = last;
    psi::hdf5::StateWriter w(d / name, run);
    w.write_rows("/x", t, 1, 0, 1, {"dense", "[1, 4, 2] test", "", {}});  // rows 0-1 of 4 stored
    w.commit();
    return d / name;
  };
  const fs::path a = file("a.h5", 7.0f), same = file("same.h5", 7.0f), other = file("other.h5", 8.0f);
  EXPECT_EQ(compare(a, same, d).status, 0);
  const Outcome r = compare(a, other, d);
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("the stored elements are equal but the whole tensors differ: sha256_full A "), std::string::npos)
      << r.out;
}

}  // namespace
