#!/usr/bin/env bash
# The GPU check (issue 7): the ONE command of a device call on a fresh H200 machine, after
# scripts/device-prepare.sh filled .device/ here (docs/device-runs/README.md has the exact call):
#   bash scripts/device-check.sh
# Unpacks the carried packages into a private prefix, builds psi and the device test programs for
# sm_90 (or falls back to the carried prebuilt ones), runs the device test programs, measures the
# ceilings (`psi device ceilings`), runs scheduling, probes, block-controls and capacity on the
# full-size first block, and writes under $OUT: summary.md (`psi device summary`), summary.json,
# log.txt and check.tar.gz (context, step results, test results, logs, the reports that are small
# enough). Each step has a time limit inside one overall budget, and a failed step does not stop
# the others. On CPU, the same steps at tiny size test the plumbing:
#   PSI_DEVICE_CHECK_BACKEND=cpu PSI_DEVICE_CHECK_MODEL=tiny bash scripts/device-check.sh
# Knobs (PSI_DEVICE_CHECK_*): BACKEND (cuda), MODEL (ltx2-22b), BUDGET (seconds for the whole
# check, 450), STEPS (which steps, default all: unpack build tests ceilings scheduling probes
# torch-linear block-controls capacity scheduling-fit), BUILD_DIR (build-device), PREFIX (/tmp/psi-device-prefix), REFERENCE
# (the recordings; default the first of .device/reference, $PSI_SHARED/reference,
# ../shared/reference holding what the steps read), WORK (out/device-check-work), QUICK (1: the
# experiments' --quick). OUT defaults to out/device-check.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
t_start=$(date +%s)

backend=${PSI_DEVICE_CHECK_BACKEND:-cuda}
model=${PSI_DEVICE_CHECK_MODEL:-ltx2-22b}
budget=${PSI_DEVICE_CHECK_BUDGET:-450}
steps=" ${PSI_DEVICE_CHECK_STEPS:-unpack build tests ceilings scheduling probes torch-linear block-controls capacity scheduling-fit} "
build=${PSI_DEVICE_CHECK_BUILD_DIR:-$repo/build-device}
prefix=${PSI_DEVICE_CHECK_PREFIX:-/tmp/psi-device-prefix}
work=${PSI_DEVICE_CHECK_WORK:-$repo/out/device-check-work}
out=${OUT:-$repo/out/device-check}
quick=()
[ "${PSI_DEVICE_CHECK_QUICK:-0}" = 1 ] && quick=(--quick)
reserve=20  # seconds kept for the summary and packing
deadline=$((t_start + budget - reserve))

