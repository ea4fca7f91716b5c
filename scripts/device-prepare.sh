#!/usr/bin/env bash
# Fills .device/, the folder a GPU session carries to the lent device machine (which has nvcc,
# CMake, ninja and python3 but no package registry, no internet and probably none of the Debian
# -dev packages psi builds against). Run it HERE, before the device call:
#
#   .device/deps.tar.xz     the Debian packages psi needs to build and run there, fetched with
#                           apt-get download (runtime libraries with their dependencies), unpacked
#                           here with dpkg -x into one private prefix, pruned (static libraries,
#                           documentation, tools psi does not use, and all of Boost but the
#                           headers psi's sources reach) and packed; scripts/device-check.sh
#                           unpacks it into a private folder (never into /)
#   .device/reference/      the recordings the device run reads (scheduling and capacity read
#                           none; probes and block-controls on ltx2-22b read the four below)
#   .device/fallback.tar.xz psi and the device's test programs built here for sm_90, used only when
#                           the build on the device fails (skipped when it would not fit)
#   .device/manifest.txt    git revision, date, packages and versions, sizes
#
# The working tree that travels (tracked and untracked-not-ignored files plus the carried
# folder) must stay under 64 MiB: the script measures it and fails if it does not.
# Knobs: PSI_DEVICE_WORK (scratch folder, default build-device-prepare/), PSI_DEVICE_FALLBACK
# (1 default, 0 to skip the prebuilt fallback), PSI_SHARED (the shared/ folder; ../shared),
# PSI_JOBS (build jobs for the fallback).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

die() { echo "device-prepare: error: $*" >&2; exit 1; }
say() { echo "device-prepare: $*"; }

[ "$(dpkg --print-architecture 2>/dev/null)" = amd64 ] || die "this machine is not amd64; the device is x86-64 and needs amd64 packages"
command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || die "apt-get and dpkg-deb are needed"

work=${PSI_DEVICE_WORK:-$repo/build-device-prepare}
carry=$repo/.device
shared=${PSI_SHARED:-$repo/../shared}
limit=$((64 * 1024 * 1024))

# What psi's CMakeLists finds (find_package / pkg_check_modules) and its tests and benchmarks link.
dev_packages=(libhdf5-dev libgmp-dev libeigen3-dev nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev
              libbenchmark-dev libssl-dev pkgconf pkgconf-bin)
# The shared libraries the build links and psi loads; their Depends are followed below.
runtime_roots=(libhdf5-103-1 libgmpxx4ldbl libgmp10 libbenchmark1debian libssl3 libpkgconf3 libsz2 libaec0)
# Present on any glibc C++ system that can run nvcc (the device's are newer, hence compatible).
base_packages=(libc6 libgcc-s1 libstdc++6 gcc-12-base zlib1g)
# The recordings the device steps read: probes (probes_linear, probe_attn_traj) and
# block-controls on ltx2-22b (block_full_math with its FLASH control block_full_flash).
reference_files=(probes_linear.h5 probe_attn_traj.h5 block_full_math.h5 block_full_flash.h5 README.md h200-ceilings.jsonl)

mkdir -p "$work"
debs=$work/debs
rm -rf "$debs" "$work/prefix" "$work/boost"
mkdir -p "$debs" "$work/prefix" "$work/boost"

# --- (a) packages -------------------------------------------------------------------------
boost_dev=$(apt-cache depends libboost-dev 2>/dev/null | awk '/Depends: libboost[0-9.]*-dev/{print $2; exit}')
[ -n "$boost_dev" ] || die "apt-cache knows no libboost-dev (run apt-get update)"

closure=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces \
            --no-enhances "${runtime_roots[@]}" 2>/dev/null | grep -v '^ ' | grep -v '^<' | sort -u)
runtime=()
for p in $closure; do
  skip=0
  for b in "${base_packages[@]}"; do [ "$p" = "$b" ] && skip=1; done
  [ $skip = 1 ] || runtime+=("$p")
done
say "downloading ${#dev_packages[@]} -dev packages, $boost_dev (headers only) and ${#runtime[@]} runtime libraries"
(cd "$debs" && apt-get download -q "${dev_packages[@]}" "${runtime[@]}" "$boost_dev" >"$work/apt-download.log" 2>&1) ||
  die "apt-get download failed (see $work/apt-download.log; run apt-get update if the lists are stale)"

