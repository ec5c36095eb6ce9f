"""The coordinator's host lost: coordinator A drives a run shipped under
`sync` to a remote (RUNLOG_REMOTE_ROOT); A is frozen (SIGSTOP, with its
workers) mid-run; coordinator B, on another runs root, restores the run from
the remote, claims the next epoch and finishes it; A is revived, its workers
finish their attempts and write their outputs, and A's next write raises
`runlog.Fenced`: it commits nothing. A third host restoring from the remote
alone finds every unit done once with B's (or A's pre-freeze) results,
digests checked, and gc leaves exactly the committed outputs. Against a
file:// remote always, and the Ceph gateway when its env is set; and with A
sending two units a task and B given no unit list (units=None: the restored
run's own)."""

import concurrent.futures as cf
import functools
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import runlog

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import drive_work as work  # noqa: E402

UNITS = 120

COORDINATOR = textwrap.dedent(
    """
    import concurrent.futures as cf, functools, multiprocessing, sys
    sys.path.insert(0, %r)
    import runlog, drive_work as work
    root, outputs, d, per_task = sys.argv[1:5]
    units = ["u%%04d" %% i for i in range(%d)]
    spawn = multiprocessing.get_context("spawn")
    print("started", flush=True)
    runlog.drive(root, "z", functools.partial(work.blob, d, 0.03), units,
                 executor=lambda: cf.ProcessPoolExecutor(2, mp_context=spawn),
                 outputs=outputs, fingerprint={"v": 1}, max_in_flight=4,
                 units_per_task=int(per_task))
    print("finished", flush=True)
    """
) % (HERE, UNITS)


@pytest.mark.parametrize("kind", ["file", "s3"])
def test_the_old_coordinator_is_fenced_and_commits_nothing(tmp_path, monkeypatch, kind):
    fence(tmp_path, monkeypatch, kind, 1, units_b=True)


def test_a_coordinator_sending_two_units_a_task_is_fenced_by_one_restoring_without_a_list(
        tmp_path, monkeypatch):
    """A sends two units a task; B, on a new host, drives with units=None:
    the run restored from the remote gives B its units."""
    fence(tmp_path, monkeypatch, "file", 2, units_b=False)


def fence(tmp_path, monkeypatch, kind, per_task, units_b):
    if kind == "file":
        remote = (tmp_path / "remote").as_uri()
        outputs = (tmp_path / "objects").as_uri()
    else:
        base = work.s3_outputs("fenced")
        remote, outputs = base + "/runs", base + "/objects"
    monkeypatch.setenv("RUNLOG_REMOTE_ROOT", remote)
    monkeypatch.delenv("RUNLOG_REMOTE_POLICY", raising=False)  # sync
    monkeypatch.delenv("RUNLOG_DIR", raising=False)
    d = tmp_path / "work"
    d.mkdir()
    units = ["u%04d" % i for i in range(UNITS)]

    a = subprocess.Popen([sys.executable, "-c", COORDINATOR, str(tmp_path / "a"), outputs,
                          str(d), str(per_task)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        assert a.stdout.readline().strip() == "started"
        deadline = time.monotonic() + 120
        while True:
            assert time.monotonic() < deadline, "A never got 20 units done"
            try:
                if runlog.Runs(tmp_path / "a").get("z").counts().done >= 20:
                    break
            except runlog.Error:
                pass
            time.sleep(0.05)
        os.killpg(a.pid, signal.SIGSTOP)  # A's host stops answering, mid-run
        done_by_a = runlog.Runs(tmp_path / "a").get("z").counts().done
        assert done_by_a < UNITS

        # B: another runs root, nothing local: start restores from the remote.
        spawn = multiprocessing.get_context("spawn")
        with cf.ProcessPoolExecutor(2, mp_context=spawn) as pool:
            s = runlog.drive(tmp_path / "b", "z", functools.partial(work.blob, str(d), 0.0),
                             units if units_b else None, executor=pool, outputs=outputs,
                             fingerprint={"v": 1})
        # B restored what A's remote had acknowledged: A's local copy may hold
        # a few more (written, still being shipped when A froze).
        assert s.complete and 10 <= s.done_before <= done_by_a
        assert s.done_now == UNITS - s.done_before
    finally:
        os.killpg(a.pid, signal.SIGCONT)
    out, err = a.communicate(timeout=120)
    assert a.returncode != 0 and "finished" not in out, (out, err)
    assert "runlog.Fenced" in err, err

    b = runlog.Runs(tmp_path / "b").get("z")
    monkeypatch.setenv("RUNLOG_REMOTE_ROOT", remote)
    with runlog.Runs(tmp_path / "c").open("z") as c:  # a third host: the remote alone
        committed = set()
        for u in units:
            uc, ub = c.unit_status(u), b.unit_status(u)
            assert uc.status == "done" and (uc.note, uc.attempts) == (ub.note, ub.attempts)
            assert runlog.output(c, u) == work.expected(u)
            note = json.loads(uc.note)
            assert note["attempt"] == uc.attempts
            committed.add(note["output"]["name"])
        orphans = runlog.gc_outputs(c, outputs)
        assert set(runlog.OutputStore(outputs).list("u-z")) == committed
    assert not set(orphans) & committed
    print("A had %d done when frozen; gc removed %d orphans" % (done_by_a, len(orphans)))
