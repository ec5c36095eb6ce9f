"""Runs.unit through a running server, `runlog serve` or one a Python
program hosts (`Runs.serve`): the one-shot writer hands its change to the
server, which holds the writer lock, so it needs no lock wait at all; a
refusal comes back as the same `Refused` it is when applied directly. The
first test needs the CLI: $RUNLOG_BIN (tests/python_package.rs sets it)."""

import os
import subprocess
import sys

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


def test_a_python_program_hosts_the_server_other_processes_hand_changes_to(root):
    runs = runlog.Runs(root, lock_wait=0)
    runs.start("r", units=["a", "b"]).close()
    other = ("import runlog, sys; "
             "print(runlog.Runs(sys.argv[1], lock_wait=0).unit('r', 'a', 'done'))")
    with runs.serve("r") as server:
        assert server.running and server.socket.endswith("SERVE"), server
        # Another process, with no lock wait: only a server can take its change.
        out = subprocess.run([sys.executable, "-c", other, str(root)],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        # This process's own one-shot call is served too, its refusal typed.
        with pytest.raises(runlog.Refused, match="never demoted"):
            runs.unit("r", "a", "in_progress")
        with pytest.raises(runlog.Locked):
            runs.open("r")
        report = server.stop()
    assert not server.running
    assert report["acked"] == 1 and report["connections"] == 2, report
    assert report["stopped"] == "stop() was called" and not report["failed"], report
    assert server.stop() == report, "stop() again says the same"
    # The lock is let go: the call applies its change itself.
    assert runs.unit("r", "b", "done") == int(out.stdout) + 1
    with pytest.raises(runlog.Refused, match="commit delay"):
        runs.serve("r", commit_delay=1.0)
