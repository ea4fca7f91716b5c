// psi device ceilings: the measured limits of the GPU a streamed block is compared with.
// psi device summary DIR: the device check's summary page (scripts/device-check.sh).
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "device_check/summary.h"
#include "engine/backend/backend_factory.h"
#include "engine/error.h"
#include "engine/json_read.h"
#include "outputs/output_path.h"
#include "outputs/pending_output.h"

namespace {

struct DeviceOpts {
  int repeats = 10;
  bool json = false;
  std::string dir, out, json_out;
};

// A summary JSON psi wrote: an object (of at most 64 MiB) with its "context" and "steps".
bool is_summary_json(const std::filesystem::path& p) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(p, ec);
  if (ec || size > (std::uintmax_t(64) << 20)) return false;
  std::ifstream in(p, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const nlohmann::json j = psi::read_json_if_valid(text, p.string()).value_or(nullptr);
  return j.is_object() && j.contains("context") && j.contains("steps");
}

int summary(const DeviceOpts& o) {
  const auto inputs = psi::device_check::check_folder_inputs(o.dir);
  if (!o.json_out.empty()) psi::outputs::check_output(o.json_out, inputs, "device summary: --json", is_summary_json);
  if (!o.out.empty())
    psi::outputs::check_output(o.out, inputs, "device summary: --out",
                               psi::outputs::first_line_starts_with(psi::device_check::kSummaryTitle));
  const auto folder = psi::device_check::read_check_folder(o.dir);
  const std::string md = psi::device_check::render_markdown(folder);
  if (!o.json_out.empty()) psi::outputs::write_file_atomically(o.json_out, psi::device_check::to_json(folder).dump(1) + "\n");
  if (!o.out.empty()) psi::outputs::write_file_atomically(o.out, md);
  std::cout << md;
  return 0;
}

psi::cli::Registrar device_reg("device",
                               "GPU measurements: `psi device ceilings` (pinned copy bandwidth, cuBLAS BF16 rate), "
                               "`psi device summary DIR` (the device check's summary)",
                               [](CLI::App& sub) {
  auto o = std::make_shared<DeviceOpts>();
  sub.require_subcommand(1);
  CLI::App* ceil = sub.add_subcommand("ceilings", "pinned H2D/D2H bandwidth by copy size and cuBLAS BF16 GEMM rate");
  ceil->add_option("--repeats", o->repeats, "timed repetitions per measurement (median)")
      ->transform(psi::cli::whole_number(1, 100000));
  ceil->add_flag("--json", o->json, "JSON lines as in the recordings' h200-ceilings.jsonl");
  CLI::App* sum = sub.add_subcommand("summary", "the device check's summary from a check folder (scripts/device-check.sh)");
  psi::cli::add_force_flag(*sum);
  sum->add_option("dir", o->dir, "check folder: context.tsv, steps.tsv, ceilings.jsonl, <experiment>.h5, tests/*.json")
      ->required()
      ->check(psi::cli::non_empty());
  sum->add_option("--out", o->out, "also write the Markdown here")->check(psi::cli::output_path());
  sum->add_option("--json", o->json_out, "also write everything read, as JSON, here")->check(psi::cli::output_path());
  return [o, sum]() -> int {
    if (sum->parsed()) return summary(*o);
    std::string why;
    // `why` is the CUDA runtime's answer, or why the CUDA backend is not there to ask it.
    if (psi::rt::cuda_devices(&why) == 0)
      throw psi::Error("psi device ceilings needs a CUDA GPU, and this machine has none it can use (" + why + ")");
    // A device was found, so this build has the CUDA backend and its services.
    const psi::rt::DeviceServicesChoice device = psi::rt::make_device_services("cuda", 0);
    psi::rt::Ceilings c;
    try {
      c = device.services->measure_ceilings(o->repeats);
    } catch (const std::runtime_error& e) {
      throw psi::Error(e.what(), psi::Exit::run_failed);
    }
    for (const auto& x : c.copies) {
      if (o->json)
        std::cout << nlohmann::json{{"kind", "copy"}, {"MiB", x.mib}, {"h2d_GBps", x.h2d_gbps}, {"d2h_GBps", x.d2h_gbps}}.dump() << "\n";
      else
        std::printf("copy %4lld MiB  H2D %7.2f GB/s  D2H %7.2f GB/s\n", (long long)x.mib, x.h2d_gbps, x.d2h_gbps);
    }
    for (const auto& g : c.gemms) {
      if (o->json)
        std::cout << nlohmann::json{{"kind", "gemm"}, {"m", g.m}, {"n", g.n}, {"k", g.k}, {"ms", g.ms}, {"TFLOPs", g.tflops}}.dump() << "\n";
      else
        std::printf("gemm %5lld x %5lld x %5lld  %8.3f ms  %7.1f TFLOP/s\n", (long long)g.m, (long long)g.n, (long long)g.k,
                    g.ms, g.tflops);
    }
    if (!o->json) std::printf("device: %s\n", c.device.c_str());
    return 0;
  };
});

}  // namespace
