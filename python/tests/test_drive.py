"""runlog.drive through a real ProcessPoolExecutor (spawned workers): units in
dependency order, results recorded, failures retried then blocked, a rerun
submitting nothing, a crash's in-flight unit resubmitted under a new claim
beside its orphan, gc removing only orphans, outputs read back with their
digest checked, and a worker SIGKILLed by its own task retried."""

import concurrent.futures as cf
import functools
import json
import multiprocessing
import os
import pathlib
import sys

import pytest

import runlog

sys.path.insert(0, os.path.dirname(__file__))
import drive_work as work  # noqa: E402

SPAWN = multiprocessing.get_context("spawn")


def pool(n=2):
    return cf.ProcessPoolExecutor(n, mp_context=SPAWN)


@pytest.fixture(scope="module")
def shared_pool():
    with pool() as p:
        yield p


def names(n):
    return ["u%03d" % i for i in range(n)]


def test_units_run_after_their_deps_and_results_are_recorded(tmp_path, root, shared_pool):
    units = names(30)
    # A diamond on top of a chain: u000 → u001..u009 → u010; u010 → the rest.
    deps = {u: ["u000"] for u in units[1:10]}
    deps["u010"] = units[1:10]
    for u in units[11:]:
        deps[u] = ["u010"]
    fn = functools.partial(work.square, str(tmp_path), 0.0)
    s = runlog.drive(root, "d1", fn, units, deps=deps, executor=shared_pool,
                     fingerprint={"v": 1}, max_in_flight=4)
    assert s.complete and s.done == s.done_now == 30 and s.failed_attempts == 0
    view = runlog.Runs(root).get("d1")
    for u in units:
        unit = view.unit_status(u)
        assert unit.status == "done" and unit.attempts == 1
        assert runlog.output(view, u) == int(u[1:]) ** 2
        for d in deps.get(u, ()):
            assert view.unit_status(d).finished_at <= unit.started_at, (d, u)
        note = json.loads(unit.note)
        assert note["attempt"] == 1 and len(note["claim"]) == 16
    assert str(s).startswith("run d1: 30/30 units done")

    # The same call again submits nothing: every unit is done.
    before = work.executions(str(tmp_path))
    s = runlog.drive(root, "d1", fn, units, deps=deps, executor=shared_pool,
                     fingerprint={"v": 1})
    assert s.complete and s.done_now == 0 and s.done_before == 30
    assert work.executions(str(tmp_path)) == before


def test_a_failure_is_retried_then_the_unit_blocked(tmp_path, root, shared_pool):
    units = names(6)
    deps = {"u005": ["u004"]}
    fn = functools.partial(work.picky, str(tmp_path), {"u004"}, {"u001", "u002"})
    s = runlog.drive(root, "d2", fn, units, deps=deps, executor=shared_pool, retries=2)
    assert not s.complete
    assert s.done == 4 and set(s.blocked) == {"u004"} and s.dep_blocked == 1
    assert s.failed_attempts == 2 + 3  # two flaky units once, u004 three times
    assert "ValueError: unit u004 cannot be done" in s.blocked["u004"]
    view = runlog.Runs(root).get("d2")
    bad = view.unit_status("u004")
    assert bad.status == "blocked" and bad.attempts == 3
    note = json.loads(bad.note)
    assert note["failures"] == 3 and note["error"].startswith("attempt 3: ValueError")
    for u in ("u001", "u002"):
        assert view.unit_status(u).attempts == 2 and runlog.output(view, u) == u.upper()
    assert view.unit_status("u005").status == "pending"
    assert work.executions(str(tmp_path), "u004") == 3
    assert work.executions(str(tmp_path), "u005") == 0

    # A new coordinator leaves the exhausted unit blocked: no fourth attempt.
    s = runlog.drive(root, "d2", fn, units, deps=deps, executor=shared_pool, retries=2)
    assert set(s.blocked) == {"u004"} and s.done_now == 0
    assert work.executions(str(tmp_path), "u004") == 3
    # With a bigger budget it tries again (and fails again).
    s = runlog.drive(root, "d2", fn, units, deps=deps, executor=shared_pool, retries=3)
    assert work.executions(str(tmp_path), "u004") == 4
    assert json.loads(runlog.Runs(root).get("d2").unit_status("u004").note)["failures"] == 4


