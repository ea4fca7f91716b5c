#pragma once
// The CPU backend: "device memory" is one host allocation; each stream is a worker thread that
// runs its queue in order; events and cross-stream waits follow CUDA's semantics. Kernels run
// whole on one worker thread, so their arithmetic never depends on scheduling.
#include <cstdint>
#include <memory>
#include <optional>

#include "engine/backend/backend.h"

namespace psi::rt {

struct CpuBackendOptions {
  // Chaos mode: with a seed, each stream sleeps a random 0..chaos_max_us microseconds (with
  // probability 1/2) before every operation, to expose missing dependencies.
  std::optional<std::uint64_t> chaos_seed;
  unsigned chaos_max_us = 40;
};

std::unique_ptr<Backend> make_cpu_backend(const CpuBackendOptions& options = {});

}  // namespace psi::rt
