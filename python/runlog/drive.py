"""``runlog.drive``: a run's units worked through any ``concurrent.futures.Executor``.

The run is the coordinator's only state. ``drive`` opens (or starts) the run,
reads its not-done units a chunk at a time (the resume set, worked out as it
is read: the coordinator holds only the units in flight, held back or
blocked), and submits each eligible unit to the executor once its
dependencies are done, one unit a task or ``units_per_task`` of them:
``in_progress`` is durable before the submit, ``done`` (with the result, or
the output object's name, length and digest) after the task completes. A
failed attempt is recorded (``pending`` with its error) and resubmitted until
``retries`` are used; then the unit is ``blocked`` with the error. In a task
of several units each is its own attempt: one that raises fails alone, a
task whose worker died fails each of its units' attempts. Killed at any
point, the same call resumes from the run alone: done units are skipped,
units in flight at the crash are submitted again (a new attempt).

Exactly-once outputs (see docs/GUIDE.md, "Driving a cluster"):

* A unit's bytes (or a result too big to inline) go to ``outputs``, an
  ``s3://bucket/prefix`` or ``file:///dir``, as the object
  ``<run>/<unit>/<attempt>-<claim>``, written create-only. ``claim`` is a
  random token the coordinator draws per attempt and makes durable in the
  ``in_progress`` note before it submits, so no two attempts, of this
  coordinator or any other, ever share a name.
* ``done`` names the object with its length and BLAKE3 digest. Only the
  coordinator that holds the run (its writer lock; on a remote, its epoch)
  records ``done``, only for a claim it submitted itself, and never for a
  unit already done: a unit has at most one committed output.
* A crash between the write and ``done`` leaves an object no ``done`` names
  (an orphan): the retry writes under its own claim, never reads the
  orphan. A zombie coordinator (one whose host was given up on and whose run
  was restored elsewhere) is fenced at its next write (``runlog.Fenced``):
  its workers' outputs stay orphans. ``gc_outputs`` deletes orphans.
* ``output()`` reads a unit's committed result and checks its length and
  digest (``runlog.Corrupt`` naming the object otherwise).

Where the drive stands is recorded in the run, as the phase ``runlog.drive``
(views tell a stopped drive from a working one by it; ``runlog ui`` lists
such a run first, as needing attention): ``running`` while a drive works,
``done`` once every unit is, and ``blocked`` when it returned with units
blocked (their retries used up): the run stays open, so that they can be set
``pending`` once their cause is fixed and the same call made again (it sets
the phase back to ``running``). ``DriveSummary.state`` says the same.
"""

import concurrent.futures as _cf
import os
import queue
import dataclasses
import heapq
import json
import re
import sys
import time
import traceback
from collections import deque
from typing import (Any, Callable, Dict, Iterator, List, Mapping, Optional,
                    Sequence, Union)

from ._errors import BatchError, Corrupt, Error, Fenced, NotFound, Refused
from ._runlog import OutputStore, Runs
from ._types import UnitStatus

__all__ = ["drive", "DriveSummary", "output", "gc_outputs", "output_name"]

#: Results whose JSON is longer than this many bytes go to ``outputs``.
INLINE_LIMIT = 4096
#: The longest output ``output()`` reads back (and a create-only put re-reads).
MAX_OUTPUT_LEN = 1 << 32
#: The phase that records where the drive stands (``running``, ``done``, or
#: ``blocked``: returned with units blocked), also written to learn whether
#: it was fenced (see ``probe_fenced``).
PHASE = "runlog.drive"
PROBE_PHASE = PHASE
#: The longest error text kept in a unit's note.
MAX_ERROR_CHARS = 2000

_PENDING, _IN_PROGRESS, _DONE, _BLOCKED = (
    UnitStatus.PENDING, UnitStatus.IN_PROGRESS, UnitStatus.DONE, UnitStatus.BLOCKED)
_NOT_DONE = (_PENDING, _IN_PROGRESS, _BLOCKED, UnitStatus.DEP_BLOCKED)


def _name(unit: Any) -> str:
    return unit.name

_SIMPLE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*$")


def _key(name: str) -> str:
    """A run or unit name as one object-name segment: ``u-<name>`` for plain
    names, ``h-<hex of its UTF-8>`` for any other (no two names share a key)."""
    if _SIMPLE.match(name) and len(name) <= 200:
        return "u-" + name
    return "h-" + name.encode("utf-8").hex()


