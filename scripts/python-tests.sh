#!/usr/bin/env bash
# The Python package's tests (python/tests): a virtual environment in build/venv holding the
# packages the tests write and read files with, from PyPI; psi installed into it from this
# checkout the way a user installs it (pip install ., pyproject.toml: the extension module is
# built in build/python, kept between runs); then pytest, against the psi program of build/.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PSI_PYTHON:-python3}
# Debian's python3 needs these two for a virtual environment and the extension module's headers.
if ! "$python" -c 'import ensurepip, sysconfig, os, sys; sys.exit(not os.path.exists(sysconfig.get_paths()["include"] + "/Python.h"))' 2>/dev/null; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-venv python3-dev >/dev/null
fi
[ -x build/venv/bin/python ] || "$python" -m venv build/venv
build/venv/bin/python -m pip install -q --disable-pip-version-check numpy h5py ml_dtypes safetensors pytest \
  scikit-build-core nanobind
# The build requirements are the ones just installed: no second download into an isolated one.
build/venv/bin/python -m pip install -q --disable-pip-version-check --no-build-isolation .
PSI_BINARY="$PWD/build/psi" build/venv/bin/python -m pytest -q python/tests
