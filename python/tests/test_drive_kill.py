"""A drive coordinator SIGKILLed at random points and started again, through a
ProcessPoolExecutor (killed with it: the host is lost) and through a Dask
LocalCluster that outlives it, with outputs on a file:// directory and on
the Ceph gateway (and, through the pool, with four units a task): in the
end every unit is done with the right bytes (digest
checked), a unit done at a kill was never done again (its committed claim
and finish time unchanged), each committed output is its unit's last
attempt's, and gc leaves exactly the committed objects.

Each kill lands at a random point of the progress left (and a random instant
after it); RUNLOG_DRIVE_SEED fixes them (the seed is printed either way).
test_drive_ray.py runs the same kills and check through a local Ray instance
(mode `ray:ADDRESS`)."""

import json
import os
import random
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

UNITS = 160
KILLS = 3

COORDINATOR = textwrap.dedent(
    """
    import concurrent.futures as cf, functools, json, multiprocessing, sys
    sys.path.insert(0, %r)
    import runlog, drive_work as work
    root, run_id, n, mode, outputs, d, sleep, per_task = sys.argv[1:9]
    units = ["u%%04d" %% i for i in range(int(n))]
    deps = {u: [units[(i - 1) // 2]] for i, u in enumerate(units) if i > 0}  # a binary tree
    fn = functools.partial(work.blob, d, float(sleep))
    if mode == "pool":
        spawn = multiprocessing.get_context("spawn")
        ex = lambda: cf.ProcessPoolExecutor(2, mp_context=spawn)
    elif mode.startswith("ray:"):
        import ray
        ray.init(address=mode[4:], log_to_driver=False)
        ex = runlog.RayExecutor()
    else:
        import distributed
        ex = distributed.Client(mode).get_executor()
    print("started", flush=True)
    s = runlog.drive(root, run_id, fn, units, deps=deps, executor=ex, outputs=outputs,
                     fingerprint={"n": n}, max_in_flight=8, units_per_task=int(per_task))
    print("summary " + json.dumps(dict(done=s.done, units=s.units, now=s.done_now,
                                       resubmitted=s.resubmitted)), flush=True)
    """
) % HERE


def coordinator(root, run_id, mode, outputs, d, sleep, per_task=1):
    return subprocess.Popen(
        [sys.executable, "-c", COORDINATOR, str(root), run_id, str(UNITS), mode, outputs,
         str(d), str(sleep), str(per_task)],
        stdout=subprocess.PIPE, text=True, start_new_session=True)


@pytest.fixture(scope="module")
def cluster():
    distributed = work.require_dask()
    c = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                 dashboard_address=None)
    yield c
    c.close()


def done_now(root):
    try:
        return runlog.Runs(root).get("k").counts().done
    except runlog.Error:
        return 0  # not created yet


def outputs_for(kind, tmp_path, test):
    if kind == "file":
        return (tmp_path / "objects").as_uri()
    return work.s3_outputs(test)


def kill_and_restart(tmp_path, mode, outputs, sleep, per_task=1):
    seed = int(os.environ.get("RUNLOG_DRIVE_SEED", random.randrange(1 << 30)))
    print("RUNLOG_DRIVE_SEED=%d" % seed)
    rng = random.Random(seed)
    root, d = tmp_path / "root", tmp_path / "work"
    d.mkdir()
    seen = {}  # unit → (claim, finished_at) when first seen done at a kill
    mid_run = 0
    for k in range(KILLS):
        p = coordinator(root, "k", mode, outputs, d, sleep, per_task)
        assert p.stdout.readline().strip() == "started"
        # Kill at a random point of the progress left, then a random instant
        # of the submit/write cycle.
        left = UNITS - len(seen)
        target = len(seen) + rng.randint(1, max(1, left * 2 // 3))
        while p.poll() is None and done_now(root) < target:
            time.sleep(0.005)
        time.sleep(rng.uniform(0, 0.05))
        os.killpg(p.pid, signal.SIGKILL)  # the coordinator and the pool it made
        p.wait()
        if p.returncode != -signal.SIGKILL:
            break  # it finished before the kill: nothing left to kill
        try:
            view = runlog.Runs(root).get("k")
        except runlog.NotFound:
            continue  # killed before the run was created
        done = 0
        for u in view.iter_units(status="done"):
            done += 1
            note = json.loads(u.note)
            seen.setdefault(u.name, (note["claim"], u.finished_at))
        mid_run += 0 < done < UNITS
        print("kill %d: %d/%d done (seed %d)" % (k, done, UNITS, seed))
    p = coordinator(root, "k", mode, outputs, d, sleep, per_task)
    out = p.stdout.read()
    assert p.wait() == 0, out
    summary = json.loads(out.split("summary ", 1)[1])
    assert summary["done"] == summary["units"] == UNITS
    assert mid_run >= 1, "no kill landed mid-run (seed %d): the test proved nothing" % seed

    runs = runlog.Runs(root)
    view = runs.get("k")
    committed = set()
    for u in view.iter_units():
        assert u.status == "done", u.name
        note = json.loads(u.note)
        assert runlog.output(view, u.name) == work.expected(u.name)  # digest checked
        assert note["attempt"] == u.attempts  # the last attempt's output, no other
        name = note["output"]["name"]
        assert name == runlog.output_name("k", u.name, u.attempts, note["claim"])
        assert name not in committed
        committed.add(name)
        if u.name in seen:  # done at a kill: never done again
            assert (note["claim"], u.finished_at) == seen[u.name], u.name
    assert work.executions(str(d)) .keys() == {u.name for u in view.iter_units()}
    with runs.open("k") as run:
        orphans = runlog.gc_outputs(run, outputs)
        store = runlog.OutputStore(outputs)
        left = set(store.list("u-k"))
    assert left == committed
    assert not (set(orphans) & committed)
    print("seed %d: %d orphans removed, %d executions for %d units"
          % (seed, len(orphans), sum(work.executions(str(d)).values()), UNITS))
    return orphans


@pytest.mark.parametrize("kind", ["file", "s3"])
def test_coordinator_killed_with_its_process_pool(tmp_path, kind):
    outputs = outputs_for(kind, tmp_path, "kill-pool")
    kill_and_restart(tmp_path, "pool", outputs, 0.02)


def test_coordinator_killed_with_its_process_pool_sending_four_units_a_task(tmp_path):
    """The same kills with four units a task (two tasks in flight): a task
    lost with the coordinator leaves its units in_progress, each then
    resubmitted under a new claim, each committed once."""
    kill_and_restart(tmp_path, "pool", (tmp_path / "objects").as_uri(), 0.02, per_task=4)


@pytest.mark.parametrize("kind", ["file", "s3"])
def test_coordinator_killed_while_the_dask_cluster_lives_on(tmp_path, kind, cluster):
    outputs = outputs_for(kind, tmp_path, "kill-dask")
    kill_and_restart(tmp_path, cluster.scheduler_address, outputs, 0.02)