def output_name(run_id: str, unit: str, attempt: int, claim: str) -> str:
    """The object name of one attempt's output, relative to the outputs prefix."""
    return "%s/%s/%d-%s" % (_key(run_id), _key(unit), attempt, claim)


_STORES: Dict[str, OutputStore] = {}


def _store(url: str) -> OutputStore:
    s = _STORES.get(url)
    if s is None:
        s = _STORES[url] = OutputStore(url)
    return s


def _attempt(fn: Callable[[str], Any], job: tuple) -> str:
    """Runs on a worker: one attempt of one unit. Returns the body of what
    ``done`` records, as JSON text without its braces (the coordinator adds
    the claim and attempt): ``"value":v`` or ``"output":{...}``."""
    run_id, unit, attempt, claim, outputs, inline_limit = job
    result = fn(unit)
    if isinstance(result, (bytes, bytearray, memoryview)):
        data, kind = bytes(result), "bytes"
    else:
        text = json.dumps(result, separators=(",", ":"))
        if len(text.encode("utf-8")) <= inline_limit:
            return '"value":' + text
        data, kind = text.encode("utf-8"), "json"
    if outputs is None:
        raise Error(
            "run %r unit %r attempt %d: the result is %d bytes (%s), more than the run "
            "keeps inline; pass drive(outputs='s3://…' or 'file:///…')"
            % (run_id, unit, attempt, len(data), kind))
    name = output_name(run_id, unit, attempt, claim)
    try:
        # Create-only: a second execution of this same attempt (an executor
        # that re-ran the task after losing its worker) finds the first's
        # object and describes that one.
        _, length, digest = _store(outputs).put_create(name, data, MAX_OUTPUT_LEN)
    except Error as e:
        raise Error("run %r unit %r attempt %d: write output %s/%s: %s"
                    % (run_id, unit, attempt, outputs, name, e)) from e
    return '"output":' + json.dumps({"store": outputs, "name": name, "len": length,
                                     "digest": digest, "kind": kind}, separators=(",", ":"))


def _attempts(fn: Callable[[str], Any], job: tuple) -> List[Any]:
    """Runs on a worker: one task of several units, one attempt each, in turn.
    Returns one entry per unit: ``_attempt``'s text (a ``str``), or a tuple
    ``(error,)``: the text of what that unit's attempt raised. An exception that
    is not an ``Exception`` (the worker told to exit), or the worker's death,
    fails the task: every unit's attempt."""
    run_id, units, outputs, inline_limit = job
    out: List[Any] = []
    for unit, attempt, claim in units:
        try:
            out.append(_attempt(fn, (run_id, unit, attempt, claim, outputs, inline_limit)))
        except Exception as e:
            out.append((_error_text(e),))
    return out


@dataclasses.dataclass
class DriveSummary:
    """What one ``drive`` call did, and where the run stands."""

    run_id: str
    units: int
    done: int
    done_before: int
    done_now: int
    resubmitted: int
    failed_attempts: int
    blocked: Dict[str, str]
    dep_blocked: int
    seconds: float

    @property
    def complete(self) -> bool:
        """Every unit is done."""
        return self.done == self.units

    @property
    def needs_attention(self) -> bool:
        """Units are blocked (their retries used up): the drive stopped short,
        and recorded so in the run (phase ``runlog.drive`` ``blocked``)."""
        return bool(self.blocked)

    @property
    def state(self) -> str:
        """``"complete"`` (every unit done), ``"needs_attention"`` (units
        blocked; the run stays open, its phase ``runlog.drive`` ``blocked``),
        else ``"incomplete"``."""
        if self.complete:
            return "complete"
        return "needs_attention" if self.needs_attention else "incomplete"

    @property
    def rate(self) -> float:
        """Units done by this call per second."""
        return self.done_now / self.seconds if self.seconds > 0 else 0.0

    def __str__(self) -> str:
        lines = [
            "run %s: %d/%d units done (%d now, %d before), %.1f s, %.0f units/s"
            % (self.run_id, self.done, self.units, self.done_now, self.done_before,
               self.seconds, self.rate),
            "  resubmitted after a crash: %d, failed attempts: %d, blocked: %d, "
            "waiting on blocked: %d" % (self.resubmitted, self.failed_attempts,
                                        len(self.blocked), self.dep_blocked),
        ]
        for name, err in sorted(self.blocked.items())[:10]:
            lines.append("  blocked %s: %s" % (name, err.splitlines()[0] if err else ""))
        if len(self.blocked) > 10:
            lines.append("  … and %d more blocked" % (len(self.blocked) - 10))
        if self.needs_attention:
            lines.append(
                "  needs attention: %d unit(s) blocked, recorded in the run (phase %s "
                "blocked); it stays open: fix the cause, set them pending "
                "(`runlog unit %s UNIT pending`) and drive again"
                % (len(self.blocked), PHASE, self.run_id))
        return "\n".join(lines)


