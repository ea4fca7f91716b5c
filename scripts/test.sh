#!/usr/bin/env bash
# The README's test command: install what is missing, build, run the whole test suite, then the
# Python package's tests (scripts/python-tests.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
ctest --test-dir build --output-on-failure -j"${PSI_JOBS:-$(nproc)}" --timeout 900
bash scripts/python-tests.sh