case $backend in cpu|cuda) ;; *) echo "device-check: error: PSI_DEVICE_CHECK_BACKEND must be cpu or cuda, not '$backend'" >&2; exit 2 ;; esac
case $build in /*) ;; *) build=$repo/$build ;; esac
case $work in /*) ;; *) work=$repo/$work ;; esac

mkdir -p "$out"
rm -f "$out/summary.md" "$out/summary.json" "$out/log.txt" "$out/check.tar.gz"
rm -rf "$work"
mkdir -p "$work/logs" "$work/tests"
exec > >(tee "$out/log.txt") 2>&1
tee_pid=$!

say() { echo "device-check: $*"; }
ctx() { printf '%s\t%s\n' "$1" "$(printf '%s' "$2" | tr '\t\n' '  ')" >>"$work/context.tsv"; }
has_step() { [[ $steps == *" $1 "* ]]; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# Records one step's result in steps.tsv: name, exit code, seconds, note (one line).
record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$(printf '%s' "$4" | tr '\t\n' '  ' | cut -c1-300)" >>"$work/steps.tsv"; }

# run_step NAME MAX_SECONDS COMMAND...: runs under timeout (the step's maximum or what is left
# of the budget), output to the log and logs/NAME.log; never stops the script.
run_step() {
  local name=$1 max=$2 left limit t0 rc note
  shift 2
  left=$((deadline - $(date +%s)))
  limit=$((max < left ? max : left))
  if [ "$limit" -lt 5 ]; then
    say "=== $name: skipped, the check's time budget is spent"
    record "$name" 124 0 "skipped: the check's time budget ($budget s) is spent"
    return 1
  fi
  say "=== $name (at most ${limit} s): $*"
  t0=$(now)
  set +e
  timeout -k 10 "$limit" "$@" 2>&1 | tee "$work/logs/$name.log"
  rc=${PIPESTATUS[0]}
  set -e
  note=""
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    note="stopped at its limit of $limit s"
  elif [ "$rc" != 0 ]; then
    note=$(grep -m1 -E 'error:|Error|FAILED' "$work/logs/$name.log" || tail -n1 "$work/logs/$name.log" || true)
  fi
  record "$name" "$rc" "$(since "$t0")" "$note"
  say "=== $name: exit $rc after $(since "$t0") s"
  return "$rc"
}

# --- context ------------------------------------------------------------------------------------
ctx date "$(date -u +%Y-%m-%d)"
ctx started_utc "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
gpu=""
if command -v nvidia-smi >/dev/null; then
  gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -n1 || true)
fi
cpu_model=$(awk -F': ' '/^model name/{print $2; exit}' /proc/cpuinfo 2>/dev/null || true)
if [ "$backend" = cuda ]; then
  ctx device "${gpu%%,*}"
  ctx gpu "${gpu:-no GPU listed by nvidia-smi}"
else
  ctx device "${cpu_model:-CPU} (CPU backend)"
  [ -n "$gpu" ] && ctx gpu "$gpu"
fi
ctx cpu "${cpu_model:-unknown} × $(nproc) threads, $(awk '/^MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo) memory"
ctx os "$(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME"), kernel $(uname -r)"
ctx backend "$backend"
ctx model "$model${quick:+ (--quick)}"
if git rev-parse --git-dir >/dev/null 2>&1; then
  ctx revision "$(git rev-parse --short=12 HEAD) ($(git status --porcelain --untracked-files=no | wc -l) modified tracked files)"
elif [ -f .device/manifest.txt ]; then
  ctx revision "$(sed -n 's/^revision=//p' .device/manifest.txt) ($(sed -n 's/^modified_tracked_files=//p' .device/manifest.txt) modified tracked files when .device was prepared, $(sed -n 's/^prepared_utc=//p' .device/manifest.txt); no .git here)"
else
  ctx revision "unknown (no .git, no .device/manifest.txt)"
fi
# The same command here and on the device: equal hashes mean the same sources ran.
ctx sources_sha256 "$(find CMakeLists.txt engine reports oracle probes experiments cli tests bench scripts -type f \
  ! -name '*.tmp.*' -print0 2>/dev/null | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)"
nvcc_bin=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
ctx toolchain "nvcc $("$nvcc_bin" --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p' || true); $(cmake --version 2>/dev/null | head -n1 || echo 'no cmake'); $(c++ --version 2>/dev/null | head -n1 || echo 'no c++'); ninja $(ninja --version 2>/dev/null || echo 'absent')"

# --- recordings ---------------------------------------------------------------------------------
needed=()
has_step probes && needed+=(probes_linear.h5 probe_attn_traj.h5)
has_step torch-linear && needed+=(probes_linear.h5)
if has_step block-controls; then
  if [ "$model" = ltx2-22b ]; then needed+=(block_full_math.h5 block_full_flash.h5); else needed+=(block_small.h5); fi
fi
holds_all() { local f; for f in "${needed[@]}"; do [ -f "$1/$f" ] || return 1; done; }
reference=${PSI_DEVICE_CHECK_REFERENCE:-}
if [ -z "$reference" ]; then
  for cand in "$repo/.device/reference" ${PSI_SHARED:+"$PSI_SHARED/reference"} "$repo/../shared/reference"; do
    if [ -d "$cand" ] && holds_all "$cand"; then reference=$cand; break; fi
  done
  [ -n "$reference" ] || reference=$repo/.device/reference
fi
reference=$(cd "$reference" 2>/dev/null && pwd || echo "$reference")
missing=()
for f in "${needed[@]}"; do [ -f "$reference/$f" ] || missing+=("$f"); done
ctx reference "$reference${missing:+ (missing: ${missing[*]})}"
PSI_SHARED=$(dirname "$reference")
export PSI_SHARED

# --- unpack and build ---------------------------------------------------------------------------
# untar_xz ARCHIVE FOLDER: tar needs the xz program for .tar.xz; python3's tarfile reads it too.
untar_xz() {
  if command -v xz >/dev/null; then
    tar -C "$2" -xJf "$1"
  else
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$1" "$2"
  fi
}
unpack() {
  [ -f .device/deps.tar.xz ] || { echo "device-check: error: no .device/deps.tar.xz (run scripts/device-prepare.sh here first)"; return 2; }
  rm -rf "$prefix"
  mkdir -p "$prefix"
  untar_xz .device/deps.tar.xz "$prefix"
  echo "unpacked $(du -sm "$prefix" | cut -f1) MiB into $prefix"
}
export prefix
export -f untar_xz unpack  # timeout runs programs, not functions: through bash -c
has_step unpack && { run_step unpack 60 bash -c unpack || true; }

psi=$build/psi
test_dir=$build/tests
runenv=()
build_note="existing build $build (build step not run)"
if has_step build; then
  # The test names split into one target each.
  # shellcheck disable=SC2046,SC2086
  if run_step build 300 env PSI_DEVICE_SHARED_DIR="$PSI_SHARED" bash scripts/device-build.sh "$prefix" "$build" \
       psi ${PSI_DEVICE_CHECK_TESTS:-$(bash scripts/device-build.sh --list-tests)}; then
    build_note="built here in $build (sm_90, Release)"
  elif [ -f .device/fallback.tar.xz ]; then
    say "the build failed: using the prebuilt fallback from .device/fallback.tar.xz"
    rm -rf "$work/fallback"
    mkdir -p "$work/fallback"
    untar_xz .device/fallback.tar.xz "$work/fallback"
    psi=$work/fallback/psi
    test_dir=$work/fallback/tests
    lib=$prefix/usr/lib/x86_64-linux-gnu
    runenv=(env LD_LIBRARY_PATH="$lib:$lib/hdf5/serial${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
    build_note="prebuilt fallback (the build here failed; binaries from .device/fallback.tar.xz, $(sed -n 's/^revision=//p' .device/manifest.txt 2>/dev/null))"
  else
    psi=$build/psi-not-built  # not a stale program from an earlier build
    build_note="build failed and no fallback carried"
  fi
fi
ctx build "$build_note"
[ -x "$psi" ] || say "no psi program at $psi: the steps that need it will fail"

# --- unit tests with a device --------------------------------------------------------------------
# The CUDA test programs and those that take another path when a device is there
# (scripts/device-build.sh --list-tests); PSI_DEVICE_CHECK_TESTS names others.
if has_step tests; then
  found=0
  for name in ${PSI_DEVICE_CHECK_TESTS:-$(bash scripts/device-build.sh --list-tests)}; do
    found=1
    run_step "$name" 90 "${runenv[@]}" "$test_dir/$name" --gtest_output="json:$work/tests/$name.json" || true
  done
  [ $found = 1 ] || record tests 0 0 "no test programs to run"
fi

# --- ceilings -----------------------------------------------------------------------------------
if has_step ceilings; then
  run_step ceilings 90 "${runenv[@]}" bash -c '"$@" >"$0.tmp" && mv "$0.tmp" "$0" && cat "$0"' \
    "$work/ceilings.jsonl" "$psi" device ceilings --json || true
  rm -f "$work/ceilings.jsonl.tmp"
fi

# --- experiments on the first block -------------------------------------------------------------
# The schedules first (the check's main numbers), then the cheap operator probes, the block
# against the recorded MATH block, and the capacity settings.
declare -A limits=([scheduling]=180 [probes]=60 [block-controls]=120 [capacity]=90 [scheduling-fit]=90)
for e in scheduling probes torch-linear block-controls capacity scheduling-fit; do
  has_step "$e" || continue
  if [ "$e" = scheduling-fit ]; then
    # The schedules again at the largest row tile the arena holds (fewer weight passes), last:
    # the first step a short budget drops.
    run_step scheduling-fit "${limits[$e]}" "${runenv[@]}" "$psi" run scheduling --row-tile fit --quick \
      --model "$model" --backend "$backend" --reference "$reference" --out "$work/scheduling-fit.h5" || true
    continue
  fi
  if [ "$e" = torch-linear ]; then
    # PyTorch's own nn.Linear on the recorded projections beside psi's (the same torch as the
    # recording's); cuBLASLt's trace of both processes' products goes to logs/ (check.tar.gz).
    run_step torch-linear 60 "${runenv[@]}" env CUBLASLT_LOG_LEVEL=2 CUBLASLT_LOG_FILE="$work/logs/cublaslt-%i.log" \
      python3 scripts/device-torch-linear.py "$psi" "$reference" "$work" "$backend" || true
    continue
  fi
  # probes and block-controls compute the recorded shapes (full size and small block): they
  # refuse a --model, and record the config they ran.
  model_args=(--model "$model")
  case "$e" in probes | block-controls) model_args=() ;; esac
  run_step "$e" "${limits[$e]}" "${runenv[@]}" "$psi" run "$e" "${model_args[@]}" --backend "$backend" \
    --reference "$reference" --out "$work/$e.h5" "${quick[@]}" || true
done

# --- summary and what comes back ----------------------------------------------------------------
ctx finished_utc "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
ctx wall_seconds "$(( $(date +%s) - t_start ))"
if [ -x "$psi" ] && "${runenv[@]}" "$psi" device summary "$work" --out "$out/summary.md" --json "$out/summary.json" >/dev/null; then
  say "summary: $out/summary.md"
else
  say "psi device summary failed or psi is missing: summary.md holds the step results only"
  { echo "# psi device check — no summary (psi device summary did not run)"; echo; cat "$work/context.tsv"; echo;
    echo '| step | exit | seconds | note |'; echo '|---|---|---|---|'
    awk -F'\t' '{printf "| %s | %s | %s | %s |\n", $1, $2, $3, $4}' "$work/steps.tsv"; } >"$out/summary.md.tmp"
  mv "$out/summary.md.tmp" "$out/summary.md"
fi

# check.tar.gz: everything in the work folder but reports over 4 MiB each (the full-size
# probes do not fit the 16 MiB a returned file may have); the log says what was left out.
small=()
while IFS= read -r -d '' f; do
  if [[ $f == *.h5 ]] && [ "$(stat -c %s "$work/$f")" -gt $((4 * 1024 * 1024)) ]; then
    say "left out of check.tar.gz: $f ($(du -m "$work/$f" | cut -f1) MiB)"
  else
    small+=("$f")
  fi
done < <(cd "$work" && find . -type f ! -path './fallback/*' -printf '%P\0' | LC_ALL=C sort -z)
tar -C "$work" -czf "$out/check.tar.gz.tmp" "${small[@]}"
mv "$out/check.tar.gz.tmp" "$out/check.tar.gz"
say "done in $(( $(date +%s) - t_start )) s; files in $out: $(cd "$out" && ls | paste -sd' ')"
echo
cat "$out/summary.md"
exec >&- 2>&-
wait "$tee_pid" 2>/dev/null || true  # log.txt complete before the call returns
