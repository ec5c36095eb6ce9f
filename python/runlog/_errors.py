"""The exceptions runlog raises. Every one is a ``runlog.Error``."""

from typing import List, Optional, Union

__all__ = ["Error", "Refused", "NotFound", "Corrupt", "Tampered", "Locked", "Fenced",
           "BatchError", "CheckpointDiscarded"]


class Error(Exception):
    """Anything runlog reports: I/O failures, damage, refusals, lock timeouts."""


class Refused(Error):
    """The request was refused (the run's rules said no, or an argument was wrong).
    Nothing was written."""


class NotFound(Refused):
    """No run with this id exists under the runs root. Nothing was written."""


class Corrupt(Error):
    """Bytes on disk are damaged (not a torn tail). Nothing was modified.

    Attributes: ``file`` (the damaged file's path), ``offset`` (byte offset in it,
    or None when the damage is the file's as a whole), ``seq`` (the record's seq,
    or None when unknown)."""

    file: str
    offset: Optional[int]
    seq: Optional[int]

    def __init__(self, message: str, file: str = "", offset: Optional[int] = None,
                 seq: Optional[int] = None) -> None:
        super().__init__(message)
        self.file = file
        self.offset = offset
        self.seq = seq


class Tampered(Error):
    """A tagged run's bytes pass their checksums but fail their tag: they were
    changed since they were written, or the key is not the run's. Nothing was
    modified. Attributes as ``Corrupt``: ``file``, ``offset``, ``seq``."""

    file: str
    offset: Optional[int]
    seq: Optional[int]

    def __init__(self, message: str, file: str = "", offset: Optional[int] = None,
                 seq: Optional[int] = None) -> None:
        super().__init__(message)
        self.file = file
        self.offset = offset
        self.seq = seq


class Locked(Error):
    """Another writer holds the run's lock (after waiting ``lock_wait`` seconds).

    Attributes: ``path`` (the run directory), ``holder`` (e.g. "pid 4242", or None)."""

    path: str
    holder: Optional[str]

    def __init__(self, message: str, path: str = "", holder: Optional[str] = None) -> None:
        super().__init__(message)
        self.path = path
        self.holder = holder


class Fenced(Error):
    """The run's remote holds a newer writer: another host took the run (it
    restored the run and wrote). This writer acknowledges nothing more; the
    change that raised it is durable here but not on the remote.

    Attributes: ``epoch`` (this writer's epoch; 0 for a copy that never
    claimed one), ``newer`` (the newer epoch found on the remote)."""

    epoch: int
    newer: int

    def __init__(self, message: str, epoch: int = 0, newer: int = 0) -> None:
        super().__init__(message)
        self.epoch = epoch
        self.newer = newer


class BatchError(Error):
    """Some transitions of a ``Run.units`` or ``Run.start_units`` batch failed.
    The others were written.

    Attributes: ``results``, one entry per transition in order: its seq (int)
    when written, ``None`` for a unit ``start_units`` found done (nothing
    written), else the ``Error`` it failed with; ``errors``, the failures alone."""

    results: List[Union[int, None, Error]]

    def __init__(self, message: str, results: List[Union[int, None, Error]]) -> None:
        super().__init__(message)
        self.results = results

    @property
    def errors(self) -> List[Error]:
        return [r for r in self.results if isinstance(r, Error)]


class CheckpointDiscarded(UserWarning):
    """Issued by ``Runs.start`` for each warning it has (also in ``run.warnings``):
    the live run's fingerprint differed, so the old run was archived and a
    fresh one started (``CHECKPOINT_DISCARDED``); a finished run was archived
    and a fresh one started, every unit to be done again
    (``RUN_FINISHED_STARTED_FRESH``); or what ``start`` was given differs from
    the live run it resumed and was ignored (``START_ARGS_IGNORED``).

    The message starts with the code (``"RUN_FINISHED_STARTED_FRESH: run …"``),
    as the CLI prints ``runlog: warning CODE: …``. Attributes: ``code``,
    ``changed`` (the fingerprint parts or arguments that differ) and
    ``archived_to`` (where the old run was moved, or "")."""

    code: str
    changed: List[str]
    archived_to: str

    def __init__(self, message: str = "", code: str = "CHECKPOINT_DISCARDED",
                 changed: Optional[List[str]] = None, archived_to: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.changed = list(changed or [])
        self.archived_to = archived_to

for _cls in (Error, Refused, NotFound, Corrupt, Tampered, Locked, Fenced, BatchError,
             CheckpointDiscarded):
    _cls.__module__ = "runlog"
