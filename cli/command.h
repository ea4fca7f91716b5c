#pragma once
// Subcommand registry: each cli/cmd_*.cpp registers one `psi <name>` with its options and the
// function that runs it. main() only parses and dispatches.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/whole_number.h"
#include "hdf5/unverified.h"
#include "outputs/output_path.h"

namespace psi::cli {

using Runner = std::function<int()>;
// Declares the subcommand's options on `sub` and returns what runs it after parsing.
using Setup = std::function<Runner(CLI::App& sub)>;

struct Command {
  std::string name;
  std::string description;
  Setup setup;
};

std::vector<Command>& registry();

// parse_whole as the check of an integer option, given with ->transform(): the text is rewritten
// as the number's plain decimal digits, since CLI11 then converts it with base detection, which
// would read "010" as eight (->check() would discard the rewrite).
inline CLI::Validator whole_number(std::uint64_t lo = 0,
                                   std::uint64_t hi = std::uint64_t(std::numeric_limits<std::int64_t>::max())) {
  return CLI::Validator(
      [lo, hi](std::string& s) -> std::string {
        const auto v = parse_whole(s, lo, hi);
        if (!v) return "'" + s + "' is not a whole number from " + std::to_string(lo) + " to " + std::to_string(hi);
        s = std::to_string(*v);
        return "";
      },
      "UINT", "whole_number");
}

// The check for every option naming a file to write: an empty path is refused (it would
// otherwise mean "the default" or "no output" without a word).
inline CLI::Validator output_path() {
  return CLI::Validator([](std::string& s) { return s.empty() ? std::string("an empty path names no file") : std::string(); },
                        "PATH", "output_path");
}

// The check for every option naming something to read (a file, a folder, a dataset, a range): an
// empty value is refused; several were read as the option's default without a word.
inline CLI::Validator non_empty() {
  return CLI::Validator(
      [](std::string& s) { return s.empty() ? std::string("an empty value names nothing (leave the option out for its default)") : std::string(); },
      "TEXT", "non_empty");
}

// --force on a command that writes files: an existing output that psi did not write (a
// recording, anyone's file) is replaced instead of refused (outputs/output_path.h).
inline void add_force_flag(CLI::App& sub) {
  sub.add_flag_callback("--force", [] { outputs::set_force_replace(true); },
                        "replace an existing output file even if psi did not write it (without it such a file is "
                        "refused, exit 2)");
}

// --allow-link-to FILE (repeatable) on a command that reads HDF5 files: HDF5 external links that
// lead to FILE are followed (hdf5/h5.h); nothing else outside the files named is read. The
// files are checked, and allowed, when the command starts (main, allow_named_links).
std::vector<std::string>& named_link_targets();
inline void add_allow_links_option(CLI::App& sub) {
  sub.add_option_function<std::vector<std::string>>(
         "--allow-link-to",
         [](const std::vector<std::string>& files) {
           for (const std::string& f : files) named_link_targets().push_back(f);
         },
         "FILE: follow HDF5 external links that lead to FILE (repeat for more files); without it an input's "
         "external link is refused, exit 2. FILE counts as an input: no output may replace it")
      ->check(output_path());
}

// --allow-unverified on a command that reads recordings or reports: a tensor with nothing to
// check it against (no sha256_full; part of a tensor, or stored='none', without one) is read and
// the verdict marked unverified (hdf5/unverified.h) instead of refused with exit 2.
inline constexpr std::string_view kAllowUnverifiedHelp =
    "read tensors that cannot be checked (no sha256_full; stored rows or stored='none' without one) instead of "
    "refusing them (exit 2); the verdicts resting on them are marked UNVERIFIED in the output and in the report "
    "written (root attribute unverified), and the exit status is 4 where it would be 0";
inline void add_allow_unverified_flag(CLI::App& sub) {
  sub.add_flag_callback("--allow-unverified", [] { hdf5::set_allow_unverified(true); }, std::string(kAllowUnverifiedHelp));
}

// The exit-status rule of every psi command (psi::Exit), printed under each command's help.
inline constexpr std::string_view kExitRule =
    "Exit status: 0 it ran, and every bitwise claim the command makes held (results written); "
    "1 a comparison asked for found a difference (psi compare; psi probe --require-bitwise) or a "
    "bitwise claim of the command failed (psi run: e.g. transport-control's states, scheduling's "
    "probes); measurements (distances to a recording, oracle verdicts) are not claims; 2 bad input "
    "or usage; 3 internal error or a failed run; 4 it ran with --allow-unverified, read data it could not check "
    "and would otherwise have exited 0 (its verdicts are unverified); 128 + n interrupted by signal n (130 SIGINT, 143 SIGTERM).";

struct Registrar {
  Registrar(std::string name, std::string description, Setup setup) {
    registry().push_back({std::move(name), std::move(description), std::move(setup)});
  }
};

}  // namespace psi::cli
