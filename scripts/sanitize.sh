#!/usr/bin/env bash
# Builds psi with sanitizers and runs its unit tests under them:
#   asan  -DPSI_SANITIZE=address,undefined into build-asan/: the whole test suite (the
#         libFuzzer targets of scripts/fuzz.sh are built in the same folder)
#   tsan  -DPSI_SANITIZE=thread into build-tsan/: the tests that run several threads
#         (runtime streams and events, the parallel CPU operators, chaos, interrupts)
# Both have CUDA off and are configured by scripts/configure-sanitized.sh (clang for ASan, g++
# for TSan). UBSan halts on its first finding (-fno-sanitize-recover=all) and every sanitizer
# report fails the test that raised it.
#
#   scripts/sanitize.sh [asan|tsan|all]       (default all)
#
# Environment: PSI_BUILD_PREFIX (default "build-"), PSI_JOBS (default nproc),
# PSI_TSAN_SUITES (the TSan subset: test suite names, an ERE alternation, default below),
# PSI_ASAN_SKIP (the whole-experiment runs ASan leaves out: test names, an ERE alternation,
# default below; empty runs everything), PSI_TSAN_SKIP (likewise for TSan), PSI_CMAKE_ARGS
# (more configure arguments, e.g. -DPSI_SHARED_DIR=...).
# Prints, per sanitizer, the build and test times and the ctest summary; exit 1 if any test
# failed.
set -euo pipefail
cd "$(dirname "$0")/.."

which=${1:-all}
prefix=${PSI_BUILD_PREFIX:-build-}
jobs=${PSI_JOBS:-$(nproc)}
# The threaded code: the runtime's stream workers, events, pages and journal (CpuBackend ...
# Transport), PSI execution on it (PsiExec*), the chaos schedules (Chaos), the operators that
# fan out with parallel_for (Gemm, Attention, Ffn, Block, and the tensor-core model's product
# and range scan: TensorCore), and the GPU memory sampler's thread
# (GpuMemorySampler, GpuMemoryMonitor). The rest of the suite is
# single-threaded file handling and arithmetic, which ASan/UBSan cover; the Interrupt tests are
# left out because their signal handler only sets an atomic flag and their complete `psi run`
# takes two minutes under TSan.
# Only the test programs holding these suites are built for TSan, and with them only the layers
# they link (cmake/PsiLinks.cmake).
tsan_suites=${PSI_TSAN_SUITES:-'CpuBackend|BackendFactory|Arena[A-Za-z]*|Scratch|RunReport|Pages|Validate|Journal|Transport|PsiExec[A-Za-z]*|Chaos|Gemm|Attention|Ffn|Block|TensorCore|GpuMemorySampler|GpuMemoryMonitor'}

# ASan leaves out the six complete experiment runs that take over 80 s each under it (834 of
# 1,870 test-seconds): one-token, full-prompt, probes sharded and whole, transport-control under
# chaos, every projection probe on the CPU backend, the uninterrupted interrupt control. They run
# in the main test stage; under ASan their drivers, readers and writers are still exercised by
# the shorter runs of the same commands (Trajectory.*, BlockControls, NonFinite, BadSafetensors,
# FoundBug, ProbeCli, the bad-input suites), and their bulk is arithmetic ASan has seen once.
# Four more repeat, on more data, code the rest of the ASan run covers (289 of 2,242
# test-seconds): the second one-token run with a NaN weight (NonFinite.RunWithANaNWeight-
# ReportsNonFiniteStates runs the same command), the full-size block's attn2 rows under MATH and
# FLASH (their split-K is TensorCore.OneRowProductOver4096IsSplitInTwo's arithmetic, the FLASH
# core OfficialFlash.*'s, their reading every block probe's),
# SynthInit over every recorded weight and the SHA-256 of every recorded tensor (the generator
# and the hash every recording read runs). The two Slurm tests run, as Slurm jobs, the commands
# of the sharded probes run above; what they add is Slurm, not psi code. The documents' three
# checks (1,051 of 2,877 test-seconds on 7 December) run psi's documented commands and every
# bad-input program once more: the programs run as their own ASan tests, the commands' code is
# what the rest of this run covers, and what the checks are about, the documents' text against
# psi's output, is checked in the main stage. The four Progress tests that time whole `psi run`s
# (capacity twice, fixed-budget, transport-control, one-token --quick: 177 of the ASan run's
# test-seconds at 9cd3a24) check when lines appear on a clock ASan slows several-fold, so under it
# they test little; the progress code itself runs under ASan in Progress.PartsShareTheCommandsLine
# and Progress.LongOperatorsPulseInALog, in-process, and the commands' code in the tests above.
# Two more whole `psi run block-controls` (84 s and 95 s under ASan at be42bd2) check what its
# tables and figures say, not new code: Experiments.BlockControlsAndProjectionOracle runs the
# same command, figures and all, and ProbeCli.AllWithFloat64 the float64 probe the second adds.
# VerifyOutputs.EveryExperimentsReportVerifies runs every experiment whole (--quick) once more to
# verify its report: the experiments' code runs under ASan in the tests above, and psi verify's
# in VerifyOutputs.EveryCommandsHdf5OutputVerifies and the Sha256Full tests.
# Four more run whole experiments to check what their text or placement says, not new code (635
# of the ASan run's 2,676 test-seconds at d7f6bb0, on an AMD EPYC without AVX-512): every command
# stopped after holding its output folder (one-token, kernels fragile and a probe run whole; the
# held-folder rename they end in is BadOutputs.AnOutputGoesOnlyToTheFolderHeldAtItsCheck's, in
# process), the capture a whole one-token run writes (TrajectoryOps' other tests write and replay
# captures through the same code), three experiments run to read the recording's folder and seed
# in their note, and two experiments run twice through a linked reference folder to compare their
# reports (compare's provenance code runs under ASan in the Compare and CompareText suites).
asan_skip=${PSI_ASAN_SKIP-'Readme\..*|Progress\.(PlainLinesWhenStderrIsNotATerminal|PartsOfARunAreCountedOutOfTheirTotal|FirstPlainLineComesWithinSeconds|ASetPeriodHoldsForTheFirstLine)|Experiments\.(BlockControlsDrawsEachDifferingCell|ProbeFloat64RowsAreBlockControlsFloat64Table)|Experiments\.(OneToken|FullPromptQuickWithFigures|ProbesShardedAndMergedEqualOneRun|TransportControlUnderChaos)|ProbeBackends\.ProjectionsOnTheCpuBackendAreTheHostBits|Interrupt\.UninterruptedRunLeavesOnlyTheReport|FoundBug\.MaxRelL2OverStatesDoesNotHideNaN|OfficialBlock\.FullBlock(TextCrossAttentionRowsAreBitwise|RowsAreBitwiseTheFlashRecording)|OfficialFlash\.FullBlockClaimHoldsUnderOfficialH200(Flash)?|KernelSearch\.StoredSearchesHoldTheirNumbers|SynthInit\.MatchesEveryRecordedWeightAndInput|Slurm\..*|Sha256Full\.EveryRecordingVerifiesAgainstItself|VerifyOutputs\.EveryExperimentsReportVerifies|BadOutputs\.EveryCommandWritesOnlyToTheFolderItHeld|TrajectoryOps\.OneTokenRunWritesTheCapture|Experiments\.TablesNameTheRecordingFolderAndSeed|CompareCli\.OneRecordingReachedByTwoPathsGivesEqualReports'}

