#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/fuzz_*.cpp) in the clang AddressSanitizer build that
# scripts/sanitize.sh asan also uses (scripts/configure-sanitized.sh; after it, only the targets
# themselves are left to compile) and runs each for a bounded time, continuing after crashes,
# then sorts the crashes by where they happened.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET]      (default 60)
#
# Environment: PSI_BUILD_PREFIX (default "build-": the build is build-asan/),
# PSI_FUZZ_TARGETS (default: all of fuzz/fuzz_*.cpp), PSI_JOBS (build jobs, default nproc),
# PSI_CMAKE_ARGS (more configure arguments).
# Per target it prints executions, corpus size and crashes, then one line per crash class:
#   psi <kind> at <file:line>  a sanitizer report in psi's code, or a target's check of psi's promises
#   psi uncaught <type>    an exception other than psi::Error left psi
#   psi multi-line error   a psi::Error whose message spans several lines
#   libhdf5 <kind> in <fn> a crash, hang or huge allocation inside libhdf5 in psi's own process
# Crash inputs stay in <build>/fuzz-artifacts/<target>/. Exit status 1 when the fuzzed process
# crashed at all: libhdf5 reads every file first in a child process (outputs/isolated.h), so a
# crash of libhdf5 in psi's own process is psi's failure to shield itself, as a crash in psi's
# code is.
set -euo pipefail
cd "$(dirname "$0")/.."

secs=${1:-60}
build=${PSI_BUILD_PREFIX:-build-}asan
jobs=${PSI_JOBS:-$(nproc)}
targets=${PSI_FUZZ_TARGETS:-$(ls fuzz/fuzz_*.cpp | xargs -n1 basename | sed 's/\.cpp$//')}

t0=$(date +%s)
bash scripts/configure-sanitized.sh "$build" address,undefined
# shellcheck disable=SC2086
cmake --build "$build" -j"$jobs" --target $targets >/dev/null
echo "fuzz: build $(( $(date +%s) - t0 )) s"

export LSAN_OPTIONS="suppressions=$PWD/fuzz/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
# The child that reads a file first must give up well before libFuzzer's -timeout (10 s below)
# would count the whole input as a hang.
export PSI_H5_CHECK_SECONDS=${PSI_H5_CHECK_SECONDS:-4}
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

# The class of one crash input: re-run it and find the first stack frame that is libhdf5's or in
# psi's sources (fuzz/ included: the targets' own checks of psi's promises).
classify() {
  local bin=$1 input=$2 log frame kind
  mkdir -p "$build/fuzz-rerun"
  log=$(timeout 60 "$bin" -runs=1 -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$build/fuzz-rerun/" "$input" 2>&1 || true)
  if grep -q "terminate called after throwing" <<<"$log"; then
    echo "psi uncaught $(grep -o "throwing an instance of '[^']*'" <<<"$log" | head -1 | cut -d"'" -f2)"
    return
  fi
  frame=$(grep -E '^ +#[0-9]+ ' <<<"$log" | grep -E 'libhdf5|/(engine|reports|experiments|oracle|probes|cli|fuzz)/' |
          head -1 || true)
  kind=$(grep -m1 -oE 'Sanitizer: [A-Za-z-]+( allocation size)?|libFuzzer: (timeout|out-of-memory|deadly signal)' <<<"$log" |
         sed 's/.*: //' || true)
  if grep -q libhdf5 <<<"$frame"; then
    # libhdf5 has no symbols for its static functions: name the first frame that has one, or
    # give the first one's offset in the library.
    local fn
    fn=$(grep -E '^ +#[0-9]+ .*libhdf5' <<<"$log" | grep -oE ' in [A-Za-z0-9_]+' | head -1 | cut -c5- || true)
    [ -n "$fn" ] || fn=$(grep -oE 'libhdf5[A-Za-z0-9_.]*\+0x[0-9a-f]+' <<<"$frame" | head -1 || true)
    echo "libhdf5 ${kind:-crash} in ${fn:-an unnamed function}"
  elif grep -q 'psi::fuzz::step' <<<"$frame"; then
    echo "psi multi-line error"
  elif [ -n "$frame" ]; then
    echo "psi ${kind:-crash} at $(grep -oE '/(engine|reports|experiments|oracle|probes|cli|fuzz)/[^ ]+' <<<"$frame" | head -1 | sed 's/^\///')"
  elif [ -n "$kind" ]; then
    echo "unclassified $kind"
  else
    echo "not reproduced on re-run"
  fi
}

status=0
summary=()
for t in $targets; do
  bin="$build/$t"
  work="$build/fuzz-corpus/$t"
  art="$build/fuzz-artifacts/$t"
  mkdir -p "$work" "$art"
  dict=()
  [ -f "fuzz/${t#fuzz_}.dict" ] && dict=(-dict="fuzz/${t#fuzz_}.dict")
  log="$build/fuzz-$t.log"
  before=$(ls "$art" | wc -l)
  start=$(date +%s)
  # -fork=1 runs the fuzzing in a child and starts a new one after a crash, so one bug does not
  # end the pass; new corpus entries go to $work, the committed seeds stay as they are.
  "$bin" -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 -max_total_time="$secs" -timeout=10 \
    -rss_limit_mb=2048 -artifact_prefix="$art/" "${dict[@]}" "$work" "fuzz/corpus/$t" >"$log" 2>&1 || true
  took=$(( $(date +%s) - start ))
  execs=$(grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#')
  crashes=$(( $(ls "$art" | wc -l) - before ))
  corpus=$(ls "$work" | wc -l)
  echo "fuzz $t: ${execs:-0} executions in ${took} s, corpus ${corpus} inputs, ${crashes} new crash/timeout/oom inputs"
  summary+=("$t ${execs:-0} $took $crashes")
  if [ "$crashes" -gt 0 ]; then
    classes=$(ls -t "$art" | head -n "$crashes" | while read -r f; do classify "$bin" "$art/$f"; done | sort | uniq -c)
    sed 's/^/    /' <<<"$classes"
    # An input whose crash the re-run does not reproduce crashed a child that read the file first
    # (its report muted, an out-of-memory of libFuzzer's malloc limit there): psi refused it.
    grep -qv 'not reproduced on re-run' <<<"$classes" && status=1
  fi
done
printf 'fuzz summary: %s\n' "${summary[@]}"
exit $status
