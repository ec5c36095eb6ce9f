"""The wheel installs into a fresh venv (no network, no build tools) and works
there. The wheel is the one tests/python_package.rs built ($RUNLOG_WHEEL)."""

import os
import pathlib
import subprocess
import sys

import pytest

SCRIPT = """
import pathlib, sys, runlog
assert pathlib.Path(runlog.__file__).is_relative_to(sys.prefix), runlog.__file__
with runlog.Runs(sys.argv[1]).start("w", units=["a"]) as run:
    run.unit("a", runlog.UnitStatus.DONE)
print(runlog.Runs(sys.argv[1]).get("w").unit_status("a").status.value)
"""


def test_wheel_installs_into_a_fresh_venv(tmp_path):
    wheel = os.environ.get("RUNLOG_WHEEL")
    if not wheel:
        if os.environ.get("RUNLOG_REQUIRE_PYTHON") == "1":
            pytest.fail("RUNLOG_WHEEL is not set (tests/python_package.rs sets it)")
        pytest.skip("RUNLOG_WHEEL is not set: run through `cargo test --test python_package`")
    assert "cp39-abi3" in pathlib.Path(wheel).name
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-index", "--no-deps", wheel],
                   check=True)
    out = subprocess.run([str(py), "-c", SCRIPT, str(tmp_path / "root")], cwd=tmp_path,
                         check=True, capture_output=True, text=True)
    assert out.stdout.strip() == "done"
    site = subprocess.run([str(py), "-c", "import runlog, os; print(os.path.dirname(runlog.__file__))"],
                          cwd=tmp_path, check=True, capture_output=True, text=True).stdout.strip()
    for f in ("py.typed", "_runlog.pyi"):
        assert (pathlib.Path(site) / f).exists(), f
