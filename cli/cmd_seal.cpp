// psi seal IN --out OUT.h5: a user's tensors (HDF5 of any layout, .npy, .npz, safetensors) copied
// into a psi file with a sha256_full on each (hdf5/seal.h), for data to be checked from then on.
#include <cstdio>
#include <memory>
#include <string>

#include "cli/command.h"
#include "engine/error.h"
#include "hdf5/schema.h"
#include "hdf5/seal.h"
#include "outputs/output_path.h"

namespace {

struct SealOpts {
  std::string in, out, as;
};

psi::cli::Registrar seal_reg("seal", "copy a file's tensors (HDF5, .npy, .npz, safetensors) into a psi file with a "
                                     "sha256_full on each, so that every reader checks them from then on",
                             [](CLI::App& sub) {
  auto o = std::make_shared<SealOpts>();
  sub.add_option("input", o->in, "the file to seal: HDF5 of any layout, NumPy .npy or .npz, safetensors")
      ->required()
      ->check(psi::cli::non_empty());
  sub.add_option("--out", o->out, "the psi file to write (an HDF5 file, schema psi-seal/1)")
      ->required()
      ->check(psi::cli::output_path());
  sub.add_option("--as", o->as, "bf16: uint16 datasets without a dtype label hold BF16 bits (NumPy and h5py have no "
                                "BF16), sealed as BF16")
      ->check(CLI::IsMember({"bf16"}));
  psi::cli::add_force_flag(sub);
  psi::cli::add_allow_links_option(sub);
  psi::cli::add_allow_unverified_flag(sub);
  sub.footer(std::string(psi::cli::kExitRule) +
             "\npsi seal: a tensor that does not match the sha256_full its file records is refused (exit 2), as is "
             "one without a hash in a psi file or a recording (unless --allow-unverified); a user's own file "
             "records none, and its tensors are sealed as they are. psi verify accepts every file psi seal writes.");
  return [o] {
    psi::outputs::check_output(o->out, {o->in}, "seal: --out", psi::hdf5::is_psi_h5);
    const auto sealed = psi::hdf5::seal(o->in, o->out, o->as == "bf16");
    for (const auto& t : sealed)
      std::printf("%-10s %s%s%s\n", t.dtype.c_str(), psi::one_line(t.path).c_str(), t.sha256.empty() ? "" : "  sha256 ",
                  t.sha256.c_str());
    std::printf("psi seal: %zu dataset%s of %s written to %s\n", sealed.size(), sealed.size() == 1 ? "" : "s",
                psi::one_line(o->in).c_str(), psi::one_line(o->out).c_str());
    return 0;
  };
});

}  // namespace
