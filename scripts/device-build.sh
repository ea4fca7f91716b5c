#!/usr/bin/env bash
# Configures and builds psi against a private prefix of unpacked Debian packages (the one
# scripts/device-prepare.sh packs into .device/deps.tar.xz), for sm_90, Release:
#   bash scripts/device-build.sh PREFIX BUILD_DIR [TARGET...]
#   bash scripts/device-build.sh --list-tests
# Default targets: psi and the device's test programs (--list-tests prints them: every
# tests/test_cuda*.cpp, and every test file that branches on a CUDA device being there). Used by
# scripts/device-check.sh on the device and by device-prepare.sh for the prebuilt fallback, so
# both build the same way. Nothing is installed: headers, CMake packages and pkg-config files
# come from PREFIX; the executables find PREFIX's shared libraries through their RPATH
# (DT_RPATH, which also serves the libraries' own dependencies), so no LD_LIBRARY_PATH is set
# for the compilers. Knobs: PSI_JOBS (default: all cores), PSI_CMAKE_ARGS (extra cmake
# arguments), PSI_DEVICE_SHARED_DIR (psi's built-in shared/ folder: PSI_SHARED_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "device-build: error: $*" >&2; exit 1; }

device_tests() {
  local t
  for t in tests/test_*.cpp; do
    case $t in
      tests/test_cuda*) basename "$t" .cpp ;;
      *) grep -q 'cuda_devices(' "$t" && basename "$t" .cpp ;;
    esac
  done
  return 0
}
if [ "${1:-}" = --list-tests ]; then device_tests; exit 0; fi
[ $# -ge 2 ] || die "usage: device-build.sh PREFIX BUILD_DIR [TARGET...]"
prefix=$(cd "$1" 2>/dev/null && pwd) || die "prefix $1 is not a folder"
build=$2
shift 2
lib=$prefix/usr/lib/x86_64-linux-gnu
{ [ -d "$lib" ] && [ -x "$prefix/usr/bin/pkgconf" ]; } || die "$prefix holds no unpacked packages (usr/lib/x86_64-linux-gnu, usr/bin/pkgconf)"

# Multiarch headers (openssl/opensslconf.h, gmp.h) live beside the others in the system's
# include/x86_64-linux-gnu, which the compilers search only under /usr.
multiarch=$prefix/usr/include/x86_64-linux-gnu

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(echo psi; device_tests)
fi

nvcc=$(command -v nvcc || true)
if [ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ]; then nvcc=/usr/local/cuda/bin/nvcc; fi
[ -n "$nvcc" ] || die "no nvcc on PATH or at /usr/local/cuda/bin"

# pkgconf from the prefix, reading only the prefix's .pc files and rewriting their /usr paths
# into it; system-path filtering is off so that the prefix's -I and -L survive.
mkdir -p "$prefix/bin"
cat >"$prefix/bin/pkg-config.tmp" <<EOF
#!/bin/sh
export LD_LIBRARY_PATH="$lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export PKG_CONFIG_LIBDIR="$lib/pkgconfig:$prefix/usr/share/pkgconfig"
export PKG_CONFIG_SYSROOT_DIR="$prefix"
export PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1 PKG_CONFIG_ALLOW_SYSTEM_LIBS=1
exec "$prefix/usr/bin/pkgconf" "\$@"
EOF
chmod +x "$prefix/bin/pkg-config.tmp"
mv "$prefix/bin/pkg-config.tmp" "$prefix/bin/pkg-config"
"$prefix/bin/pkg-config" --exists gmpxx || die "the prefix's pkg-config does not find gmpxx"

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
shared_arg=()
[ -n "${PSI_DEVICE_SHARED_DIR:-}" ] && shared_arg=(-DPSI_SHARED_DIR="$PSI_DEVICE_SHARED_DIR")

mkdir -p "$build"
echo "device-build: configuring $build (prefix $prefix, nvcc $nvcc, targets ${targets[*]})"
# shellcheck disable=SC2086
cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_PREFIX_PATH="$prefix/usr" -DPKG_CONFIG_EXECUTABLE="$prefix/bin/pkg-config" \
  -DOPENSSL_ROOT_DIR="$prefix/usr" \
  -DCMAKE_EXE_LINKER_FLAGS="-Wl,--disable-new-dtags -Wl,-rpath,$lib -Wl,-rpath-link,$lib" \
  -DCMAKE_C_FLAGS="-isystem $multiarch" -DCMAKE_CXX_FLAGS="-isystem $multiarch" -DCMAKE_CUDA_FLAGS="-isystem $multiarch" \
  "${shared_arg[@]}" ${PSI_CMAKE_ARGS:-} | tee "$build/psi-configure.log"
grep -q "psi: CUDA backend ON" "$build/psi-configure.log" || die "CMake did not enable the CUDA backend in $build"

echo "device-build: building with ${PSI_JOBS:-$(nproc)} jobs"
cmake --build "$build" -j"${PSI_JOBS:-$(nproc)}" --target "${targets[@]}"

# Every built program, and the CUDA backend module psi loads (built with psi), must load with
# what the prefix and the system hold.
for t in "${targets[@]}" libpsi_cuda_backend.so; do
  exe=$build/$t
  [ -x "$exe" ] || exe=$build/tests/$t
  [ -x "$exe" ] || die "target $t built no program"
  if ldd "$exe" | grep -q "not found"; then
    die "$exe cannot load: $(ldd "$exe" | grep 'not found' | tr -s ' \t' ' ' | paste -sd';')"
  fi
done
echo "device-build: built ${targets[*]} in $build"
