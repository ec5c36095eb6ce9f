"""The package's PEP 517 backend (python/backend/runlog_backend.py) as pip
calls it: maturin's false "`build-backend` ... is not set to `maturin`"
warning is not printed (the backend is maturin's, wrapped), while maturin's
other output, and its errors, still are. Runs the metadata hook only (cargo
metadata, no compile), in a subprocess from python/ as pip does."""

import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import pytest

from conftest import REPO

PYTHON_DIR = REPO / "python"
WARNING = "is not set to `maturin`"

HOOK = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, "backend")
    import runlog_backend
    settings = {"maturin.build-args": sys.argv[2]} if len(sys.argv) > 2 else None
    print("DIST-INFO", runlog_backend.prepare_metadata_for_build_wheel(sys.argv[1], settings))
    """
)


def _env():
    """PATH with this interpreter's bin/ first: maturin's hooks run `maturin`
    from PATH, as pip's build environment has it."""
    bin_dir = os.path.dirname(sys.executable)
    if not os.path.exists(os.path.join(bin_dir, "maturin")):
        if os.environ.get("RUNLOG_REQUIRE_PYTHON") == "1":
            pytest.fail("no maturin beside %s (pip install maturin)" % sys.executable)
        pytest.skip("no maturin beside %s" % sys.executable)
    if shutil.which("cargo") is None:
        if os.environ.get("RUNLOG_REQUIRE_PYTHON") == "1":
            pytest.fail("no cargo on PATH")
        pytest.skip("no cargo on PATH")
    env = dict(os.environ)
    env.pop("MATURIN_NO_MISSING_BUILD_BACKEND_WARNING", None)
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    return env


def test_the_backend_hook_prints_no_build_backend_warning_but_the_rest(tmp_path):
    env = _env()
    # maturin itself, run directly on this project, does print it: the check
    # below means something.
    direct = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "maturin"), "pep517",
         "write-dist-info", "--metadata-directory", str(tmp_path / "direct")],
        cwd=PYTHON_DIR, env=env, capture_output=True, text=True)
    assert WARNING in direct.stdout + direct.stderr, direct.stdout + direct.stderr

    out = subprocess.run([sys.executable, "-c", HOOK, str(tmp_path / "hook")],
                         cwd=PYTHON_DIR, env=env, capture_output=True, text=True)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text
    assert WARNING not in text, text
    # maturin's own progress still shows, and the hook did its work.
    assert "Found pyo3 bindings" in text, text
    assert "DIST-INFO runlog-" in out.stdout, text
    assert list(pathlib.Path(tmp_path / "hook").glob("runlog-*.dist-info/METADATA"))


def test_the_backend_hook_still_shows_maturins_errors(tmp_path):
    out = subprocess.run([sys.executable, "-c", HOOK, str(tmp_path / "hook"),
                          "--no-such-maturin-flag"],
                         cwd=PYTHON_DIR, env=_env(), capture_output=True, text=True)
    text = out.stdout + out.stderr
    assert out.returncode != 0, text
    assert "--no-such-maturin-flag" in text, text
    assert WARNING not in text, text
