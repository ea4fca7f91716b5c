// psi compare A B: dataset-by-dataset bitwise / ULP / relative-L2 comparison of two tensor files
// (HDF5, NumPy .npy, safetensors; B is the reference). Exit 0 every dataset compared and bitwise
// equal; 1 something differs (elements or shape), nothing was compared, or a dataset is in one
// file only (unless a subset was asked for: --only, --map, --subset); 2 bad input (also data
// that does not match its sha256_full). Every difference is counted by kind, distances are taken
// over the finite pairs, and --by-value compares tensors of two element types by value
// (compare/compare.h, compare/by_value.h).
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <limits>
#include <memory>

#include "cli/command.h"
#include "compare/compare.h"
#include "engine/error.h"
#include "engine/whole_number.h"
#include "outputs/output_path.h"
#include "outputs/pending_output.h"
#include "report/compare_table.h"

namespace {

namespace fs = std::filesystem;

struct CompareOpts {
  std::string a, b;
  std::string only;
  std::vector<std::string> maps;
  bool strict = false;
  bool subset = false;
  bool json = false;
  bool allow_partial = false;
  bool timing = false;
  bool by_value = false;
  std::string as;
  std::string differences;
  std::string list;
};

psi::cli::Registrar compare_reg("compare", "compare the tensors two files share (HDF5, NumPy .npy, safetensors; bitwise, ULP, relative L2; B is the reference)",
                                [](CLI::App& sub) {
  auto o = std::make_shared<CompareOpts>();
  sub.add_option("A", o->a, "first file (psi output, a recording, any HDF5 file, a NumPy .npy or a safetensors file)")->required()->check(psi::cli::non_empty());
  sub.add_option("B", o->b, "second file, the reference of the relative L2 error")->required()->check(psi::cli::non_empty());
  sub.add_option("--only", o->only,
                 "compare only datasets whose path (e.g. /block_small/math/attn1) contains a match of "
                 "this regular expression (RE2 syntax, linear-time matching; at most 4096 characters); "
                 "anchor with ^ and $");
  sub.add_option("--map", o->maps,
                 "FROM=TO: pair A's datasets whose path starts with FROM, as whole path components "
                 "(/a/b names /a/b/c, never /a/bc), with B's at TO + the rest (repeatable; the first "
                 "matching FROM wins); a '*' in FROM matches within one component, and TO's '*'s take "
                 "what FROM's matched, in order: --map 'run/step_*/video=states/*/video_latent'")
      ->allow_extra_args(false);
  sub.add_flag("--strict", o->strict,
               "datasets present in only one file count as differences (exit 1) even with --only or --map "
               "(the default without them)");
  sub.add_flag("--subset", o->subset,
               "compare only what both files hold: datasets in one file only are listed, not failures "
               "(--only and --map imply it)");
  sub.add_flag("--json", o->json, "machine-readable output");
  sub.add_option("--as", o->as,
                 "bf16: read uint16 datasets that carry no dtype='bfloat16' attribute (BF16 bits kept by NumPy "
                 "or h5py, which have no BF16) as BF16, compared in BF16 ULPs; without it they compare as integers. "
                 "Two float32 tensors whose every value is a BF16 value (a .float() copy) compare as BF16 too")
      ->check(CLI::IsMember({"bf16"}));
  sub.add_flag("--by-value", o->by_value,
               "compare tensors of different element types (e.g. float32 against BF16) by value instead of "
               "refusing them: each element converted exactly to a double (an int64 a double cannot hold is "
               "refused); equal when the doubles are equal or both are NaN (payloads not compared); +0 against "
               "-0 is a sign-of-zero difference; ULPs are the coarser type's (BF16, then float32, then float64; "
               "steps of 1 between integer types), counted across the smallest interval of that type holding "
               "both values. Tensors of one element type are compared bitwise with or without it");
  sub.add_option("--differences", o->differences,
                 "N or all: under each dataset that differs, list its first N differing elements (or every "
                 "one): index, both values with their bits, and the ULP distance or a sign flip")
      ->transform(CLI::Validator(
          [](std::string& s) -> std::string {
            if (s == "all") return "";
            const auto v = psi::parse_whole(s, 1, std::uint64_t(std::numeric_limits<std::int64_t>::max()));
            if (!v) return "'" + s + "' is neither a whole number from 1 nor 'all'";
            s = std::to_string(*v);
            return "";
          },
          "N|all", "differences"));
  sub.add_option("--list", o->list,
                 "write every differing element of every dataset to this CSV file (" +
                     std::string(psi::report::kDifferencesCsvHeader) + ")")
      ->check(psi::cli::output_path());
  psi::cli::add_force_flag(sub);
  psi::cli::add_allow_links_option(sub);
  psi::cli::add_allow_unverified_flag(sub);
  sub.add_flag("--timing", o->timing,
               "also compare the timing fields of JSON text datasets (a report's wall times and the tables' "
               "timing columns), which differ from run to run and are otherwise listed as not compared");
  sub.footer(std::string(psi::cli::kExitRule) +
             "\npsi compare: 0 every dataset compared and bitwise equal (equal by value where --by-value compared two "
             "element types); 1 something differs (elements or shape), "
             "nothing was compared, or a dataset is in one file only (unless --only, --map or --subset); 2 a "
             "missing or non-HDF5 file, a dtype mismatch (without --by-value), data that does not match its sha256_full, or a tensor of a psi "
             "file or a recording with no sha256_full (psi and the recordings hash every tensor; a plain HDF5 file's "
             "data is compared as it is); with --allow-unverified such a tensor is compared, marked UNVERIFIED, and "
             "the exit status is 4 where it would be 0.");
  sub.add_flag("--allow-partial", o->allow_partial,
               "compare a partial file (an interrupted run's <report>.partial.h5) too; the output marks it PARTIAL");
  return [o] {
    psi::compare::CompareOptions opt;
    opt.only = o->only;
    opt.strict = o->strict;
    opt.subset = o->subset;
    opt.allow_partial = o->allow_partial;
    opt.timing = o->timing;
    opt.as_bf16 = o->as == "bf16";
    opt.by_value = o->by_value;
    const std::int64_t shown =
        o->differences.empty() ? 0 : o->differences == "all" ? psi::compare::kEveryDifference : std::stoll(o->differences);
    // --list collects every difference; the views still show the first `shown`.
    opt.differences = o->list.empty() ? shown : psi::compare::kEveryDifference;
    if (!o->list.empty()) {
      psi::outputs::check_output(o->list, {o->a, o->b}, "compare: --list",
                                 psi::outputs::first_line_is(psi::report::kDifferencesCsvHeader));
      const fs::path dir = fs::path(o->list).parent_path().empty() ? fs::path(".") : fs::path(o->list).parent_path();
      std::error_code ec;
      if (!fs::is_directory(dir, ec)) throw psi::Error("compare: --list " + o->list + ": no directory " + dir.string());
    }
    for (const auto& m : o->maps) opt.map.push_back(psi::compare::parse_path_map(m));
    auto report = psi::compare::compare_files(o->a, o->b, opt);
    report.differences = shown;
    if (!o->list.empty()) psi::outputs::write_file_atomically(o->list, psi::report::differences_csv(report));
    std::cout << (o->json ? psi::report::compare_json(report) : psi::report::compare_table(report));
    if (!o->list.empty() && !o->json) {
      std::int64_t n = 0;
      for (const auto& d : report.datasets) n += std::int64_t(d.differences.size());
      std::cout << "list: " << n << " differing elements written to " << psi::one_line(o->list) << "\n";
    }
    std::cout.flush();
    for (const auto& e : report.errors()) std::cerr << "psi: error: " << psi::one_line(e) << "\n";
    return report.exit_code();
  };
});

}  // namespace
