"""Runs.unit through a running `runlog serve`: the one-shot writer hands its
change to the server, which holds the writer lock, so it needs no lock wait
at all; a refusal comes back as `Refused` with the server's report. Needs the
CLI: $RUNLOG_BIN (tests/python_package.rs sets it)."""

import os
import subprocess

import pytest

import runlog


def test_runs_unit_hands_its_change_to_a_running_server(root):
    binary = os.environ.get("RUNLOG_BIN")
    if not binary:
        pytest.skip("RUNLOG_BIN is not set: no runlog CLI to serve the run")
    runs = runlog.Runs(root, lock_wait=0)
    runs.start("r", units=["a", "b"]).close()
    server = subprocess.Popen([binary, "--dir", str(root), "serve", "r"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert "serving run r at" in server.stdout.readline()
        seq = runs.unit("r", "a", "done")
        with pytest.raises(runlog.Refused, match="never demoted"):
            runs.unit("r", "a", "in_progress")
        # Opening the run as a long-lived writer still waits for the lock.
        with pytest.raises(runlog.Locked):
            runs.open("r")
    finally:
        server.terminate()
        _, err = server.communicate(timeout=30)
    assert server.returncode == 0, err
    assert "1 changes acknowledged over 2 connections in 1 fdatasyncs" in err, err
    # With the server gone, the same call applies the change itself.
    assert runs.unit("r", "b", "done") == seq + 1
    view = runs.get("r")
    assert [view.unit_status(n).status for n in ("a", "b")] == ["done", "done"]
