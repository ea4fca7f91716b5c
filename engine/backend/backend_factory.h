#pragma once
// Backend selection: "cpu", "cuda" (an error without a device), or "auto" (CUDA only when a
// device is present, otherwise the CPU backend with a one-line note); and a backend's device
// services (device.h). The factory is the only code that knows whether this build holds the
// CUDA backend, and the only code that loads it: the backend is a module beside the psi program
// (cuda_module.h), loaded the first time CUDA could be chosen.
#include <memory>
#include <string>
#include <string_view>

#include "engine/backend/backend.h"
#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/device.h"

namespace psi::rt {

enum class BackendKind { cpu, cuda };

// The name a kind is recorded and printed by: "cpu", "cuda".
std::string_view backend_name(BackendKind k);
// "cpu" or "cuda" back to its kind (psi::Error naming the text otherwise).
BackendKind parse_backend_kind(std::string_view name);
// A request is "auto", "cpu" or "cuda" (psi::Error otherwise): the one rule for every caller that
// takes a request before the factory resolves it (the PSI executor checks it at construction).
void check_backend_request(std::string_view requested);

// What a backend implies for the experiments, asked instead of comparing its name.
struct BackendTraits {
  // Its operators are the host's (engine/ops, bit for bit), so a run on it is checked bitwise
  // against the host block; CUDA's products are cuBLAS's, checked against a run of its own.
  bool host_bits = true;
  // The block's weights are kept resident on the device, so a block's time leaves out the
  // weight source (CUDA); the CPU backend's weights are in host memory already.
  bool resident_weights = false;
  // Its memory comes from a device pool that a reservation can shrink (CUDA); else a fixed
  // budget caps the arena and pinned host buffers.
  bool device_pool = false;
};
BackendTraits backend_traits(BackendKind k);

// True when this build has the CUDA backend (its module was built); loads nothing.
bool cuda_backend_built();
// True when the CUDA backend's module is loaded (loading it on the first call); otherwise false,
// with *why saying why the module did not load, or empty in a build without the backend.
bool cuda_backend_loaded(std::string* why);
// CUDA devices visible now (0 without the CUDA backend, its module, a driver or a device; *why
// says which). Loads the module.
int cuda_devices(std::string* why);

// The decision alone, for a given device count (testable without a GPU). `cuda_loaded` is
// whether the CUDA backend is there to use; `why_none` says why it is not (empty in a build
// without it) or, when it is, why the count is 0. Sets *note when "auto" falls back to the CPU.
BackendKind choose_backend(std::string_view requested, int device_count, bool cuda_loaded,
                           std::string_view why_none, bool chaos, std::string* note);
// The decision on this machine: loads the module and counts devices unless `requested` is
// "cpu".
BackendKind resolve_backend(std::string_view requested, bool chaos, std::string* note);

struct BackendChoice {
  std::unique_ptr<Backend> backend;
  std::string note;  // the fallback note, empty when none (also printed to stderr)
};

BackendChoice make_backend(std::string_view requested, const CpuBackendOptions& cpu = {});

struct DeviceServicesChoice {
  std::unique_ptr<DeviceServices> services;  // null when there are none; `why` says why
  // False for a backend that has no device memory (the CPU backend): what needs a device is then
  // not applicable there, rather than unavailable.
  bool has_device = false;
  std::string why;
};

// The device services of the resolved backend `backend` ("cpu" or "cuda") on its device number
// `device`. Probes nothing: a missing device shows when the services are first asked.
DeviceServicesChoice make_device_services(std::string_view backend, int device);

}  // namespace psi::rt