# TSan leaves out two tests that repeat, on the small config, schedules its tiny-config tests
# already run (210 of 600 test-seconds): the arena-shrinking outcomes and the small row tiles.
# The stream, event, page and journal synchronisation they go through is the same code at every
# size; only the number of tiles grows. They run in the main and the ASan stages.
tsan_skip=${PSI_TSAN_SKIP-'PsiExecResources\.OutcomesAsTheArenaShrinksOnSmall|PsiExec\.SmallRowTilesAndTheDenseVariant'}

supp="$PWD/fuzz/lsan.supp"
# allocator_may_return_null: psi checks allocations that can fail (an arena larger than the
# machine) and reports them; without it ASan aborts before psi can.
export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1:abort_on_error=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
# print_suppressions=0: the summary of a suppressed libhdf5 leak would be more lines on stderr,
# where the tests read psi's one error line.
export LSAN_OPTIONS="suppressions=$supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1${TSAN_OPTIONS:+:$TSAN_OPTIONS}"

# The test programs (all, or those holding a TEST of the suites in $1).
test_targets() {
  if [ -z "${1:-}" ]; then ls tests/test_*.cpp; else grep -lE "^TEST(_F|_P)?\(($1)," tests/test_*.cpp; fi |
    xargs -n1 basename | sed 's/\.cpp$//'
}

status=0
run() {
  local name=$1 sanitize=$2 suites=$3 skip=$4 dir="${prefix}$1" t0 t1 t2 targets
  t0=$(date +%s)
  bash scripts/configure-sanitized.sh "$dir" "$sanitize"
  # psi itself is built when a chosen test program runs it (the programs depend on it).
  targets="$(test_targets "$suites" | tr '\n' ' ')"
  # shellcheck disable=SC2086
  cmake --build "$dir" -j"$jobs" --target $targets >"$dir/build.log" 2>&1 || {
    tail -30 "$dir/build.log"
    echo "sanitize $name: build failed (log: $dir/build.log)"
    status=1
    return
  }
  t1=$(date +%s)
  local args=(--test-dir "$dir" --output-on-failure -j"$jobs" --timeout 1800)
  [ -n "$suites" ] && args+=(-R "^($suites)\\.")
  [ -n "$skip" ] && args+=(-E "^($skip)\$")
  if ctest "${args[@]}" >"$dir/ctest.log" 2>&1; then :; else status=1; fi
  t2=$(date +%s)
  grep -E "tests passed|The following tests FAILED|^\s+[0-9]+ - " "$dir/ctest.log" | sed "s/^/sanitize $name: /"
  grep -hE "^(SUMMARY: |WARNING: ThreadSanitizer|==[0-9]+==ERROR)" "$dir/ctest.log" | sort | uniq -c | sed "s/^/sanitize $name: /" || true
  echo "sanitize $name: build $((t1 - t0)) s, tests $((t2 - t1)) s (logs: $dir/build.log, $dir/ctest.log)"
}

case "$which" in
  asan) run asan address,undefined "" "$asan_skip" ;;
  tsan) run tsan thread "$tsan_suites" "$tsan_skip" ;;
  all) run asan address,undefined "" "$asan_skip"; run tsan thread "$tsan_suites" "$tsan_skip" ;;
  *) echo "usage: scripts/sanitize.sh [asan|tsan|all]" >&2; exit 2 ;;
esac
exit $status
