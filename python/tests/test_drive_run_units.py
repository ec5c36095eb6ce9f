"""runlog.drive(units=None): the units of a run that exists, worked without a
list of their names. Its dependencies are the run's (dependents of a unit
held back are released as it is done, and stay held when it is blocked);
a run that does not exist, is finished, or has another fingerprint is
refused with the reason; and the coordinator holds state only for the
units in flight, not one entry per unit of the run."""

import concurrent.futures as cf
import functools
import json
import multiprocessing
import os
import sys
import tracemalloc

import pytest

import runlog

sys.path.insert(0, os.path.dirname(__file__))
import drive_work as work  # noqa: E402

SPAWN = multiprocessing.get_context("spawn")


def names(n):
    return ["u%03d" % i for i in range(n)]


def test_units_none_works_the_runs_units_in_the_runs_dependency_order(tmp_path, root):
    units = names(12)
    # u000 → u001..u003 → u004; u005 ← u006 ← u007 with u005 failing for good.
    deps = {u: ["u000"] for u in units[1:4]}
    deps["u004"] = units[1:4]
    deps["u006"] = ["u005"]
    deps["u007"] = ["u006"]
    runs = runlog.Runs(root)
    with runs.start("n1", units=units, deps=deps, fingerprint={"v": 1}) as run:
        run.unit("u010", "in_progress", note='{"claim":"00000000000000aa","failures":0}')
        run.unit("u010", "done", note='{"value":100,"claim":"00000000000000aa","attempt":1}')
        run.unit("u011", "in_progress", note='{"claim":"00000000000000bb","failures":0}')
    fn = functools.partial(work.picky, str(tmp_path), {"u005"}, set())
    with cf.ProcessPoolExecutor(2, mp_context=SPAWN) as pool:
        s = runlog.drive(root, "n1", fn, None, executor=pool, retries=1, units_per_task=2,
                         fingerprint={"v": 1})
    assert s.units == 12 and s.done_before == 1 and s.done_now == 8 and s.done == 9
    assert set(s.blocked) == {"u005"} and s.dep_blocked == 2 and s.resubmitted == 1
    view = runs.get("n1")
    for u, ds in deps.items():
        if u in ("u006", "u007"):
            assert view.unit_status(u).status == "pending"
            assert work.executions(str(tmp_path), u) == 0
            continue
        for d in ds:
            assert view.unit_status(d).finished_at <= view.unit_status(u).started_at, (d, u)
    assert view.unit_status("u011").attempts == 2
    assert json.loads(view.unit_status("u010").note)["attempt"] == 1  # not run again
    assert work.executions(str(tmp_path), "u010") == 0

    # u005 fixed and set pending: the same call releases its dependents.
    with runs.open("n1") as run:
        run.unit("u005", "pending")
    fn = functools.partial(work.picky, str(tmp_path), set(), set())
    with cf.ProcessPoolExecutor(2, mp_context=SPAWN) as pool:
        s = runlog.drive(root, "n1", fn, None, executor=pool, retries=1)
    assert s.complete and s.done_now == 3 and s.dep_blocked == 0
    view = runs.get("n1")
    assert view.unit_status("u007").started_at >= view.unit_status("u006").finished_at


def test_units_none_refuses_a_run_it_cannot_drive_and_writes_nothing(root):
    ex = cf.ThreadPoolExecutor(1)
    with pytest.raises(runlog.Error, match="does not exist.*pass units"):
        runlog.drive(root, "n2", str, None, executor=ex)
    assert not (root / "runs" / "n2").exists() or not any((root / "runs" / "n2").iterdir())
    runs = runlog.Runs(root)
    with runs.start("n3", units=["a"], fingerprint={"v": 1}):
        pass
    with pytest.raises(runlog.Error, match="fingerprint"):
        runlog.drive(root, "n3", str, None, executor=ex, fingerprint={"v": 2})
    with runs.open("n3") as run:
        run.finalize("aborted")
    with pytest.raises(runlog.Error, match="is finished"):
        runlog.drive(root, "n3", str, None, executor=ex)
    with pytest.raises(ValueError, match="deps"):
        runlog.drive(root, "n3", str, None, executor=ex, deps={"a": ["b"]})
    with pytest.raises(ValueError, match="units_per_task"):
        runlog.drive(root, "n3", str, ["a"], executor=ex, units_per_task=0)
    assert runs.get("n3").unit_status("a").status == "pending"
    ex.shutdown()