def test_a_drive_left_with_blocked_units_records_it_in_the_run_and_says_so(tmp_path, root,
                                                                          shared_pool):
    """Returning with units blocked, drive marks the run (phase runlog.drive
    blocked: `runlog ui` lists it as needing attention), keeps it open, and
    says so (DriveSummary.state, its text); a call with nothing to do writes
    nothing; once the unit is set pending and the drive completes, the phase
    is done."""
    units = names(4)
    deps = {"u003": ["u002"]}
    fn = functools.partial(work.picky, str(tmp_path), {"u002"}, set())
    s = runlog.drive(root, "d9", fn, units, deps=deps, executor=shared_pool, retries=1)
    assert set(s.blocked) == {"u002"} and s.dep_blocked == 1
    assert s.state == "needs_attention" and s.needs_attention and not s.complete
    text = str(s)
    assert "needs attention: 1 unit(s) blocked" in text, text
    assert "phase runlog.drive blocked" in text and "`runlog unit d9 UNIT pending`" in text, text
    st = runlog.Runs(root).get("d9").status()
    assert st.phases == {"runlog.drive": runlog.PhaseStatus.BLOCKED}
    assert not st.closed and st.status is runlog.RunStatus.RUNNING

    # Again, with the unit still blocked: nothing to submit, nothing written.
    s = runlog.drive(root, "d9", fn, units, deps=deps, executor=shared_pool, retries=1)
    assert s.state == "needs_attention" and s.done_now == 0
    again = runlog.Runs(root).get("d9").status()
    assert again.updated_at == st.updated_at and again.phases == st.phases

    # The cause fixed, the unit set pending: the drive completes, and says so.
    with runlog.Runs(root).open("d9") as run:
        run.unit("u002", "pending", note="disk replaced")
    good = functools.partial(work.picky, str(tmp_path), set(), set())
    s = runlog.drive(root, "d9", good, units, deps=deps, executor=shared_pool, retries=1)
    assert s.state == "complete" and s.done_now == 2 and not s.needs_attention
    assert "needs attention" not in str(s)
    assert runlog.Runs(root).get("d9").status().phases == {"runlog.drive": "done"}


def test_bytes_go_to_outputs_and_reading_checks_the_digest(tmp_path, root, shared_pool):
    store = (tmp_path / "objects").as_uri()
    units = names(8)
    fn = functools.partial(work.blob, str(tmp_path), 0.0)
    s = runlog.drive(root, "d3", fn, units, executor=shared_pool, outputs=store)
    assert s.complete
    view = runlog.Runs(root).get("d3")
    for u in units:
        assert runlog.output(view, u) == work.expected(u)
        o = json.loads(view.unit_status(u).note)["output"]
        claim = json.loads(view.unit_status(u).note)["claim"]
        assert o["name"] == runlog.output_name("d3", u, 1, claim)
        assert o["len"] == 65536 and o["digest"] == runlog.OutputStore.digest(work.expected(u))
    objects = sorted(p for p in (tmp_path / "objects").rglob("*") if p.is_file())
    assert len(objects) == 8
    # Damage one object: reading it names the object, and the other units still read.
    victim = tmp_path / "objects" / json.loads(view.unit_status("u003").note)["output"]["name"]
    data = bytearray(victim.read_bytes())
    data[100] ^= 1
    victim.write_bytes(bytes(data))
    with pytest.raises(runlog.Corrupt) as info:
        runlog.output(view, "u003")
    assert "u003" in str(info.value) and "d3" in str(info.value)
    assert info.value.file.endswith(victim.name)
    assert runlog.output(view, "u004") == work.expected("u004")
    # Nothing is orphaned: gc deletes nothing.
    with runlog.Runs(root).open("d3") as run:
        assert runlog.gc_outputs(run, store) == []


def test_a_result_too_big_without_outputs_blocks_with_the_reason(tmp_path, root, shared_pool):
    fn = functools.partial(work.blob, str(tmp_path), 0.0)
    s = runlog.drive(root, "d4", fn, ["u000"], executor=shared_pool, retries=0)
    assert set(s.blocked) == {"u000"}
    assert "65536 bytes" in s.blocked["u000"] and "outputs=" in s.blocked["u000"]


