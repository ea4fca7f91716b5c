#pragma once
// Backend selection: "cpu", "cuda" (an error without a device), or "auto" (CUDA only when a
// device is present, otherwise the CPU backend with a one-line note).
#include <memory>
#include <string>
#include <string_view>

#include "engine/runtime/backend.h"
#include "engine/runtime/cpu_backend.h"

namespace psi::rt {

enum class BackendKind { cpu, cuda };

// True when this build contains the CUDA backend.
bool cuda_backend_built();
// CUDA devices visible now (0 without the CUDA backend, a driver or a device; *why says which).
int cuda_devices(std::string* why);

// The decision alone, for a given device count (testable without a GPU). `why_none` says why
// the count is 0. Sets *note when "auto" falls back to the CPU backend.
BackendKind choose_backend(std::string_view requested, int device_count, bool cuda_built,
                           std::string_view why_none, bool chaos, std::string* note);

struct BackendChoice {
  std::unique_ptr<Backend> backend;
  std::string note;  // the fallback note, empty when none (also printed to stderr)
};

BackendChoice make_backend(std::string_view requested, const CpuBackendOptions& cpu = {});

}  // namespace psi::rt
