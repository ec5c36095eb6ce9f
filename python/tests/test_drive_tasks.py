"""runlog.drive with several units a task (`units_per_task`), through a real
ProcessPoolExecutor: each unit of a task is still its own attempt, with its
own claim, `in_progress` and `done`; a unit that raises fails only its own
attempt (the others of its task are done once); a task whose worker dies
fails each of its units' attempts, which are retried under new claims, and
the output written before the death is an orphan gc removes."""

import concurrent.futures as cf
import functools
import json
import multiprocessing
import os
import sys

import runlog

sys.path.insert(0, os.path.dirname(__file__))
import drive_work as work  # noqa: E402

SPAWN = multiprocessing.get_context("spawn")


def names(n):
    return ["u%03d" % i for i in range(n)]


def test_a_unit_that_raises_fails_only_its_own_attempt_in_a_task_of_several(tmp_path, root):
    units = names(12)
    deps = {"u011": ["u004"]}
    fn = functools.partial(work.picky, str(tmp_path), {"u004"}, {"u001", "u006"})
    with cf.ProcessPoolExecutor(2, mp_context=SPAWN) as pool:
        s = runlog.drive(root, "t1", fn, units, deps=deps, executor=pool, retries=1,
                         units_per_task=4)
    assert s.done == 10 and set(s.blocked) == {"u004"} and s.dep_blocked == 1
    assert s.failed_attempts == 2 + 2  # u001 and u006 once, u004 twice
    assert "attempt 2: ValueError: unit u004 cannot be done" == s.blocked["u004"]
    view = runlog.Runs(root).get("t1")
    claims = set()
    for u in units[:11]:
        unit = view.unit_status(u)
        note = json.loads(unit.note)
        if u == "u004":
            assert unit.status == "blocked" and unit.attempts == 2 and note["failures"] == 2
            continue
        flaky = u in ("u001", "u006")
        # Its task's neighbours' failures cost it nothing: one attempt, one done.
        assert unit.status == "done" and unit.attempts == (2 if flaky else 1), u
        assert work.executions(str(tmp_path), u) == unit.attempts, u
        assert note["attempt"] == unit.attempts and runlog.output(view, u) == u.upper()
        claims.add(note["claim"])
    assert len(claims) == 10  # a claim of its own per unit
    assert view.unit_status("u011").status == "pending"
    assert work.executions(str(tmp_path), "u011") == 0


def test_a_task_whose_worker_dies_fails_each_of_its_units_attempts(tmp_path, root):
    store = (tmp_path / "objects").as_uri()
    units = names(9)
    # One task of three in flight at a time: u003..u005 share the victim's.
    fn = functools.partial(work.killer, str(tmp_path), {"u004"})

    def pool():
        return cf.ProcessPoolExecutor(1, mp_context=SPAWN)

    s = runlog.drive(root, "t2", fn, units, executor=pool, outputs=store, retries=2,
                     units_per_task=3, max_in_flight=3)
    assert s.complete and s.failed_attempts == 3, str(s)
    view = runlog.Runs(root).get("t2")
    committed = set()
    for u in units:
        unit = view.unit_status(u)
        in_victims_task = u in ("u003", "u004", "u005")
        assert unit.attempts == (2 if in_victims_task else 1), u
        assert runlog.output(view, u) == work.expected(u)  # digest checked
        note = json.loads(unit.note)
        assert note["attempt"] == unit.attempts
        committed.add(note["output"]["name"])
    # u003 ran and wrote before its worker died with u004; u005 never ran then.
    assert work.executions(str(tmp_path), "u003") == 2
    assert work.executions(str(tmp_path), "u005") == 1
    with runlog.Runs(root).open("t2") as run:
        orphans = runlog.gc_outputs(run, store)
    assert [o.split("/")[1] for o in orphans] == ["u-u003"]
    assert set(runlog.OutputStore(store).list("u-t2")) == committed
