import os
import pathlib
import shutil
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def hotplane_bin() -> str:
    """The hotplane binary: $HOTPLANE_BIN, else built with cargo (debug profile)."""
    path = os.environ.get("HOTPLANE_BIN")
    if path:
        return path
    if shutil.which("cargo") is None:
        pytest.fail("cargo not found: set HOTPLANE_BIN to a built hotplane binary")
    subprocess.run(["cargo", "build", "-q", "-p", "hotplane"], cwd=REPO, check=True)
    return str(REPO / "target" / "debug" / "hotplane")


@pytest.fixture(scope="session")
def vectors() -> dict:
    import json
    return json.loads((REPO / "tests" / "vectors" / "envelope.json").read_text())
