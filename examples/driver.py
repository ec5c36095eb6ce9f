#!/usr/bin/env python3
"""A Python orchestrator driving `runlog apply` through a pipe (standard library
only, Python 3.9+).

    python3 examples/driver.py --runlog target/debug/runlog --dir /tmp/py --units 40

The DAG: unit uNNN (N >= 1) depends on u((N-1)/2). W worker threads run the
eligible units; each unit is written `in_progress`, worked on, then `done` with
its result in the note.

The apply protocol: one JSON operation per line on apply's stdin, one ack per
line on its stdout, in the same order: {"seq": N} once the transition is durable
(fsync'd), or {"error": "...", "code": 2} when the line is refused (nothing
written; apply goes on), or code 1 when the store failed (apply exits 1).

Pipelining: workers write lines without waiting for acks; a reader thread pops
the oldest pending request for each ack (acks come back in order), so lines
that arrive together share one fsync. At most MAX_IN_FLIGHT lines are unacked.
A unit counts as done only when its `done` line is acked; its dependents start
only then.

Restart: run again with the same arguments after a crash or kill -9
(`--kill-after K` stands in for one: the driver SIGKILLs itself once K units
are acked done). `runlog
start` restores the live run (same fingerprint) and `runlog resume --json`
lists the done units to skip; units interrupted while in_progress run again.
"""

import argparse
import collections
import hashlib
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

MAX_IN_FLIGHT = 256


def unit_name(i):
    return "u%03d" % i


class Apply:
    """A `runlog apply RUN` child. send() writes one operation without waiting;
    on_ack(op, ack) is called from the reader thread, in send order."""

    def __init__(self, argv):
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
        )
        self.pending = collections.deque()
        self.lock = threading.Lock()
        self.window = threading.BoundedSemaphore(MAX_IN_FLIGHT)
        self.reader = threading.Thread(target=self._read_acks, daemon=True)
        self.reader.start()

    def send(self, op, on_ack):
        self.window.acquire()  # flow control: bound the unacked lines
        line = json.dumps(op, separators=(",", ":"))
        # The deque's order must be the pipe's order: write and append together.
        with self.lock:
            try:
                self.proc.stdin.write(line + "\n")
                self.proc.stdin.flush()
                self.pending.append((op, on_ack))
                return
            except OSError as e:  # apply is gone (broken pipe)
                why = "cannot write to runlog apply: %s" % e
        self.window.release()
        on_ack(op, {"error": why, "code": 1})

    def _read_acks(self):
        for line in self.proc.stdout:
            ack = json.loads(line)
            with self.lock:
                op, on_ack = self.pending.popleft()
            self.window.release()
            on_ack(op, ack)
        # apply exited: whatever is still pending was never acknowledged.
        with self.lock:
            lost = list(self.pending)
            self.pending.clear()
        for op, on_ack in lost:
            self.window.release()
            on_ack(op, {"error": "runlog apply exited before acking", "code": 1})

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass  # apply already gone; its exit code says why
        code = self.proc.wait()
        self.reader.join()
        return code


def runlog(args, argv):
    """Runs a one-shot runlog command with --json; returns its parsed output."""
    cmd = [args.runlog] + (["--dir", args.dir] if args.dir else []) + ["--json"] + argv
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out)


