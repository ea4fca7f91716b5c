#!/usr/bin/env bash
# Configures a sanitizer build: CUDA off, the libraries at -O2 with line tables, UBSan
# halting on its first finding. One place for the flags, so the AddressSanitizer tests and the
# libFuzzer targets share one build (scripts/sanitize.sh asan, scripts/fuzz.sh).
#
#   scripts/configure-sanitized.sh DIR SANITIZERS [CMAKE ARGS...]
#
# SANITIZERS: address,undefined (also builds the fuzz targets): clang, which libFuzzer needs and
# which compiles this build about 40 % faster than g++ at the same flags. thread: g++, the
# compiler of the main build, whose TSan stage times docs/reliability/ci-time.md records.
# Environment: PSI_CMAKE_ARGS (more configure arguments, e.g. -DPSI_SHARED_DIR=...).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$1 sanitize=$2
shift 2
cc=gcc cxx=g++ fuzz=OFF
if [ "$sanitize" = address,undefined ]; then
  cc=clang cxx=clang++ fuzz=ON
fi
if ! command -v "$cxx" >/dev/null; then
  echo "psi: the $sanitize build needs $cxx (scripts/setup.sh installs it)" >&2
  exit 2
fi
# Ninja for a new folder (scripts/setup.sh says why); one configured before keeps its generator.
generator=()
[ -f "$dir/CMakeCache.txt" ] || ! command -v ninja >/dev/null || generator=(-G Ninja)
# shellcheck disable=SC2086
cmake -S . -B "$dir" "${generator[@]}" -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPSI_NO_CUDA=ON -DPSI_SANITIZE="$sanitize" -DPSI_FUZZ="$fuzz" \
  -DCMAKE_CXX_FLAGS="-fno-sanitize-recover=all" -DCMAKE_C_FLAGS="-fno-sanitize-recover=all" ${PSI_CMAKE_ARGS:-} "$@" \
  >/dev/null
