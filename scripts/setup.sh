#!/usr/bin/env bash
# Installs psi's build and test dependencies from Debian's packages (root, or sudo), then
# configures and builds into build/. Safe to run again: it installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake g++ make ninja-build pkg-config git libgmp-dev libboost-dev libhdf5-dev libeigen3-dev libre2-dev
          nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev libssl-dev
          hdf5-tools clang qemu-user librsvg2-bin fonts-dejavu-core
          munge slurmctld slurmd slurm-client)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "psi setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# nvcc is optional: the CUDA toolkit is not a Debian package here; CMake builds the CUDA
# backend when it finds nvcc (on PATH or at /usr/local/cuda).
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi

jobs=${PSI_JOBS:-$(nproc)}
# Ninja for a new build folder: unlike make it starts a layer's compiles before the layer below
# is archived, which on two cores took the sanitized build from 794 s to 527 s. A folder
# configured before keeps its generator.
generator=()
[ -f build/CMakeCache.txt ] || generator=(-G Ninja)
cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=Release ${PSI_CMAKE_ARGS:-} >/dev/null
cmake --build build -j"$jobs"
