"""Where the tests find the recordings (../shared/reference, or $PSI_SHARED/reference) and the
command-line program they compare the package with ($PSI_BINARY, or build/psi)."""

import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def reference() -> pathlib.Path:
    shared = pathlib.Path(os.environ.get("PSI_SHARED") or ROOT.parent / "shared")
    ref = shared / "reference"
    assert (ref / "probes_linear.h5").is_file(), f"no recordings at {ref}: set PSI_SHARED to the shared/ folder"
    return ref


@pytest.fixture(scope="session")
def psi_cli():
    """Runs the psi program; returns (exit status, stdout, stderr)."""
    binary = pathlib.Path(os.environ.get("PSI_BINARY") or ROOT / "build" / "psi")
    assert binary.is_file(), f"no psi program at {binary}: build it (scripts/setup.sh) or set PSI_BINARY"

    def run(*args):
        p = subprocess.run([str(binary), *map(str, args)], capture_output=True, text=True)
        return p.returncode, p.stdout, p.stderr

    return run
