#!/usr/bin/env bash
# The README's main command: install what is missing, build, and run one named experiment on the
# built-in default (the tiny synthetic config on the CPU backend). Extra arguments go to psi run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
experiment=${1:-scheduling}
shift || true
exec build/psi run "$experiment" "$@"
