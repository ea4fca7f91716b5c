// psi synthinit: print or hash a SynthInit v1 tensor, to check an implementation by hand.
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <iostream>
#include <memory>

#include "cli/command.h"
#include "engine/error.h"
#include "engine/memory.h"
#include "engine/sha256.h"
#include "engine/synthinit.h"
#include "hdf5/h5.h"
#include "hdf5/schema.h"
#include "outputs/output_path.h"

namespace {

struct SynthinitOpts {
  std::string name;
  std::vector<std::int64_t> shape;
  std::uint64_t seed = 0;
  int head = 4;
  std::string out;
};

psi::cli::Registrar synthinit_reg("synthinit", "print the first values and the SHA-256 of a SynthInit v1 tensor",
                                  [](CLI::App& sub) {
  auto o = std::make_shared<SynthinitOpts>();
  sub.add_option("name", o->name, "tensor name, e.g. transformer_blocks.0.attn1.to_q.weight")->required();
  sub.add_option("--shape", o->shape, "shape: the dimensions as separate words, e.g. --shape 4096 4096")
      ->required()
      ->transform(CLI::Validator(
          [](std::string& s) -> std::string {
            // "4096,4096" or "4096x4096": one word for several dimensions; say the form psi takes.
            // (0x10 is a number in another base, refused as one.)
            const bool by_x = s.find_first_of("xX") != std::string::npos && !s.starts_with("0x") && !s.starts_with("0X");
            if ((by_x || s.find_first_of(",*[]() ") != std::string::npos) &&
                s.find_first_of("0123456789") != std::string::npos) {
              std::string words;
              for (char ch : s) words += std::isdigit(static_cast<unsigned char>(ch)) ? ch : ' ';
              std::string spaced;
              for (std::size_t i = 0; i < words.size(); ++i)
                if (words[i] != ' ' || (!spaced.empty() && spaced.back() != ' ')) spaced += words[i];
              while (!spaced.empty() && spaced.back() == ' ') spaced.pop_back();
              return "'" + s + "': give the dimensions as separate words, e.g. --shape " + spaced;
            }
            return psi::cli::whole_number()(s);
          },
          "UINT", "shape dimension"));
  sub.add_option("--seed", o->seed, "global seed G")->transform(psi::cli::whole_number(0, std::numeric_limits<std::uint64_t>::max()));
  sub.add_option("--head", o->head, "how many leading values to print")
      ->transform(psi::cli::whole_number(0, std::uint64_t(std::numeric_limits<int>::max())));
  sub.add_option("--out", o->out,
                 "also write the tensor to this HDF5 file as dataset /<name> (BF16 as uint16, dtype "
                 "'bfloat16', its sha256_full: psi verify checks it), for tools outside psi (the device check's PyTorch comparison)")
      ->check(psi::cli::output_path());
  psi::cli::add_force_flag(sub);
  return [o] {
    // The element count is checked before anything is made: a product past 2^63 used to wrap to a
    // small count (a SHA-256 of nothing, exit 0), one past the machine's memory to bad_alloc.
    std::uint64_t elements = 1;
    for (std::int64_t d : o->shape) {
      if (d < 0) throw psi::Error("synthinit: --shape " + std::to_string(d) + " is negative");
      if (d != 0 && elements > std::uint64_t(std::numeric_limits<std::int64_t>::max()) / std::uint64_t(d))
        throw psi::Error("synthinit: --shape " + psi::shape_str(o->shape) + " has more than 2^63 - 1 elements");
      elements *= std::uint64_t(d);
    }
    const std::uint64_t memory = psi::physical_memory_bytes();
    if (elements > memory / 2)
      throw psi::Error("synthinit: --shape " + psi::shape_str(o->shape) + " is " + std::to_string(elements) +
                       " BF16 elements, more than this machine's memory (" + std::to_string(memory) + " bytes) holds");
    if (!o->out.empty()) {
      psi::outputs::check_output(o->out, {}, "synthinit: --out", psi::hdf5::is_psi_h5);
      if (o->shape.size() > std::size_t(psi::hdf5::kMaxRank))
        throw psi::Error("synthinit: --out: a tensor of rank " + std::to_string(o->shape.size()) +
                         " cannot be written (HDF5 holds at most " + std::to_string(psi::hdf5::kMaxRank) + " dimensions)");
    }
    auto spec = psi::synthinit::classify(o->name, o->shape);
    auto t = psi::synthinit::make(o->name, o->shape, o->seed);
    std::printf("%s %s role=%s offset=%g e=%d\n", o->name.c_str(), psi::shape_str(o->shape).c_str(),
                std::string(psi::synthinit::role_name(spec.role)).c_str(), double(spec.offset), spec.e);
    for (int i = 0; i < o->head && i < t.numel(); ++i)
      std::printf("  [%d] 0x%04x %.17g\n", i, t.data[i].bits, double(t.data[i].to_float()));
    const std::string sha256 = psi::sha256_hex(t);
    std::printf("sha256 %s\n", sha256.c_str());
    if (!o->out.empty()) {
      psi::hdf5::File f = psi::hdf5::File::create(o->out);
      f.write_bf16("/" + o->name, t);
      // Every tensor psi writes carries its hash, so that psi verify (and every reader) checks it.
      f.set_attr("/" + o->name, psi::hdf5::attr::sha256_full, sha256);
      // Not a psi-h5/1 report, but psi's: a later --out may replace it (outputs/output_path.h).
      f.set_attr("/", "schema", std::string("psi-synthinit/1"));
      f.commit();
    }
    return 0;
  };
});

}  // namespace