def work(unit, ms):
    time.sleep(ms / 1000.0)
    return "sha256=" + hashlib.sha256(unit.encode()).hexdigest()[:12]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runlog", default=os.environ.get("RUNLOG", "runlog"))
    p.add_argument("--dir", help="runs root (else $RUNLOG_DIR or .runlog/)")
    p.add_argument("--run", default="driver")
    p.add_argument("--units", type=int, default=20)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--work-ms", type=int, default=20)
    p.add_argument(
        "--inject-error",
        action="store_true",
        help="also send one operation runlog refuses, to show error acks",
    )
    p.add_argument(
        "--kill-after",
        type=int,
        metavar="K",
        help="SIGKILL this process once K units are acked done (a stand-in for kill -9)",
    )
    args = p.parse_args()
    if shutil.which(args.runlog) is None:
        print(
            "driver.py: no runlog binary at %r: install it with `cargo install --path . --features cli` "
            "or `pip install ./python` (the Python package brings it) "
            "from the repository, or pass --runlog target/debug/runlog (or set $RUNLOG) "
            "after `cargo build --features cli`" % args.runlog,
            file=sys.stderr,
        )
        sys.exit(127)

    names = [unit_name(i) for i in range(args.units)]
    deps = {unit_name(i): [unit_name((i - 1) // 2)] for i in range(1, args.units)}
    dependents = collections.defaultdict(list)
    for u, ds in deps.items():
        for d in ds:
            dependents[d].append(u)

    start = ["start", "--id", args.run, "--fingerprint", "units=%d" % args.units]
    start += ["--task", "python driver, %d units" % args.units, "--units", ",".join(names)]
    for u, ds in deps.items():
        start += ["--deps", "%s=%s" % (u, "+".join(ds))]
    started = runlog(args, start)
    done = set(runlog(args, ["resume", args.run])["skip"])
    resumed_done = len(done)
    print(
        "%s run %s: %d done, %d to go"
        % ("resumed" if started["resumed"] else "started", args.run, len(done), len(names) - len(done)),
        flush=True,
    )

    apply_argv = [args.runlog] + (["--dir", args.dir] if args.dir else []) + ["apply", args.run]
    apply = Apply(apply_argv)
    events = queue.Queue()  # (kind, unit, ack) from the ack reader to the main loop

    def on_ack(op, ack):
        if op.get("op") == "unit" and op["status"] == "done":
            events.put(("done", op["unit"], ack))
        elif "error" in ack:
            events.put(("error", op.get("unit"), ack))

    def run_unit(unit):
        # Pipelined: neither send waits for its ack.
        apply.send({"op": "unit", "unit": unit, "status": "in_progress"}, on_ack)
        note = work(unit, args.work_ms)
        apply.send({"op": "unit", "unit": unit, "status": "done", "note": note}, on_ack)

    pool = ThreadPoolExecutor(max_workers=args.workers)
    in_flight = set()
    failed = {}

    def ready(u):
        return u not in done and u not in in_flight and all(d in done for d in deps.get(u, []))

    def submit(u):
        in_flight.add(u)
        pool.submit(run_unit, u)

    for u in names:
        if ready(u):
            submit(u)
    if args.inject_error:
        # Refused (no such budget): acked {"error":..,"code":2}, nothing written,
        # and the acks of the lines around it stay in order.
        apply.send({"op": "spend", "budget": "no-such-budget", "amount": 1}, on_ack)

    fatal = None
    while in_flight and fatal is None:
        kind, unit, ack = events.get()
        if "error" in ack:
            if ack.get("code") == 2:
                # A refusal: the rules said no. This unit (and what depends on
                # it) is left for a human; the rest goes on. `runlog apply`
                # has said why on stderr already (`runlog: apply: line N: …`),
                # so the driver only records it: the reason prints once.
                if kind == "done":
                    in_flight.discard(unit)
                    failed[unit] = ack["error"]
            else:
                fatal = ack["error"]  # I/O failure: apply stops accepting writes
            continue
        in_flight.discard(unit)
        done.add(unit)
        print("done %s seq %d" % (unit, ack["seq"]), flush=True)
        if args.kill_after is not None and len(done) - resumed_done >= args.kill_after:
            os.kill(os.getpid(), signal.SIGKILL)
        for d in dependents.get(unit, []):
            if ready(d):
                submit(d)

    pool.shutdown(wait=True)
    if fatal is not None or failed:
        apply.close()
        print("driver: stopped: %s" % (fatal or failed), file=sys.stderr)
        return 1

    # Fail-closed: runlog refuses `finalize done` unless every unit is done.
    finished = threading.Event()
    result = {}

    def on_final(op, ack):
        result.update(ack)
        finished.set()

    apply.send({"op": "finalize", "status": "done", "result": "%d units done" % len(done)}, on_final)
    finished.wait()
    code = apply.close()
    if "error" in result or code != 0:
        print("driver: finalize failed: %s (apply exit %d)" % (result, code), file=sys.stderr)
        return 1
    print("finalized %s done at seq %d" % (args.run, result["seq"]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