def _note(unit_note: str) -> Dict[str, Any]:
    """A unit's note as drive wrote it (``{}`` for any other)."""
    if not unit_note.startswith("{"):
        return {}
    try:
        n = json.loads(unit_note)
    except ValueError:
        return {}
    return n if isinstance(n, dict) else {}


def _error_text(e: BaseException) -> str:
    text = "".join(traceback.format_exception_only(type(e), e)).strip()
    return text[:MAX_ERROR_CHARS]


def drive(
    root: Union[Runs, str, "os.PathLike[str]", None],
    run_id: str,
    fn: Callable[[str], Any],
    units: Optional[Sequence[str]] = None,
    *,
    executor: Union[_cf.Executor, Callable[[], _cf.Executor]],
    deps: Optional[Mapping[str, Sequence[str]]] = None,
    fingerprint: Optional[Mapping[str, Any]] = None,
    task: str = "",
    retries: int = 2,
    max_in_flight: Optional[int] = None,
    units_per_task: int = 1,
    outputs: Optional[str] = None,
    inline_limit: int = INLINE_LIMIT,
    lock_wait: float = 30.0,
    print_summary: Optional[bool] = None,
) -> DriveSummary:
    """Works run ``run_id``'s units through ``executor``; returns a ``DriveSummary``.

    ``root``: a ``Runs`` or a runs root path (None: as ``Runs()``). The run is
    started with ``units``, ``deps``, ``fingerprint`` and ``task`` (restored when
    the fingerprint matches, as ``Runs.start``). ``units=None`` drives the units
    of a run that exists (here, or on its remote: restored from it), with the
    run's own dependencies; no list of names is built (a run of ten million
    units costs the coordinator its units in flight, held back or failed).
    ``fn(unit_name)`` runs on the executor's workers (it must pickle: a
    module-level function); its result
    is recorded in the unit's ``done`` note when its JSON fits in
    ``inline_limit`` bytes, else (and always for ``bytes``) written to
    ``outputs`` (``s3://bucket/prefix`` or ``file:///dir``), exactly once.

    ``executor``: any ``concurrent.futures.Executor`` (``ProcessPoolExecutor``
    with a ``spawn`` context, ``distributed.Client(...).get_executor()``,
    ``runlog.RayExecutor()``),
    or a function returning one: then drive shuts down what it made, and makes
    a new one when the executor breaks (a ``ProcessPoolExecutor`` whose worker
    died). ``retries``: failed attempts resubmitted before a unit is blocked.
    ``units_per_task``: units sent in one executor task (each still its own
    attempt, claim and transitions; a unit that raises fails only its own
    attempt, a task whose worker died fails each of its units'). More than 1
    for short units: the executor's cost per task, not drive's, is then what
    bounds the rate. ``max_in_flight``: units submitted and not yet finished
    (default 256, or 32 tasks' worth when that is more; raise it for a
    cluster of more than about 16 workers).

    Restartable at any point with the same call. Raises ``runlog.Fenced`` when
    another coordinator took the run (its remote holds a newer epoch): nothing
    more is recorded, the in-flight results are dropped.
    """
    t0 = time.monotonic()
    if retries < 0:
        raise ValueError("retries must be ≥ 0, not %r" % (retries,))
    per_task = int(units_per_task)
    if per_task < 1:
        raise ValueError("units_per_task must be ≥ 1, not %r" % (units_per_task,))
    limit = max(256, 32 * per_task) if max_in_flight is None else int(max_in_flight)
    if limit < 1:
        raise ValueError("max_in_flight must be ≥ 1, not %r" % (max_in_flight,))
    if units is None and deps is not None:
        raise ValueError("deps is for starting a run with units; units=None drives the "
                         "run's own units and dependencies")
    runs = root if isinstance(root, Runs) else Runs(root, lock_wait=lock_wait)
    fp = None if fingerprint is None else dict(fingerprint)
    if units is None:
        names = None
        opened = _open_existing(runs, run_id, fp)
    else:
        deps = {u: list(d) for u, d in (deps or {}).items()}
        names = list(dict.fromkeys(list(units) + [d for ds in deps.values() for d in ds]
                                   + list(deps)))
        opened = _open_or_start(runs, run_id, task, names, deps, fp or {})
    with opened as run:
        return _Coordinator(run, run_id, fn, names, executor, retries, limit,
                            min(per_task, limit), outputs, inline_limit, t0,
                            print_summary).go()