def test_the_unit_in_flight_at_a_crash_is_resubmitted_beside_its_orphan(tmp_path, root,
                                                                        shared_pool):
    store = (tmp_path / "objects").as_uri()
    units = names(4)
    runs = runlog.Runs(root)
    # What a coordinator killed mid-attempt leaves: u001 in_progress with its
    # claim recorded, and its worker's output written, but no done.
    with runs.start("d5", units=units) as run:
        run.unit("u000", "in_progress", note='{"claim":"00000000000000aa","failures":0}')
        run.unit("u000", "done", note='{"value":0,"claim":"00000000000000aa","attempt":1}')
        run.unit("u001", "in_progress", note='{"claim":"00000000000000bb","failures":0}')
    orphan = runlog.output_name("d5", "u001", 1, "00000000000000bb")
    created, n, _ = runlog.OutputStore(store).put_create(orphan, b"stale bytes", 1 << 20)
    assert created and n == 11

    fn = functools.partial(work.blob, str(tmp_path), 0.0)
    s = runlog.drive(runs, "d5", fn, units, executor=shared_pool, outputs=store)
    assert s.complete and s.resubmitted == 1 and s.done_before == 1 and s.done_now == 3
    assert work.executions(str(tmp_path), "u000") == 0  # done: never resubmitted
    view = runs.get("d5")
    u1 = view.unit_status("u001")
    note = json.loads(u1.note)
    assert u1.attempts == 2 and note["attempt"] == 2 and note["claim"] != "00000000000000bb"
    assert note["output"]["name"] != orphan
    assert runlog.output(view, "u001") == work.expected("u001")  # not the orphan's bytes
    assert runlog.output(view, "u000") == 0

    with runs.open("d5") as run:
        assert runlog.gc_outputs(run, store, dry_run=True) == [orphan]
        assert runlog.gc_outputs(run, store) == [orphan]
        assert runlog.gc_outputs(run, store) == []
    left = sorted(str(p.relative_to(tmp_path / "objects"))
                  for p in (tmp_path / "objects").rglob("*") if p.is_file())
    committed = sorted(json.loads(view.unit_status(u).note)["output"]["name"]
                       for u in units[1:])
    assert left == committed


def test_a_second_execution_of_one_attempt_describes_the_first_object(tmp_path):
    # An executor that re-runs a task (its worker died after the write) writes
    # the same name again: create-only keeps the first bytes, and both
    # executions report the object actually stored.
    store = runlog.OutputStore((tmp_path / "o").as_uri())
    first = store.put_create("r/u/1-c", b"first", 100)
    again = store.put_create("r/u/1-c", b"second!", 100)
    assert first == (True, 5, runlog.OutputStore.digest(b"first"))
    assert again == (False, 5, runlog.OutputStore.digest(b"first"))
    assert store.get("r/u/1-c", 100) == b"first"
    with pytest.raises(runlog.Corrupt):
        store.get("r/u/1-c", 4)  # longer than allowed
    assert store.get("r/u/none", 100) is None


def test_a_task_that_kills_its_worker_is_retried_on_a_new_pool(tmp_path, root):
    store = (tmp_path / "objects").as_uri()
    units = names(12)
    fn = functools.partial(work.killer, str(tmp_path), {"u003", "u007"})
    made = []

    def factory():
        made.append(pool())
        return made[-1]

    s = runlog.drive(root, "d6", fn, units, executor=factory, outputs=store, retries=3,
                     max_in_flight=3)
    assert s.complete, str(s)
    assert len(made) >= 2  # the broken pool was replaced
    assert s.failed_attempts >= 1
    view = runlog.Runs(root).get("d6")
    for u in units:
        assert runlog.output(view, u) == work.expected(u)
    assert view.unit_status("u003").attempts >= 2
    assert view.unit_status("u007").attempts >= 2


def test_a_broken_executor_it_did_not_make_stops_the_drive_with_the_reason(tmp_path, root):
    fn = functools.partial(work.killer, str(tmp_path), {"u000"})
    p = pool(1)
    try:
        with pytest.raises(runlog.Error) as info:
            runlog.drive(root, "d7", fn, names(3), executor=p, max_in_flight=1, retries=5,
                         outputs=(tmp_path / "o").as_uri())
    finally:
        p.shutdown()
    assert "executor is broken" in str(info.value) and "d7" in str(info.value)
    # The failure was recorded before it stopped; a new call with a working pool finishes.
    u = runlog.Runs(root).get("d7").unit_status("u000")
    assert u.status == "pending" and json.loads(u.note)["failures"] == 1
    with pool(1) as p:
        s = runlog.drive(root, "d7", fn, names(3), executor=p, outputs=(tmp_path / "o").as_uri())
    assert s.complete


def test_bad_arguments_are_refused_before_anything_is_written(root):
    with pytest.raises(ValueError):
        runlog.drive(root, "d8", str, ["a"], executor=cf.ThreadPoolExecutor(1), retries=-1)
    with pytest.raises(ValueError):
        runlog.drive(root, "d8", str, ["a"], executor=cf.ThreadPoolExecutor(1),
                     max_in_flight=0)
    assert not pathlib.Path(root, "d8").exists()
