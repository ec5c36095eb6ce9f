"""runlog.drive through a real Dask LocalCluster (4 worker processes, its
executor from `Client.get_executor()`): a run with dependencies and outputs
completes, and a task that SIGKILLs its own worker process is run again
(Dask's nanny restarts the worker and the scheduler reschedules the task, or
the KilledWorker comes back and drive retries it) with its output committed
once."""

import functools
import json
import os
import sys

import pytest

import runlog

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import drive_work as work  # noqa: E402


@pytest.fixture(scope="module")
def client():
    distributed = work.require_dask()
    cluster = distributed.LocalCluster(n_workers=4, threads_per_worker=1, processes=True,
                                       dashboard_address=None)
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


@pytest.mark.parametrize("kind", ["file", "s3"])
def test_a_run_through_dask_with_outputs(tmp_path, root, client, kind):
    outputs = (tmp_path / "o").as_uri() if kind == "file" else work.s3_outputs("dask-run")
    units = ["u%03d" % i for i in range(40)]
    deps = {u: [units[i - 1]] for i, u in enumerate(units) if i % 4}  # chains of 4
    fn = functools.partial(work.blob, str(tmp_path), 0.0)
    s = runlog.drive(root, "dk", fn, units, deps=deps, executor=client.get_executor(),
                     outputs=outputs)
    assert s.complete and s.done_now == 40 and s.failed_attempts == 0
    view = runlog.Runs(root).get("dk")
    for u in units:
        assert runlog.output(view, u) == work.expected(u)
        for d in deps.get(u, ()):
            assert view.unit_status(d).finished_at <= view.unit_status(u).started_at
    with runlog.Runs(root).open("dk") as run:
        assert runlog.gc_outputs(run, outputs) == []
    assert len(runlog.OutputStore(outputs).list("u-dk")) == 40


def test_a_task_that_kills_its_dask_worker_is_run_again(tmp_path, root, client):
    outputs = (tmp_path / "o").as_uri()
    units = ["u%03d" % i for i in range(16)]
    victims = {"u002", "u009"}
    fn = functools.partial(work.killer, str(tmp_path), victims)
    s = runlog.drive(root, "dw", fn, units, executor=client.get_executor(), outputs=outputs,
                     retries=3, max_in_flight=4)
    assert s.complete, str(s)
    view = runlog.Runs(root).get("dw")
    for u in units:
        assert runlog.output(view, u) == work.expected(u)
    for v in victims:
        # It ran at least twice: once killed, once to completion.
        assert work.executions(str(tmp_path), v) >= 2
        note = json.loads(view.unit_status(v).note)
        assert note["attempt"] == view.unit_status(v).attempts
    with runlog.Runs(root).open("dw") as run:
        runlog.gc_outputs(run, outputs)
    assert len(runlog.OutputStore(outputs).list("u-dw")) == 16
    client.wait_for_workers(4, timeout=60)
