// psi verify FILE…: each file checked on its own (hdf5/verify.h) — what a user runs before
// trusting a recording or a report they were sent. Exit 0 every check of every file held; 1 a
// check failed (a hash, a non-finite count, a dtype label, the schema, a partial file), each
// named; 2 a file psi cannot read as a whole (not HDF5, links or storage outside the file, a
// malformed integrity attribute), one line, or a tensor with no sha256_full, each named.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/command.h"
#include "engine/error.h"
#include "hdf5/verify.h"

namespace {

psi::cli::Registrar verify_reg("verify", "check HDF5 files on their own: storage inside the file, every sha256_full, "
                                         "non-finite counts, schema, partial marker",
                               [](CLI::App& sub) {
  auto files = std::make_shared<std::vector<std::string>>();
  sub.add_option("files", *files, "psi reports, state files or recordings")->required()->check(psi::cli::non_empty());
  psi::cli::add_allow_links_option(sub);
  psi::cli::add_allow_unverified_flag(sub);
  sub.footer(std::string(psi::cli::kExitRule) +
             "\npsi verify: 0 every check of every file held; 1 a check failed (data that does not match its "
             "sha256_full, a non-finite count that does not match nonfinite_count, a dtype label that does not match "
             "the stored type, another psi-h5 schema, a partial file), each named; 2 a file psi cannot read as a "
             "whole (not HDF5, a soft link or an external link --allow-link-to does not allow, external "
             "storage, a virtual dataset, a malformed integrity attribute) or a tensor with nothing to check it "
             "against (no sha256_full; stored rows or stored='none' without one), each named; with "
             "--allow-unverified such a tensor is a note marked UNVERIFIED and the exit status 4 where it would be 0.");
  return [files] {
    int status = int(psi::Exit::ok);
    std::string refused;  // the first file with a tensor it cannot check: exit 2 says so on stderr too
    std::size_t refused_files = 0;
    for (const std::string& name : *files) {
      const psi::hdf5::VerifyReport r = psi::hdf5::verify_file(name);
      for (const auto& n : r.notes) std::printf("  note: %s\n", psi::one_line(n).c_str());
      for (const auto& p : r.problems) std::printf("  problem: %s\n", psi::one_line(p).c_str());
      if (r.ok())
        std::printf("psi verify %s: OK (%s; %lld datasets read, %lld sha256_full equal to the data, %lld non-finite "
                    "elements%s)\n",
                    psi::one_line(name).c_str(), r.format.c_str(), (long long)r.datasets, (long long)r.hashes_checked,
                    (long long)r.nonfinite,
                    r.unchecked ? (", " + std::to_string(r.unchecked) + " not read").c_str() : "");
      else
        std::printf("psi verify %s: %zu problem%s\n", psi::one_line(name).c_str(), r.problems.size(), r.problems.size() == 1 ? "" : "s");
      if (!r.ok()) status = std::max(status, int(r.unverifiable ? psi::Exit::bad_input : psi::Exit::differs));
      if (r.unverifiable && refused_files++ == 0)
        refused = name + ": " + std::to_string(r.unverifiable) + " tensor" + (r.unverifiable == 1 ? "" : "s") +
                  " with nothing to check " + (r.unverifiable == 1 ? "it" : "them") + " against (no sha256_full)";
    }
    if (refused_files > 0)
      throw psi::Error("verify: " + refused +
                       (refused_files > 1 ? " and " + std::to_string(refused_files - 1) + " more file(s)" : "") +
                       "; each is named above");
    return status;
  };
});

}  // namespace
