"""examples/cluster.py runs as docs/TOUR.md says: its first coordinator
SIGKILLed, its second finishing the run, its own check passing; through Dask,
a ProcessPoolExecutor and Ray. And README's `runlog.drive` example runs as
printed."""

import os
import re
import subprocess
import sys

import pytest

from conftest import REPO

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import drive_work as work  # noqa: E402


@pytest.mark.parametrize("executor", ["dask", "pool", "ray"])
def test_cluster_example(tmp_path, executor):
    if executor == "dask":
        work.require_dask()
    elif executor == "ray":
        work.require_ray()
    out = subprocess.run([sys.executable, str(REPO / "examples" / "cluster.py"), "--units",
                          "600", "--dir", str(tmp_path / "root"), "--executor", executor],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "coordinator 1 SIGKILLed once" in out.stdout
    assert "run cluster: 600/600 units done" in out.stdout
    assert "check: 600 units done, outputs verified" in out.stdout


def readme_drive_example():
    text = (REPO / "README.md").read_text()
    section = text[text.index("\n## A cluster: `runlog.drive`\n"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_drive_example(tmp_path):
    """README's `runlog.drive` example runs as printed, as a script in a fresh
    directory; run again, it finds every unit done and submits nothing."""
    script = tmp_path / "drive_example.py"
    script.write_text(readme_drive_example())
    for attempt in range(2):
        out = subprocess.run([sys.executable, str(script)], cwd=tmp_path,
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, (attempt, out.stdout + out.stderr)
        assert out.stdout.splitlines()[-2:] == ["True", "b'resized img-042'"], out.stdout
    import runlog

    view = runlog.Runs(str(tmp_path / ".runlog")).get("thumbnails")
    assert view.counts().done == 101
