"""The wheel installs into a fresh venv (no network, no build tools) and works
there, the module and the native `runlog` CLI it brings. The wheel is the one
tests/python_package.rs built ($RUNLOG_WHEEL)."""

import json
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


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory):
    """A new venv with the wheel installed, shared by this module's tests."""
    wheel = os.environ.get("RUNLOG_WHEEL")
    if not wheel:
        if os.environ.get("RUNLOG_REQUIRE_PYTHON") == "1":
            pytest.fail("RUNLOG_WHEEL is not set (tests/python_package.rs sets it)")
        pytest.skip("RUNLOG_WHEEL is not set: run through `cargo test --test python_package`")
    assert "cp39-abi3" in pathlib.Path(wheel).name
    venv = tmp_path_factory.mktemp("fresh") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-index", "--no-deps", wheel],
                   check=True)
    return venv


def test_wheel_installs_into_a_fresh_venv(fresh_venv, tmp_path):
    py = fresh_venv / "bin" / "python"
    out = subprocess.run([str(py), "-c", SCRIPT, str(tmp_path / "root")], cwd=tmp_path,
                         check=True, capture_output=True, text=True)
    assert out.stdout.strip() == "done"
    site = subprocess.run([str(py), "-c", "import runlog, os; print(os.path.dirname(runlog.__file__))"],
                          cwd=tmp_path, check=True, capture_output=True, text=True).stdout.strip()
    for f in ("py.typed", "_runlog.pyi"):
        assert (pathlib.Path(site) / f).exists(), f


def test_wheel_puts_the_native_runlog_cli_in_the_venv(fresh_venv, tmp_path):
    """pip installs the wheel's `runlog` binary into the venv's bin/: a native
    executable (ELF, not a script starting Python), which writes a run the
    Python API reads, and reads what the Python API wrote."""
    cli = fresh_venv / "bin" / "runlog"
    assert cli.is_file(), "the wheel put no runlog in %s" % cli.parent
    assert os.access(cli, os.X_OK), "%s is not executable" % cli
    with open(cli, "rb") as f:
        assert f.read(4) == b"\x7fELF", "%s is not a native executable" % cli
    # Only the venv's bin/ on PATH: the binary needs nothing else.
    env = {"PATH": str(cli.parent), "HOME": str(tmp_path)}

    def runlog_cli(*args):
        return subprocess.run([str(cli), "--dir", str(tmp_path / "root"), *args], cwd=tmp_path,
                              env=env, check=True, capture_output=True, text=True).stdout

    version = subprocess.run([str(cli), "--version"], env=env, check=True,
                             capture_output=True, text=True).stdout
    assert version.strip() == "runlog 0.1.0"
    runlog_cli("start", "--id", "c", "--units", "a,b")
    runlog_cli("unit", "c", "a", "done")
    both = """
import sys, runlog
runs = runlog.Runs(sys.argv[1])
print(runs.get("c").unit_status("a").status.value)
runs.unit("c", "b", "done", note="from python")
"""
    out = subprocess.run([str(fresh_venv / "bin" / "python"), "-c", both, str(tmp_path / "root")],
                         cwd=tmp_path, check=True, capture_output=True, text=True)
    assert out.stdout.strip() == "done"
    b = json.loads(runlog_cli("get", "c", "--unit", "b", "--json"))
    assert (b["status"], b["note"]) == ("done", "from python")