def _open_or_start(runs: Runs, run_id, task, names, deps, fingerprint):
    """The live run when its fingerprint is this call's (an open: no unit list
    to compare, which at a million units costs seconds), else ``Runs.start``
    (which creates it, restores it from its remote, or archives a run whose
    fingerprint changed and starts fresh)."""
    try:
        run = runs.open(run_id)
    except NotFound:
        run = None
    if run is not None:
        st = run.status()
        if not st.closed and st.fingerprint == {str(k): str(v) for k, v in fingerprint.items()}:
            return run
        run.close()
    return runs.start(run_id, task=task, units=names, deps=deps, fingerprint=fingerprint)


def _open_existing(runs: Runs, run_id, fingerprint):
    """The live run ``run_id`` (restored from its remote when missing here),
    for ``units=None``: with no units to start one from, a run that does not
    exist, is finished, or has another fingerprint than ``fingerprint`` (when
    given) is an error."""
    try:
        run = runs.open(run_id)
    except NotFound as e:
        raise Error("run %r does not exist (here or on its remote): drive(units=None) "
                    "works an existing run's units; pass units to start it" % (run_id,)) from e
    st = run.status()
    why = None
    if st.closed:
        why = "is finished (%s); pass units to start it afresh" % (st.status,)
    elif fingerprint is not None and st.fingerprint != {str(k): str(v)
                                                        for k, v in fingerprint.items()}:
        why = ("has fingerprint %r, not %r; pass units to start it afresh"
               % (st.fingerprint, fingerprint))
    if why is not None:
        run.close()
        raise Error("run %r %s" % (run_id, why))
    return run


