#!/usr/bin/env bash
# The README's test command: install what is missing, build, run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
ctest --test-dir build --output-on-failure -j"${PSI_JOBS:-$(nproc)}" --timeout 900
