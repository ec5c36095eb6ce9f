"""examples/python_pool.py: a concurrent.futures pool killed with SIGKILL
mid-run, then run again: it finishes, done units are never redone, and every
unit acknowledged before the kill is done with one attempt."""

import os
import signal
import subprocess
import sys

import runlog
from runlog import RunStatus, UnitStatus
from conftest import REPO

UNITS = 120


def pool(root):
    return subprocess.Popen(
        [sys.executable, str(REPO / "examples" / "python_pool.py"), "--dir", str(root),
         "--units", str(UNITS), "--workers", "6", "--work-ms", "15"],
        stdout=subprocess.PIPE, text=True)


def test_pool_killed_and_resumed(root):
    p = pool(root)
    assert p.stdout.readline().startswith("started pool")
    acked = []
    while len(acked) < UNITS // 3:
        word, name = p.stdout.readline().split()
        assert word == "done"
        acked.append(name)
    os.kill(p.pid, signal.SIGKILL)
    assert p.wait() == -signal.SIGKILL
    view = runlog.Runs(root).get("pool")
    done_at_kill = {u.name for u in view.iter_units(status=UnitStatus.DONE)}
    assert set(acked) <= done_at_kill

    p = pool(root)
    out = p.stdout.read().splitlines()
    assert p.wait() == 0
    assert out[0].startswith("resumed pool: %d/" % len(done_at_kill))
    assert out[-1] == "finished pool: %d units" % UNITS
    redone = [line.split()[1] for line in out if line.startswith("done ")]
    assert len(redone) == len(set(redone)) == UNITS - len(done_at_kill)
    assert set(redone).isdisjoint(done_at_kill)

    view = runlog.Runs(root).get("pool")
    assert view.status().status is RunStatus.DONE
    interrupted = 0
    for u in view.iter_units():
        assert u.status is UnitStatus.DONE and len(u.note) == 12
        if u.name in done_at_kill:
            assert u.attempts == 1
        else:
            assert u.attempts in (1, 2)
            interrupted += u.attempts == 2
    # At most one unit per worker was caught in_progress by the kill.
    assert interrupted <= 6