def one(unit):
    return 1


def test_the_coordinator_holds_no_entry_per_unit_of_the_run(root):
    """Python memory the drive allocates, at its peak, for a run of 20,000
    units with 64 in flight: a few units' worth, not one entry (a status, a
    count, a name in a list) per unit of the run. The eligible names stay
    packed on the Rust side, which tracemalloc does not see."""
    n = 20000
    runs = runlog.Runs(root)
    with runs.start("n4") as run:
        for i in range(0, n, 5000):
            run.units([("u%06d" % j, "pending") for j in range(i, i + 5000)])
    with cf.ThreadPoolExecutor(2) as ex:
        tracemalloc.start()
        try:
            s = runlog.drive(runs, "n4", one, None, executor=ex, max_in_flight=64,
                             units_per_task=16)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert s.complete and s.done_now == n
    # One small object per unit of the run would be ≥ 56 bytes × 20,000 = 1.1 MB.
    assert peak < 400_000, "drive's peak Python allocation: %d bytes" % peak


def test_a_run_of_mixed_statuses_is_read_once_each_unit_submitted_once(root):
    """3,000 units, several chunks of each status's stream: every third
    in_progress (a crashed coordinator's), every fifth of the others blocked
    with retries left, the rest pending. Each runs exactly once more, in
    progress ones counted as resubmitted; none is read twice as its status
    changes under the streams."""
    units = ["u%05d" % i for i in range(3000)]
    runs = runlog.Runs(root)
    with runs.start("n5", units=units) as run:
        run.units([(u, "in_progress", '{"claim":"%016x","failures":0}' % i)
                   for i, u in enumerate(units) if i % 3 == 0])
        run.units([(u, "blocked", '{"failures":1,"error":"attempt 1: E"}')
                   for i, u in enumerate(units) if i % 3 and i % 5 == 0])
    ran = {}

    def count(unit):
        ran[unit] = ran.get(unit, 0) + 1
        return 1

    with cf.ThreadPoolExecutor(4) as ex:
        s = runlog.drive(runs, "n5", count, None, executor=ex, max_in_flight=48,
                         units_per_task=3)
    assert s.complete and s.done_now == 3000 and s.resubmitted == 1000
    assert ran == {u: 1 for u in units}
    view = runs.get("n5")
    for i in (0, 5, 10, 1):
        u = view.unit_status(units[i])
        assert u.attempts == (2 if i % 3 == 0 else 1), i
        assert json.loads(u.note)["attempt"] == u.attempts


def test_a_call_naming_some_of_the_runs_units_works_only_those(root):
    """The run has more units than the call names (same fingerprint): only
    the named ones are worked, and the summary counts them alone; a name the
    run does not have is refused before anything is submitted."""
    runs = runlog.Runs(root)
    with runs.start("n6", units=["a", "b", "c", "d"], fingerprint={"v": 1}) as run:
        run.unit("a", "in_progress")
        run.unit("a", "done")
    ran = []
    with cf.ThreadPoolExecutor(1) as ex:
        s = runlog.drive(runs, "n6", ran.append, ["a", "b", "c"], executor=ex,
                         fingerprint={"v": 1})
        assert sorted(ran) == ["b", "c"]
        assert (s.units, s.done, s.done_before, s.done_now) == (3, 3, 1, 2) and s.complete
        assert runs.get("n6").unit_status("d").status == "pending"
        with pytest.raises(runlog.Error, match="'e' is not in the run"):
            runlog.drive(runs, "n6", ran.append, ["a", "b", "e"], executor=ex,
                         fingerprint={"v": 1})
    assert sorted(ran) == ["b", "c"]
