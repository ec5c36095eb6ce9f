"""String enums for statuses, and the timestamp conversion the native module uses."""

import datetime as _dt
import enum

__all__ = ["UnitStatus", "RunStatus", "PhaseStatus"]


class _StrEnum(str, enum.Enum):
    """A status: compares equal to its string value (``UnitStatus.DONE == "done"``)."""

    def __str__(self) -> str:
        return str(self.value)


class UnitStatus(_StrEnum):
    """A unit's status. Only ``DONE`` is skipped on resume."""

    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    DONE = "done"
    BLOCKED = "blocked"
    DEP_BLOCKED = "dep_blocked"


class RunStatus(_StrEnum):
    """A run's status: ``RUNNING``, then one terminal status given to ``finalize``."""

    RUNNING = "running"
    DONE = "done"
    NEEDS_ATTENTION = "needs_attention"
    ABORTED = "aborted"


class PhaseStatus(_StrEnum):
    """A phase's status."""

    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    BLOCKED = "blocked"
    SKIPPED = "skipped"


_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


def _datetime(millis: int) -> _dt.datetime:
    """An aware UTC datetime from milliseconds since the epoch (exact, no float)."""
    return _EPOCH + _dt.timedelta(milliseconds=millis)

for _cls in (UnitStatus, RunStatus, PhaseStatus):
    _cls.__module__ = "runlog"
