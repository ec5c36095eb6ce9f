"""8 threads and 4 processes writing one run: every transition lands once."""

import multiprocessing
import threading

import runlog
from runlog import UnitStatus

THREADS = 8
PER_THREAD = 60
PROCS = 4
PER_PROC = 40


def test_eight_threads_share_one_run(runs):
    names = ["t%d-%03d" % (t, i) for t in range(THREADS) for i in range(PER_THREAD)]
    seqs = []
    errors = []
    lock = threading.Lock()
    with runs.start("th", units=names) as run:
        barrier = threading.Barrier(THREADS)

        def work(t):
            try:
                barrier.wait()
                mine = []
                for i in range(PER_THREAD):
                    n = "t%d-%03d" % (t, i)
                    mine.append(run.unit(n, "in_progress"))
                    mine.append(run.unit(n, "done", note="by %d" % t))
                with lock:
                    seqs.extend(mine)
            except BaseException as e:  # surfaced below
                errors.append(e)

        threads = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert errors == []
        # Every acknowledged transition has its own seq.
        assert len(seqs) == len(set(seqs)) == 2 * THREADS * PER_THREAD
        c = run.counts()
        assert c.done == c.total == THREADS * PER_THREAD
        for u in run.iter_units():
            assert u.attempts == 1 and u.note == "by %s" % u.name[1]
    # Reopened from disk, the same.
    view = runs.get("th")
    assert view.counts().done == THREADS * PER_THREAD


def _proc_worker(root, p, q):
    runs = runlog.Runs(root, lock_wait=60)
    # Take turns on the writer lock: open, write a few, close, again.
    for start in range(0, PER_PROC, 5):
        with runs.open("mp") as run:
            batch = []
            for i in range(start, start + 5):
                n = "p%d-%03d" % (p, i)
                run.unit(n, "in_progress")
                batch.append((n, "done", "proc %d" % p))
            for seq in run.units(batch):
                q.put(seq)


def test_four_processes_write_one_run(runs, root):
    runs.start("mp").close()
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_proc_worker, args=(str(root), p, q)) for p in range(PROCS)]
    for pr in procs:
        pr.start()
    acked = [q.get(timeout=120) for _ in range(PROCS * PER_PROC)]
    for pr in procs:
        pr.join(timeout=120)
        assert pr.exitcode == 0
    assert len(set(acked)) == PROCS * PER_PROC
    view = runs.get("mp")
    units = list(view.iter_units())
    assert len(units) == PROCS * PER_PROC
    for u in units:
        assert u.status is UnitStatus.DONE and u.attempts == 1
        assert u.note == "proc %s" % u.name[1]


ONE_SHOT_PER_THREAD = 6


def _one_shot_worker(root, p, q):
    # Each thread is a one-shot writer of its own (Runs.unit): the writer lock
    # only for the replay catch-up and the write, the fdatasync shared with
    # every other thread and process (FORMAT.md §5.8).
    runs = runlog.Runs(root, lock_wait=60)
    errors = []

    def work(t):
        try:
            for i in range(ONE_SHOT_PER_THREAD):
                n = "p%d-t%d-%02d" % (p, t, i)
                q.put(runs.unit("os", n, "in_progress"))
                q.put(runs.unit("os", n, "done", note="p%d" % p))
        except BaseException as e:  # surfaced by the exit code
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        raise errors[0]


def test_four_processes_of_eight_one_shot_threads_lose_nothing(runs, root):
    runs.start("os").close()
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_one_shot_worker, args=(str(root), p, q)) for p in range(PROCS)]
    for pr in procs:
        pr.start()
    total = 2 * PROCS * THREADS * ONE_SHOT_PER_THREAD
    acked = [q.get(timeout=120) for _ in range(total)]
    for pr in procs:
        pr.join(timeout=120)
        assert pr.exitcode == 0
    assert len(set(acked)) == total
    assert runs.verify("os")["integrity"] == "clean"
    units = list(runs.get("os").iter_units())
    assert len(units) == total // 2
    for u in units:
        assert u.status is UnitStatus.DONE and u.attempts == 1
        assert u.note == "p%s" % u.name[1]