for d in "$debs"/*.deb; do
  case $(basename "$d") in
    "$boost_dev"_*) dpkg -x "$d" "$work/boost" ;;
    *) dpkg -x "$d" "$work/prefix" ;;
  esac
done

# Boost: only the headers psi's sources reach (from every file that includes a Boost header, as
# g++ resolves them in a Release build), and the CMake package files. The device's g++ is
# another version and Boost's headers branch on it, so every boost/ subfolder the sources reach
# travels whole where it is under 7 MiB (config/, predef/, type_traits/, mpl/, ...); the larger
# ones (math/) only with the headers reached.
boost_inc=$work/boost/usr/include
boost_users=$(grep -rl --include='*.cpp' --include='*.h' --include='*.cu' '#include <boost/' engine oracle probes reports experiments cli tests bench || true)
[ -n "$boost_users" ] || die "no psi source includes a Boost header; nothing to carry from $boost_dev"
: >"$work/boost-headers.txt"
for f in $boost_users; do
  g++ -std=c++20 -O3 -DNDEBUG -I"$boost_inc" -I"$repo" -M -MG -MT x "$f" 2>/dev/null |
    tr ' \\' '\n\n' | grep "^$boost_inc/boost/" >>"$work/boost-headers.txt" ||
    die "g++ could not resolve the includes of $f against $boost_dev"
done
mkdir -p "$work/prefix/usr/include"
boost_dirs=$(sed "s|^$boost_inc/||" "$work/boost-headers.txt" | awk -F/ 'NF > 2 {print $1 "/" $2}' | sort -u)
(cd "$boost_inc" && {
  sed "s|^$boost_inc/||" "$work/boost-headers.txt"
  for d in $boost_dirs; do [ "$(du -sk "$d" | cut -f1)" -lt 7168 ] && find "$d" -type f; done
} | sort -u | tar -cf - -T -) | tar -C "$work/prefix/usr/include" -xf - || die "copying the Boost headers failed"
cp -a "$work/boost/usr/lib/x86_64-linux-gnu/cmake/." "$work/prefix/usr/lib/x86_64-linux-gnu/cmake/"

# Some packages still install into /lib: one library folder in the prefix (merged /usr).
if [ -d "$work/prefix/lib" ]; then
  cp -a "$work/prefix/lib/." "$work/prefix/usr/lib/"
  rm -rf "$work/prefix/lib"
fi

# Prune what neither the build nor psi uses: documentation, tools, static libraries (but the
# GoogleTest and Google Benchmark ones the tests link), Fortran and C++ HDF5 bindings, sources.
p=${work:?}/prefix
rm -rf "$p/usr/share/doc" "$p/usr/share/man" "$p/usr/share/lintian" "$p/usr/share/bug" "$p/usr/share/info" \
       "$p/usr/src" "$p/usr/share/hdf5" "$p/usr/lib/x86_64-linux-gnu/gconv" "${p:?}/etc" "$p/usr/lib/x86_64-linux-gnu/sasl2" \
       "$p/usr/include/hdf5/serial/"*.mod "$p/usr/lib/x86_64-linux-gnu/engines-3" "$p/usr/lib/x86_64-linux-gnu/ossl-modules"
find "$p/usr/bin" -mindepth 1 ! -name pkgconf -delete 2>/dev/null || true
find "$p" -name '*.a' ! -name 'libgtest*.a' ! -name 'libgmock*.a' ! -name 'libbenchmark*.a' -delete
find "$p" -name '*fortran*' -delete
find "$p" -name '*hdf5*cpp*' -delete
find "$p" -xtype l -delete  # symlinks left dangling by the pruning

packages=$(for d in "$debs"/*.deb; do dpkg-deb --show --showformat='${Package} ${Version}\n' "$d"; done)

mkdir -p "$carry"
tmp=$carry/deps.tar.xz.tmp.$$
tar -C "$p" -cf - . | xz -9 -T0 >"$tmp" || { rm -f "$tmp"; die "packing the prefix failed"; }
mv "$tmp" "$carry/deps.tar.xz"
say "deps.tar.xz: $(du -k "$carry/deps.tar.xz" | cut -f1) KiB ($(du -sk "$p" | cut -f1) KiB unpacked)"

# --- (b) recordings -----------------------------------------------------------------------
[ -d "$shared/reference" ] || die "no recordings at $shared/reference (set PSI_SHARED)"
rm -rf "$carry/reference.tmp"
mkdir -p "$carry/reference.tmp"
for f in "${reference_files[@]}"; do
  [ -f "$shared/reference/$f" ] || die "recording $shared/reference/$f is missing"
  cp "$shared/reference/$f" "$carry/reference.tmp/$f"
  cmp -s "$shared/reference/$f" "$carry/reference.tmp/$f" || die "copy of $f differs from $shared/reference/$f"
done
rm -rf "$carry/reference"
mv "$carry/reference.tmp" "$carry/reference"

# --- manifest -------------------------------------------------------------------------------
revision=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
dirty=$(git status --porcelain --untracked-files=no 2>/dev/null | wc -l)
{
  echo "revision=$revision"
  echo "modified_tracked_files=$dirty"
  echo "prepared_utc=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "prepared_on=$(. /etc/os-release && echo "$PRETTY_NAME") $(uname -m)"
  echo "boost=$boost_dev ($(sort -u "$work/boost-headers.txt" | wc -l) headers reached; whole: $(for d in $boost_dirs; do [ "$(du -sk "$boost_inc/$d" | cut -f1)" -lt 7168 ] && printf '%s ' "${d#boost/}"; done))"
  echo "packages=$(echo "$packages" | paste -sd',')"
  (cd "$carry/reference" && for f in "${reference_files[@]}"; do echo "reference=$f $(sha256sum "$f" | cut -c1-16) $(stat -c %s "$f")"; done)
} >"$carry/manifest.txt.tmp"
mv "$carry/manifest.txt.tmp" "$carry/manifest.txt"

# --- sizes ----------------------------------------------------------------------------------
tree_bytes() {
  # Tracked and untracked-not-ignored files: what travels besides the carried paths.
  git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2>/dev/null | awk '{s+=$1} END {print s+0}'
}
tree=$(tree_bytes)
carry_bytes() { du -sb "$carry" | cut -f1; }

# --- (c) fallback ---------------------------------------------------------------------------
rm -f "$carry/fallback.tar.xz"
if [ "${PSI_DEVICE_FALLBACK:-1}" = 1 ]; then
  fb_prefix=$work/fallback-prefix
  rm -rf "$fb_prefix"
  mkdir -p "$fb_prefix"
  tar -C "$fb_prefix" -xJf "$carry/deps.tar.xz"
  say "building the fallback (psi and the device's test programs, sm_90) in $work/fallback-build"
  if bash scripts/device-build.sh "$fb_prefix" "$work/fallback-build" >"$work/fallback-build.log" 2>&1; then
    fb=$work/fallback
    rm -rf "$fb"
    mkdir -p "$fb/tests"
    cp "$work/fallback-build/psi" "$fb/psi"
    for t in $(bash scripts/device-build.sh --list-tests); do cp "$work/fallback-build/tests/$t" "$fb/tests/"; done
    # The CUDA backend module: psi and the test programs load it from their own folders.
    cp "$work/fallback-build/libpsi_cuda_backend.so" "$fb/"
    cp "$work/fallback-build/libpsi_cuda_backend.so" "$fb/tests/"
    tmp=$carry/fallback.tar.xz.tmp.$$
    tar -C "$fb" -cf - . | xz -9 -T0 >"$tmp" || { rm -f "$tmp"; die "packing the fallback failed"; }
    mv "$tmp" "$carry/fallback.tar.xz"
    if [ $((tree + $(carry_bytes))) -ge $limit ]; then
      rm -f "$carry/fallback.tar.xz"
      say "fallback left out: with it the travelling tree would exceed 64 MiB"
    else
      say "fallback.tar.xz: $(du -k "$carry/fallback.tar.xz" | cut -f1) KiB"
    fi
  else
    say "fallback build failed (see $work/fallback-build.log); carrying none"
  fi
fi

total=$((tree + $(carry_bytes)))
awk -v c="$(carry_bytes)" -v t="$tree" 'BEGIN { printf "device-prepare: carry .device: %.1f MiB; repository files that travel: %.1f MiB; total %.1f MiB of 64 MiB\n", c / 1048576, t / 1048576, (c + t) / 1048576 }'
find "$carry" -type f -printf '%s %P\n' | sort -k2 | awk '{printf "  %8.2f MiB  .device/%s\n", $1/1048576, $2}'
[ "$total" -lt "$limit" ] || die "the travelling tree is $total bytes, over 64 MiB"
say "done: run the device call with carry [\".device\"] (docs/device-runs/README.md)"
