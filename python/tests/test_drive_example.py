"""examples/cluster.py runs as the README says: its first coordinator
SIGKILLed, its second finishing the run, its own check passing; through Dask
and through a ProcessPoolExecutor."""

import os
import subprocess
import sys

import pytest

from conftest import REPO

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import drive_work as work  # noqa: E402


@pytest.mark.parametrize("executor", ["dask", "pool"])
def test_cluster_example(tmp_path, executor):
    if executor == "dask":
        work.require_dask()
    out = subprocess.run([sys.executable, str(REPO / "examples" / "cluster.py"), "--units",
                          "600", "--dir", str(tmp_path / "root"), "--executor", executor],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "coordinator 1 SIGKILLed once" in out.stdout
    assert "run cluster: 600/600 units done" in out.stdout
    assert "check: 600 units done, outputs verified" in out.stdout
