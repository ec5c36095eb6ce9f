"""``runlog.RayExecutor``: a ``concurrent.futures.Executor`` over Ray's tasks.

Ray ships no ``concurrent.futures.Executor``; ``runlog.drive`` (or any code
written against that seam) takes this one. Each ``submit(fn, *args)`` is one
Ray task, ``ray.remote(fn).options(**options).remote(*args)``, and returns a
``concurrent.futures.Future`` settled from the task's ``ObjectRef.future()``.

Ray is imported when an executor is made, not when ``runlog`` is: Ray is an
optional dependency (``pip install ray``). The executor does not start or
stop Ray: call ``ray.init(...)`` first (else Ray starts a local instance at
the first submit, as ``ray.remote`` does), ``ray.shutdown()`` after.

On failure:

* The task raised: the future raises the task's own exception (Ray's
  ``RayTaskError`` wrapper, whose text is the remote traceback, is its
  ``__cause__``), as a ``ProcessPoolExecutor``'s future would.
* The task's worker process died (SIGKILL, out of memory), or its node: the
  future raises Ray's error (``ray.exceptions.WorkerCrashedError``,
  ``NodeDiedError``, …), an ``Exception``, so ``drive`` records a failed
  attempt and submits the unit again under a new claim. Ray starts new
  workers itself: the executor never breaks. ``max_retries`` is 0 unless
  ``options`` says otherwise, so that each attempt ``drive`` records is one
  execution (Ray's own retries would run an attempt again out of the run's
  sight; harmless to outputs, which are create-only, but unrecorded).
* ``cancel()`` of a future not yet settled cancels its task
  (``ray.cancel``, not forced); ``shutdown(cancel_futures=True)`` cancels
  every one. A submit after ``shutdown`` raises ``RuntimeError``.
"""

import concurrent.futures as _cf
import threading
from typing import Any, Callable, Dict, Set

__all__ = ["RayExecutor"]


class _Future(_cf.Future):
    """A future whose ``cancel`` also cancels its Ray task."""

    def __init__(self, ref: Any) -> None:
        super().__init__()
        self.ref = ref

    def cancel(self) -> bool:
        if self.cancelled():
            return True
        if not super().cancel():
            return False
        try:
            self.set_running_or_notify_cancel()  # wakes wait() and as_completed()
        except RuntimeError:
            pass  # another thread's cancel did
        import ray
        try:
            ray.cancel(self.ref)
        except Exception:  # Ray shut down, or the task already finished
            pass
        return True


class RayExecutor(_cf.Executor):
    """Runs each submitted call as a Ray task.

    ``options``: passed to ``ray.remote(fn).options(...)`` for every task
    (``num_cpus``, ``resources``, ``max_retries``, …); ``max_retries``
    defaults to 0 (see the module's docstring). Raises ``ImportError``
    saying how to install Ray when it is missing."""

    def __init__(self, **options: Any) -> None:
        try:
            import ray
        except ImportError as e:
            raise ImportError("runlog.RayExecutor needs Ray (pip install ray): %s" % e) from e
        self._ray = ray
        self._options = dict(options)
        self._options.setdefault("max_retries", 0)
        self._remote: Dict[Any, Any] = {}  # fn → its remote function
        self._pending: Set[_Future] = set()
        self._lock = threading.Lock()
        self._shut = False

    def _remote_fn(self, fn: Callable[..., Any]) -> Any:
        """``fn`` as a remote function with the options, made once per ``fn``
        (each new one is pickled and exported to the cluster again)."""
        try:
            r = self._remote.get(fn)
        except TypeError:  # not hashable
            return self._ray.remote(fn).options(**self._options)
        if r is None:
            r = self._remote[fn] = self._ray.remote(fn).options(**self._options)
        return r

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> _cf.Future:
        with self._lock:
            if self._shut:
                raise RuntimeError("cannot schedule new futures after shutdown")
            out = _Future(self._remote_fn(fn).remote(*args, **kwargs))
            self._pending.add(out)
        out.ref.future().add_done_callback(lambda f: self._settle(out, f))
        return out

    def _settle(self, out: _Future, f: _cf.Future) -> None:
        """Runs on Ray's thread when the task is over: ``out`` takes its result."""
        with self._lock:
            self._pending.discard(out)
        e = f.exception()
        if isinstance(e, self._ray.exceptions.RayTaskError):
            cause = e.cause
            if isinstance(cause, BaseException):
                cause.__cause__ = e
                e = cause
        try:
            if e is None:
                out.set_result(f.result())
            else:
                out.set_exception(e)
        except _cf.InvalidStateError:
            pass  # cancelled meanwhile

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """No more submits; with ``cancel_futures`` the tasks not finished are
        cancelled; with ``wait``, returns once every future is settled. Ray
        itself keeps running."""
        with self._lock:
            self._shut = True
            pending = list(self._pending)
        if cancel_futures:
            for f in pending:
                f.cancel()
        if wait:
            _cf.wait(pending)
