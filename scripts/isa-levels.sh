#!/usr/bin/env bash
# psi's kernels at the vector levels this machine does not run by default (engine/cpu_features.h),
# as CI checks them:
#   lower     the kernel tests at each level below this CPU's (PSI_ISA=avx2, PSI_ISA=portable):
#             the lower paths held to the same bitwise tests on a machine that has more
#   emulated  the kernel tests on an emulated CPU without AVX-512 (qemu-user's `max` CPU: AVX2
#             and FMA), where a kernel built for a level the CPU lacks dies of SIGILL, as clang
#             14's target_clones did (docs/reliability/bugs-found.md, bug 48); and psi itself names avx2
#
#   scripts/isa-levels.sh [lower|emulated|all] [BUILD]     (default all, build/)
#
# The tests are the bitwise ones of the dispatched and lane kernels (KERNEL_TESTS below, fewer
# emulated), without the whole-block runs, which take minutes at the portable level. Exit 1 if
# any failed.
set -euo pipefail
cd "$(dirname "$0")/.."

which=${1:-all}
build=${2:-build}
jobs=${PSI_JOBS:-$(nproc)}

# Test program: the gtest filter of its kernel tests.
declare -A KERNEL_TESTS=(
  [test_isa]='Isa.*:-Isa.PsiIsaIsCheckedAndNamedByVersion:Isa.ReportsNameTheLevelAndTheKernelsTheyRanAt'
  [test_ops_gemm]='Gemm.*'
  [test_tensor_core]='TensorCore.*'
  [test_official_attention]='NvExpf*.*:FmaChains.*:WarpSoftmax.*:BlockSoftmax.*:OfficialAttention.*'
  [test_official_flash]='OfficialFlash.*:-OfficialFlash.FullBlock*'
  [test_official_block]='OfficialBlock.*:-OfficialBlock.ExplainDifferences*'
  [test_ops_attention]='Attention.*'
  [test_ops_ffn]='Ffn.*'
  [test_oracle_filter]='OracleFilter.*'
)
# Emulated, a test runs a few hundred times slower: every kernel, on the recorded attention
# cores, without the recorded blocks (six minutes each) and the FFN schedules (81 s).
declare -A EMULATED_TESTS=()
for program in "${!KERNEL_TESTS[@]}"; do EMULATED_TESTS[$program]=${KERNEL_TESTS[$program]}; done
unset 'EMULATED_TESTS[test_official_block]' 'EMULATED_TESTS[test_ops_ffn]'
EMULATED_TESTS[test_official_flash]='OfficialFlash.RecordedAttentionCoreIsBitwise:OfficialFlash.Lg2ApproxModel:OfficialFlash.LibdeviceLogfModel'
EMULATED_TESTS[test_oracle_filter]='OracleFilter.*:-OracleFilter.RecordedProjections*'

status=0

# The ctest names of the kernel tests (the filters' positive parts, or with `-`, their negative
# parts), as one anchored alternation.
ctest_regex() {
  local alternatives=()
  for filter in "${KERNEL_TESTS[@]}"; do
    local part=${filter%%:-*}
    if [ "${1:-}" = - ]; then
      [ "$part" != "$filter" ] || continue
      part=${filter#*:-}
    fi
    IFS=: read -r -a patterns <<<"$part"
    for p in "${patterns[@]}"; do alternatives+=("$(printf '%s' "$p" | sed 's/\./\\./g; s/\*/.*/g')"); done
  done
  local IFS='|'
  printf '^(%s)$' "${alternatives[*]}"
}

lower() {
  local native
  native=$(env -u PSI_ISA "$build/psi" --version | sed -n 's/^vector level: \([a-z0-9]*\) .*/\1/p')
  local levels=()
  case "$native" in
    avx512) levels=(avx2 portable) ;;
    avx2) levels=(portable) ;;
    *) echo "isa-levels lower: this CPU runs the portable level only; nothing below it"; return ;;
  esac
  for level in "${levels[@]}"; do
    local t0 log="$build/isa-$level.log"
    t0=$(date +%s)
    if PSI_ISA=$level ctest --test-dir "$build" -j"$jobs" --timeout 900 -R "$(ctest_regex)" -E "$(ctest_regex -)" \
      >"$log" 2>&1; then :; else status=1; fi
    grep -E "tests passed|The following tests FAILED|^\s+[0-9]+ - " "$log" | sed "s/^/isa-levels $level: /"
    echo "isa-levels $level: $(($(date +%s) - t0)) s (log: $log)"
  done
}

emulated() {
  if ! command -v qemu-x86_64 >/dev/null; then
    echo "isa-levels emulated: needs qemu-x86_64 (Debian's qemu-user; scripts/setup.sh installs it)" >&2
    status=1
    return
  fi
  local t0 log="$build/isa-emulated.log" level
  t0=$(date +%s)
  : >"$log"
  level=$(env -u PSI_ISA qemu-x86_64 -cpu max "$build/psi" --version 2>>"$log" | sed -n 's/^vector level: //p')
  echo "psi --version on the emulated CPU: vector level: $level" >>"$log"
  case "$level" in
    "avx2 "*) ;;
    *) echo "isa-levels emulated: psi on a CPU with AVX2 and no AVX-512 chose '$level', not avx2"; status=1 ;;
  esac
  local passed=0 failed=()
  for program in $(printf '%s\n' "${!EMULATED_TESTS[@]}" | sort); do
    if env -u PSI_ISA qemu-x86_64 -cpu max "$build/tests/$program" --gtest_filter="${EMULATED_TESTS[$program]}" \
      >>"$log" 2>&1; then
      passed=$((passed + 1))
    else
      failed+=("$program")
    fi
  done
  echo "isa-levels emulated: $passed of ${#EMULATED_TESTS[@]} kernel test programs passed on a CPU without AVX-512$([ ${#failed[@]} -eq 0 ] || echo "; FAILED: ${failed[*]}")"
  [ ${#failed[@]} -eq 0 ] || status=1
  echo "isa-levels emulated: $(awk '/^\[  PASSED  \] [0-9]+ test/ {n += $4} END {print n + 0}' "$log") tests passed"
  echo "isa-levels emulated: $(($(date +%s) - t0)) s (log: $log)"
}

case "$which" in
  lower) lower ;;
  emulated) emulated ;;
  all) lower; emulated ;;
  *) echo "usage: scripts/isa-levels.sh [lower|emulated|all] [BUILD]" >&2; exit 2 ;;
esac
exit $status