class _Coordinator:
    """The state of one drive: only the units in flight, ready to submit,
    held back by a dependency, or blocked. The rest stay in the run, whose
    not-done units are read in name order a chunk at a time as units are
    submitted (``take``): the resume set worked out as it is read, never
    held whole."""

    def __init__(self, run, run_id, fn, names, executor, retries, limit, per_task, outputs,
                 inline_limit, t0, print_summary):
        self.run, self.run_id, self.fn = run, run_id, fn
        # An executor given is used; a function returning one is called, and
        # what it made is shut down at the end (and replaced when it breaks).
        self.factory, self.made = executor, None
        self.pool: Optional[_cf.Executor] = None
        if isinstance(executor, _cf.Executor):
            self.pool = executor
        self.retries, self.limit, self.per_task = retries, limit, per_task
        self.outputs, self.inline_limit = outputs, inline_limit
        self.t0, self.print_summary = t0, print_summary
        # The caller's names (None: the run's units), and the subset of them
        # to work when the run has others too (None: every unit of the run).
        self.names = names
        self.wanted: Optional[set] = None
        self.units = 0
        # Held back: unit → [deps not done, attempts, failures, was in_progress];
        # dependency → the held-back units waiting on it.
        self.held: Dict[str, list] = {}
        self.dependents: Dict[str, List[str]] = {}
        self.blocked: Dict[str, str] = {}
        # Ready to submit: (unit, attempts so far, failures), after the
        # run's not-done units not yet read (``fresh``).
        self.ready: deque = deque()
        self.fresh: Iterator[Any] = iter(())
        # Done by this drive, not yet written (``complete`` then ``submit``).
        self.unwritten_done: set = set()
        # future → ([(unit, attempt, claim, failures)], executor, one unit per task?).
        self.in_flight: Dict[_cf.Future, tuple] = {}
        self.n_in_flight = 0
        # Futures land here as they finish (a callback: no scan of in_flight).
        self.finished: "queue.SimpleQueue[_cf.Future]" = queue.SimpleQueue()
        self.done_now = self.failed = self.resubmitted = self.done_before = 0
        self.remote = os.path.exists(os.path.join(run.dir, "REMOTE"))

    def load(self) -> None:
        """The run's counts, and its not-done units to read (``fresh``)."""
        counts = self.run.counts()
        self.units, self.done_before = counts.total, counts.done
        if self.names is not None:
            self.units = len(self.names)
            # Every name is the run's when the counts agree (then no look-up each).
            if self.units != counts.total:
                self.wanted = set(self.names)
                self.done_before = 0
                for n in self.names:
                    u = self.run.unit_status(n)
                    if u is None:
                        raise Error("run %r: unit %r is not in the run (a run keeps the units "
                                    "it was started with; same fingerprint, same units)"
                                    % (self.run_id, n))
                    self.done_before += u.status is _DONE
        self.fresh = self.not_done([st for st in _NOT_DONE if getattr(counts, st.value)])

    def not_done(self, statuses: List[UnitStatus]) -> Iterator[Any]:
        """The run's units with these statuses, in name order, each once: one
        stream per status, merged. The merge reads a stream's next unit only
        once it gave the one before, so each chunk is read from the merge's
        position on, past the units this drive took (whose status it
        changed); the units after it are untouched, as a drive changes only
        the units it took. Names must rise: one that does not is skipped."""
        streams = [self.run.iter_units(status=st) for st in statuses]
        if not streams:
            return
        merged = streams[0] if len(streams) == 1 else heapq.merge(*streams, key=_name)
        last = None
        for u in merged:
            name = u.name
            if last is not None and name <= last:
                continue
            last = name
            yield u

    def is_done(self, name: str) -> bool:
        if name in self.unwritten_done:
            return True
        u = self.run.unit_status(name)
        return u is not None and u.status is _DONE

    @staticmethod
    def _failures(note: str) -> tuple:
        if not note:
            return 0, ""
        n = _note(note)
        return int(n.get("failures", 0)), str(n.get("error", ""))

    def _ready(self, name: str, attempts: int, failures: int, was_in_progress: bool) -> None:
        if was_in_progress:
            self.resubmitted += 1
        self.ready.append((name, attempts, failures))

    def take(self, n: int) -> List[tuple]:
        """Up to ``n`` units to submit, as (unit, attempts so far, failures):
        the run's not-done units as read, each eligible when its every
        dependency is done (else held back until they are; one the run does
        not have is not done), those blocked for good set aside; then the
        ready ones (retries, released dependents), in the order they came."""
        out: List[tuple] = []
        wanted, retries = self.wanted, self.retries
        for u in self.fresh:
            name = u.name
            if wanted is not None and name not in wanted:
                continue
            st = u.status
            deps = u.deps
            if st is _PENDING and not u.attempts and not deps:  # the common case
                out.append((name, 0, 0))
            else:
                failures, error = self._failures(u.note)
                if st is _BLOCKED and failures > retries:
                    self.blocked[name] = error
                    continue
                waiting = [d for d in deps if not self.is_done(d)]
                if waiting:
                    self.held[name] = [len(waiting), u.attempts, failures, st is _IN_PROGRESS]
                    for d in waiting:
                        self.dependents.setdefault(d, []).append(name)
                    continue
                if st is _IN_PROGRESS:
                    self.resubmitted += 1
                out.append((name, u.attempts, failures))
            if len(out) == n:
                return out
        while self.ready and len(out) < n:
            out.append(self.ready.popleft())
        return out

    def go(self) -> DriveSummary:
        try:
            if self.pool is None:
                self.made = self.pool = self.factory()
            return self._go()
        finally:
            if self.made is not None:
                self.made.shutdown(wait=False, cancel_futures=True)

    def _go(self) -> DriveSummary:
        self.load()
        results: List[tuple] = []
        first = self.take(self.per_task)
        if first:  # work to do (a call with none writes nothing here)
            self.mark("running")
        try:
            while True:
                self.submit(results, first)
                results, first = [], []
                if not self.in_flight:
                    break
                # Every future that finished meanwhile, recorded under one write.
                finished = [self.finished.get()]
                while True:
                    try:
                        finished.append(self.finished.get_nowait())
                    except queue.Empty:
                        break
                results = self.complete(finished)
        except Fenced:
            # Another coordinator holds the run: drop every result in flight.
            for f in self.in_flight:
                f.cancel()
            self.in_flight.clear()
            raise
        return self.summary()

    def submit(self, results: List[tuple], first: List[tuple]) -> None:
        """Records ``results`` (the transitions of the attempts that finished)
        and ``in_progress`` for the next eligible units, then submits those,
        ``per_task`` units a task."""
        tasks = [first] if first else []
        room = self.limit - self.n_in_flight - len(first)
        while room > 0:
            group = self.take(min(self.per_task, room))
            if not group:
                break
            tasks.append(group)
            room -= len(group)
        starts, jobs = [], []
        for group in tasks:
            # 64 random bits a claim, from os.urandom (as `secrets`), one call a task.
            claims = os.urandom(8 * len(group)).hex()
            job = []
            for i, (u, attempts, failures) in enumerate(group):
                claim = claims[16 * i:16 * i + 16]
                starts.append((u, "in_progress",
                               '{"claim":"%s","failures":%d}' % (claim, failures)))
                job.append((u, attempts + 1, claim, failures))
            jobs.append(job)
        # Results, then in_progress, durable before any submit, in one write:
        # one fsync, and the run applies a batch in order, so a dependency's
        # done precedes its dependent's start.
        if results or starts:
            self.write(results + starts, "record results and in_progress")
        self.unwritten_done.clear()
        for job in jobs:
            one = len(job) == 1 and self.per_task == 1
            if one:
                u, attempt, claim, _ = job[0]
                args = (_attempt, self.fn, (self.run_id, u, attempt, claim, self.outputs,
                                            self.inline_limit))
            else:
                args = (_attempts, self.fn, (self.run_id, [j[:3] for j in job], self.outputs,
                                             self.inline_limit))
            while True:
                try:
                    f = self.pool.submit(*args)
                    break
                except _cf.BrokenExecutor as e:
                    self.replace_pool(e)
            self.in_flight[f] = (job, self.pool, one)
            self.n_in_flight += len(job)
            f.add_done_callback(self.finished.put)

    def replace_pool(self, e: BaseException) -> None:
        if self.made is None:
            raise Error("run %r: the executor is broken (%s) and drive cannot replace it; "
                        "pass executor=a function returning a new one" % (self.run_id, e)) from e
        self.made.shutdown(wait=False, cancel_futures=True)
        self.made = self.pool = self.factory()

    def complete(self, finished) -> List[tuple]:
        """The transitions that record ``finished`` (written by the next
        ``submit``; the state here moves on at once, as any failed write ends
        the drive)."""
        batch: List[tuple] = []
        broken = None
        for f in finished:
            job, pool, one = self.in_flight.pop(f)
            self.n_in_flight -= len(job)
            try:
                r = f.result()
            except Exception as e:  # the unit's own failure, or its worker's death
                if isinstance(e, _cf.BrokenExecutor) and pool is self.pool:
                    broken = e
                err = _error_text(e)
                for u, attempt, _, failures in job:
                    self.fail(batch, u, attempt, failures, err)
                continue
            for (u, attempt, claim, failures), body in zip(job, [r] if one else r):
                if isinstance(body, tuple):  # its own failure, in a task of several
                    self.fail(batch, u, attempt, failures, body[0])
                    continue
                batch.append((u, "done", '{%s,"claim":"%s","attempt":%d}'
                              % (body, claim, attempt)))
                self.done_now += 1
                self.unwritten_done.add(u)
                for v in self.dependents.pop(u, ()):
                    h = self.held.get(v)
                    if h is not None:
                        h[0] -= 1
                        if h[0] == 0:
                            del self.held[v]
                            self._ready(v, h[1], h[2], h[3])
        if broken is not None and self.made is not None:
            # The executor died under its workers (each unit in flight in it
            # counted one failed attempt): replace it before the next submit.
            # An executor drive did not make is left to fail that submit.
            self.replace_pool(broken)
        return batch

    def fail(self, batch: List[tuple], u: str, attempt: int, failures: int, err: str) -> None:
        """One failed attempt of ``u``: ``pending`` again and resubmitted, or
        ``blocked`` once its retries are used."""
        self.failed += 1
        k = failures + 1
        err = "attempt %d: %s" % (attempt, err)
        note = json.dumps({"failures": k, "error": err}, separators=(",", ":"))
        if k > self.retries:
            batch.append((u, "blocked", note))
            self.blocked[u] = err
        else:
            batch.append((u, "pending", note))
            self.ready.append((u, attempt, k))

    def write(self, batch, what: str) -> None:
        """Records ``batch`` ((unit, status, note) triples, one per unit): one
        ``run.units`` call, one fsync (and, with a remote under ``sync``, one
        shared round trip)."""
        try:
            self.run.units(batch)
            return
        except BatchError as e:
            results = e.results
        failed = [(entry, r) for entry, r in zip(batch, results) if isinstance(r, Error)]
        for _, r in failed:
            if isinstance(r, Fenced):
                raise r  # another coordinator holds the run: record nothing more
        if self.remote and not any(isinstance(r, Refused) for _, r in failed):
            self.probe_fenced()
        (u, status, note), first = failed[0]
        raise Error("run %r: %s: %d of %d transitions failed; first: unit %r to %s "
                    "(note %s): %s" % (self.run_id, what, len(failed), len(batch), u,
                                       status, note[:200], first)) from first

    def probe_fenced(self) -> None:
        """After a batch the remote did not acknowledge: raises ``Fenced`` when
        another coordinator took the run. A batch's failed ship reports a plain
        ``Error`` per entry (the run layer keeps only its text), where a single
        write raises ``Fenced`` with its epochs; so one small write asks: the
        phase ``runlog.drive`` set to ``running`` (the drive stops either way)."""
        try:
            self.run.phase(PROBE_PHASE, "running")
        except Fenced:
            raise
        except Error:
            pass

    def mark(self, status: str) -> None:
        """Records where the drive stands as the phase ``runlog.drive`` (one
        write, only when it changes)."""
        if self.run.status().phases.get(PHASE) != status:
            self.run.phase(PHASE, status)

    def summary(self) -> DriveSummary:
        done = self.done_before + self.done_now
        s = DriveSummary(run_id=self.run_id, units=self.units, done=done,
                         done_before=self.done_before, done_now=self.done_now,
                         resubmitted=self.resubmitted, failed_attempts=self.failed,
                         blocked=dict(self.blocked), dep_blocked=len(self.held),
                         seconds=time.monotonic() - self.t0)
        if s.needs_attention:
            self.mark("blocked")
        elif s.complete:
            self.mark("done")
        show = self.print_summary
        if show is None:
            show = sys.stdout.isatty()
        if show:
            print(s, flush=True)
        return s


