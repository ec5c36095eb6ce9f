"""runlog.drive through Ray (`runlog.RayExecutor`) on one local `ray.init` (2
CPUs) for the module: a run with dependencies and outputs completes; a
failing task is retried, then its unit blocked; a task that SIGKILLs its own
Ray worker is a failed attempt, run again, its output committed once; and a
coordinator (a Ray driver of its own, connected to this instance) SIGKILLed
at random points and restarted finishes with exactly-once outputs
(test_drive_kill.py's check). Skips saying why without Ray; fails instead
under RUNLOG_REQUIRE_PYTHON=1 (CI)."""

import functools
import json
import os
import sys

import pytest

import runlog

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import drive_work as work  # noqa: E402
from test_drive_kill import kill_and_restart, outputs_for  # noqa: E402


@pytest.fixture(scope="module")
def ray():
    ray = work.require_ray()
    # Ray's workers, those of every driver (the coordinators of
    # test_coordinator_killed_while_ray_lives_on too), take the environment
    # of the raylet this starts: they find drive_work on PYTHONPATH.
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", os.pathsep.join(
            p for p in (HERE, os.environ.get("PYTHONPATH")) if p))
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def names(n):
    return ["u%03d" % i for i in range(n)]


@pytest.mark.parametrize("kind", ["file", "s3"])
def test_a_run_through_ray_with_outputs(tmp_path, root, ray, kind):
    outputs = (tmp_path / "o").as_uri() if kind == "file" else work.s3_outputs("ray-run")
    units = names(40)
    deps = {u: [units[i - 1]] for i, u in enumerate(units) if i % 4}  # chains of 4
    fn = functools.partial(work.blob, str(tmp_path), 0.0)
    s = runlog.drive(root, "ry", fn, units, deps=deps, executor=runlog.RayExecutor(),
                     outputs=outputs)
    assert s.complete and s.done_now == 40 and s.failed_attempts == 0
    view = runlog.Runs(root).get("ry")
    for u in units:
        assert runlog.output(view, u) == work.expected(u)
        for d in deps.get(u, ()):
            assert view.unit_status(d).finished_at <= view.unit_status(u).started_at
    with runlog.Runs(root).open("ry") as run:
        assert runlog.gc_outputs(run, outputs) == []
    assert len(runlog.OutputStore(outputs).list("u-ry")) == 40


def test_a_failure_through_ray_is_retried_then_the_unit_blocked(tmp_path, root, ray):
    units = names(6)
    deps = {"u005": ["u004"]}
    fn = functools.partial(work.picky, str(tmp_path), {"u004"}, {"u001", "u002"})
    # A factory: drive makes the executor and shuts it down at the end.
    s = runlog.drive(root, "rf", fn, units, deps=deps, executor=runlog.RayExecutor, retries=2)
    assert s.done == 4 and set(s.blocked) == {"u004"} and s.dep_blocked == 1
    assert s.failed_attempts == 2 + 3  # two flaky units once, u004 three times
    view = runlog.Runs(root).get("rf")
    note = json.loads(view.unit_status("u004").note)
    # The task's own exception, not Ray's wrapper of it.
    assert note["error"] == "attempt 3: ValueError: unit u004 cannot be done", note
    for u in ("u001", "u002"):
        assert view.unit_status(u).attempts == 2 and runlog.output(view, u) == u.upper()
    assert work.executions(str(tmp_path), "u004") == 3
    assert work.executions(str(tmp_path), "u005") == 0


def test_a_task_that_kills_its_ray_worker_is_run_again(tmp_path, root, ray):
    outputs = (tmp_path / "o").as_uri()
    units = names(12)
    victims = {"u002", "u009"}
    fn = functools.partial(work.killer, str(tmp_path), victims)
    s = runlog.drive(root, "rw", fn, units, executor=runlog.RayExecutor(), outputs=outputs,
                     retries=3, max_in_flight=4)
    assert s.complete, str(s)
    # Each death is one failed attempt drive recorded (Ray does not retry it).
    assert s.failed_attempts == len(victims), str(s)
    view = runlog.Runs(root).get("rw")
    for u in units:
        assert runlog.output(view, u) == work.expected(u)
    for v in victims:
        assert work.executions(str(tmp_path), v) == 2  # once killed, once to completion
        u = view.unit_status(v)
        note = json.loads(u.note)
        assert u.attempts == note["attempt"] == 2
    with runlog.Runs(root).open("rw") as run:
        assert runlog.gc_outputs(run, outputs) == []  # the killed attempts wrote nothing
    assert len(runlog.OutputStore(outputs).list("u-rw")) == 12


@pytest.mark.parametrize("kind", ["file", "s3"])
def test_coordinator_killed_while_ray_lives_on(tmp_path, kind, ray):
    outputs = outputs_for(kind, tmp_path, "kill-ray")
    address = ray.get_runtime_context().gcs_address
    kill_and_restart(tmp_path, "ray:" + address, outputs, 0.02)
