#!/usr/bin/env bash
# The reliability figures in one run: the bad-input suite (tests/test_bad_input_*.cpp) on the
# release build, the sanitizer builds and their tests (scripts/sanitize.sh), and a short fuzz
# pass (scripts/fuzz.sh). Prints a summary; docs/reliability.md explains the figures.
#
#   scripts/reliability.sh [FUZZ_SECONDS_PER_TARGET]      (default 60)
#
# Environment: PSI_RELEASE_BUILD (default build, as scripts/setup.sh makes it),
# PSI_BUILD_PREFIX, PSI_JOBS and PSI_CMAKE_ARGS (passed on to sanitize.sh and fuzz.sh).
# Exit 1 when anything failed: a bad-input test (FoundBug.* tests, regression tests for bugs
# found in other code, are listed apart: an open one fails until its fix), a sanitizer run, or a
# fuzz crash in psi's code.
set -uo pipefail
cd "$(dirname "$0")/.."

fuzz_secs=${1:-60}
rel=${PSI_RELEASE_BUILD:-build}
jobs=${PSI_JOBS:-$(nproc)}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
status=0

# --- bad input -------------------------------------------------------------------------------
t0=$(date +%s)
suites=$(ls tests/test_bad_input_*.cpp | xargs -n1 basename | sed 's/\.cpp$//')
[ -f "$rel/CMakeCache.txt" ] || cmake -S . -B "$rel" -DCMAKE_BUILD_TYPE=Release ${PSI_CMAKE_ARGS:-} >/dev/null
# shellcheck disable=SC2086
if ! cmake --build "$rel" -j"$jobs" --target psi $suites >"$out/build.log" 2>&1; then
  tail -20 "$out/build.log"
  echo "reliability: release build failed"
  exit 1
fi
tried=0 failed_tests=() known=()
for s in $suites; do
  "$rel/tests/$s" >"$out/$s.log" 2>&1 || true
  n=$(grep -oE 'psi-bad-input: .*: [0-9]+ bad inputs' "$out/$s.log" | grep -oE '[0-9]+ bad inputs' | grep -oE '[0-9]+' || echo 0)
  tried=$((tried + n))
  while read -r t; do
    [ -z "$t" ] && continue
    if [[ $t == FoundBug.* ]]; then known+=("$t"); else failed_tests+=("$s: $t"); fi
  done < <(grep -E '^\[  FAILED  \] [A-Za-z]' "$out/$s.log" | grep -v ' tests\?, listed below' | awk '{print $4}' | sort -u)
  grep -h '^psi-chaos:' "$out/$s.log" || true
done
passed=$(cat "$out"/test_bad_input_*.log | grep -cE '^\[       OK \]')
t1=$(date +%s)
echo "bad input: $tried bad inputs tried in $(echo "$suites" | wc -l) suites, $passed tests passed, ${#failed_tests[@]} failed, ${#known[@]} open found bugs ($((t1 - t0)) s)"
for f in "${failed_tests[@]}"; do echo "  FAILED $f"; done
for k in "${known[@]}"; do echo "  open bug: $k"; done
[ ${#failed_tests[@]} -eq 0 ] && [ ${#known[@]} -eq 0 ] || status=1

# --- sanitizers ------------------------------------------------------------------------------
bash scripts/sanitize.sh all | tee "$out/sanitize.log" || status=1

# --- fuzzing ---------------------------------------------------------------------------------
bash scripts/fuzz.sh "$fuzz_secs" | tee "$out/fuzz.log" || status=1

echo
echo "=== reliability summary ==="
echo "bad inputs tried: $tried (every one must be refused with exit 2/3, one stderr line naming the file and the thing, no file left)"
echo "bad-input tests: $passed passed, ${#failed_tests[@]} failed; open found bugs (failing FoundBug tests): ${#known[@]}"
grep -E '^sanitize [a-z]+: (build|[0-9]+% tests passed)' "$out/sanitize.log" || true
reports=$(grep -cE '^sanitize [a-z]+: +[0-9]+ (SUMMARY|WARNING|==)' "$out/sanitize.log" || true)
echo "sanitizer report kinds: ${reports:-0}"
grep -E '^fuzz (fuzz_|summary)' "$out/fuzz.log" | grep -v '^fuzz summary' || true
exit $status