def output(view, unit: str) -> Any:
    """The committed result of ``unit`` of a driven run (``view``: a ``Run`` or
    ``RunView``): the inline value, or the output object's bytes (``kind``
    bytes) or decoded JSON, after checking its length and digest
    (``runlog.Corrupt`` naming the object when they differ). Raises
    ``runlog.Error`` when the unit is not done."""
    u = view.unit_status(unit)
    if u is None or u.status != "done":
        raise Error("run %r unit %r: not done (%s), no committed output"
                    % (view.id, unit, "missing" if u is None else u.status))
    n = _note(u.note)
    if "value" in n:
        return n["value"]
    # The reference as the library reads it (FORMAT.md §12.2).
    o = u.output
    if o is None or o["len"] is None or o["digest"] is None:
        raise Error("run %r unit %r: its done note records no drive result: %r"
                    % (view.id, unit, u.note[:200]))
    where = "%s/%s" % (o["store"].rstrip("/"), o["name"])
    data = _store(o["store"]).get(o["name"], max(int(o["len"]), 0) + 1)
    if data is None:
        raise Error("run %r unit %r attempt %s: committed output %s is missing"
                    % (view.id, unit, n.get("attempt"), where))
    digest = OutputStore.digest(data)
    if len(data) != o["len"] or digest != o["digest"]:
        raise Corrupt("run %r unit %r attempt %s: output %s is %d bytes with digest %s; "
                      "done recorded %d bytes with digest %s"
                      % (view.id, unit, n.get("attempt"), where, len(data), digest,
                         o["len"], o["digest"]), where, 0, None)
    return data if o.get("kind") == "bytes" else json.loads(data)


def gc_outputs(run, outputs: str, *, dry_run: bool = False) -> List[str]:
    """Deletes the objects under ``outputs`` for run ``run`` (a ``Run``, open for
    writing, so no coordinator drives it meanwhile) that no ``done`` names:
    orphans of crashed attempts and of fenced coordinators. Returns their
    names (relative to ``outputs``). A fenced coordinator's worker still
    running can write one more orphan later; a later gc removes it."""
    committed = set()
    for u in run.iter_units(status="done"):
        o = u.output
        if o is not None and o["store"] == outputs:
            committed.add(o["name"])
    store = _store(outputs)
    orphans = [n for n in store.list(_key(run.id)) if n not in committed]
    if not dry_run:
        for n in orphans:
            store.delete(n)
    return orphans
