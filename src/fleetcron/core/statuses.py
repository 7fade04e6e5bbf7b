"""The run vocabulary: every status a run can have, the named sets of them, and the moves
between them. Pure; the one place these words are defined.

A run is born ``queued`` (a manual request), ``pending`` (a slot of a rolled-out job,
held until the rollout plan starts it: ``core/rollout.py``), ``running`` (a slot fired or a
retry), ``missed`` or ``skipped`` (a slot decided without running it). ``queued`` and
``pending`` become ``running``, ``skipped`` or ``cancelled``; ``running`` becomes one of the
executor's outcomes
(``succeeded``, ``failed``, ``timed_out``, ``connect_error``) or is ended from outside:
``lost`` (its node stopped reporting past the deadline), ``interrupted`` (the scheduler
stopped), ``fenced`` (ownership moved away), ``cancelled`` (an operator stopped it; a
``queued`` run stopped before it started is ``cancelled`` too). Every other status is
terminal.

The named sets are tuples in declaration order, so whatever lists or queries them does so
in the same order in every process.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final, Literal, get_args


class RunStatus(StrEnum):
    """The status of one run (the ``runs.status`` column). Members equal their strings."""

    QUEUED = "queued"
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CONNECT_ERROR = "connect_error"
    INTERRUPTED = "interrupted"
    LOST = "lost"
    MISSED = "missed"
    SKIPPED = "skipped"
    FENCED = "fenced"
    CANCELLED = "cancelled"
    """Stopped by an operator (``runs.stop_requested_by`` says who)."""


RunStatusName = Literal[
    "queued",
    "pending",
    "running",
    "succeeded",
    "failed",
    "timed_out",
    "connect_error",
    "interrupted",
    "lost",
    "missed",
    "skipped",
    "fenced",
    "cancelled",
]
"""The statuses as a ``Literal`` of their strings (for API parameters); same order as the enum."""

ExecutorStatus = Literal["succeeded", "failed", "timed_out", "connect_error"]
"""How an executor says a run ended: exit 0, non-zero exit, killed at its timeout, never
started. A subset of :class:`RunStatus`."""

ALL: Final[tuple[RunStatus, ...]] = tuple(RunStatus)

ACTIVE: Final = (RunStatus.QUEUED, RunStatus.PENDING, RunStatus.RUNNING)
"""Not decided yet: the run may still change."""

WAITING: Final = (RunStatus.QUEUED, RunStatus.PENDING)
"""Active but not started: a manual request the scheduler has not taken yet, or a slot of
a rollout held until its turn. Nothing runs on the target yet (the fleet view counts them
apart from ``running``)."""

TERMINAL: Final = tuple(s for s in RunStatus if s not in ACTIVE)
"""Decided: the status will not change again (every status but the active ones)."""

EXECUTOR_OUTCOMES: Final = tuple(RunStatus(s) for s in get_args(ExecutorStatus))
"""The statuses an executor returns; ``RunStatus(...)`` fails at import if one is unknown."""

REACHED: Final = (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.TIMED_OUT)
"""Outcomes that prove the connection to the target worked (the command ran there)."""

FAILED: Final = (
    RunStatus.FAILED,
    RunStatus.TIMED_OUT,
    RunStatus.CONNECT_ERROR,
    RunStatus.INTERRUPTED,
    RunStatus.LOST,
    RunStatus.FENCED,
)
"""Ran and did not succeed, for whatever reason: what health and the failure lists show.

Includes ``interrupted``: from the target's point of view the command did not complete."""

FAILED_FOR_ALERTS: Final = tuple(s for s in FAILED if s is not RunStatus.INTERRUPTED)
"""The failures that alert. ``interrupted`` is left out on purpose: a run is interrupted
because this scheduler was stopped (an operator's act, a deploy), which says nothing about
the job; alerting on every restart would be noise."""

FINISHED: Final = (RunStatus.SUCCEEDED, *FAILED)
"""Ran to an outcome, good or bad (unlike ``missed``/``skipped``, which never ran)."""

FAILED_VALUES: Final = tuple(s.value for s in FAILED)
FINISHED_VALUES: Final = tuple(s.value for s in FINISHED)
"""These as their strings: for a comparison of the column as text (``status || ''``, which
no index serves), where the column's type does not convert the values."""

LATE: Final = (RunStatus.MISSED,)
"""A slot that passed without running: alerts call the assignment late."""

STOPPABLE: Final = ACTIVE
"""What an operator may stop: a queued run is cancelled before it starts, a running one is
killed (its whole process group) and recorded ``cancelled``.

``cancelled`` is in no failure set (health and alerts ignore it, as they ignore
``interrupted`` for alerts: a person chose to stop the run, which says nothing about the
job) and not in ``FINISHED`` (the command did not run to an outcome), so an assignment's
health goes by its last run that did."""

BIRTH: Final = (
    RunStatus.QUEUED,
    RunStatus.PENDING,
    RunStatus.RUNNING,
    RunStatus.MISSED,
    RunStatus.SKIPPED,
)
"""The statuses a run row is inserted with."""

TRANSITIONS: Final[dict[RunStatus, tuple[RunStatus, ...]]] = {
    RunStatus.QUEUED: (RunStatus.RUNNING, RunStatus.SKIPPED, RunStatus.CANCELLED),
    RunStatus.PENDING: (RunStatus.RUNNING, RunStatus.SKIPPED, RunStatus.CANCELLED),
    RunStatus.RUNNING: (
        *EXECUTOR_OUTCOMES,
        RunStatus.INTERRUPTED,
        RunStatus.LOST,
        RunStatus.FENCED,
        RunStatus.CANCELLED,
    ),
}
"""The allowed moves of an existing run; a status not listed here is terminal."""


def may_become(old: RunStatus | str | None, new: RunStatus | str) -> bool:
    """Whether a run in ``old`` may be written with ``new``; ``old`` None means a new row.

    Unknown strings are never allowed (neither as ``old`` nor as ``new``)."""
    try:
        target = RunStatus(new)
        if old is None:
            return target in BIRTH
        return target in TRANSITIONS.get(RunStatus(old), ())
    except ValueError:
        return False


class SkipKind(StrEnum):
    """Why a run was ``skipped`` (the ``runs.skip_kind`` column), so that readers never
    parse the free-text reason."""

    OWNERSHIP_UNCERTAIN = "ownership_uncertain"
    """No node could prove it owns the jobs: for the job's owner the slot is as good as missed."""
    OVERLAP = "overlap"
    """The previous run of the assignment was still going."""
    OLD_CLAIM = "old_claim"
    """The previous owner's claim outlasts the slot's misfire grace."""
    TARGET_PAUSED = "target_paused"
    LOCAL_DISABLED = "local_disabled"
    """A ``local`` target while this node does not allow local targets."""
    LOCAL_GATE = "local_gate"
    """A local run whose command's author may not run it with the scheduler's privileges
    (``local_run_as`` changed since it was assigned; ``core/local_clearance.py``)."""
    REMOVED = "removed"
    """A queued run whose job or target was removed before it started."""
    DISABLED = "disabled"
    """A rollout's ``pending`` row whose assignment was disabled before its turn."""
    BLACKOUT = "blackout"
    """The slot fell in a blackout window (``core/blackouts.py``); the reason names the
    window and its end."""
    ROLLOUT_HALTED = "rollout_halted"
    """A ``pending`` row of a rollout whose canary failed or whose ``max_failures`` was
    reached (``core/rollout.py``); the reason names the threshold and the failures."""


@dataclass(frozen=True)
class Skip:
    """Why a run is recorded ``skipped``: its kind (the ``runs.skip_kind`` column, what
    readers go by) and the reason an operator reads. The planners that decide a skip return
    both, so no reader parses the kind back out of the text."""

    kind: SkipKind
    reason: str


NOT_SUCCEEDED: Final[dict[str, tuple[RunStatus, ...]]] = {
    "failed": tuple(s for s in FAILED if s is not RunStatus.TIMED_OUT),
    "timed_out": (RunStatus.TIMED_OUT,),
    "halted": (RunStatus.SKIPPED,),
    "missed": LATE,
}
"""What a re-run of the targets that did not succeed takes (``job run --failed``, the job
page's "re-run not succeeded"), by the word an operator narrows it with (``--only``):
``failed`` (every failure but a timeout, ``interrupted`` included: the command did not
complete), ``timed_out``, ``halted`` (``skipped`` with :attr:`SkipKind.ROLLOUT_HALTED`
only: a target the rollout never started; a target skipped because it was paused is
not taken) and ``missed``. ``cancelled`` is not taken: a person stopped it."""


def not_succeeded(status: RunStatus | str | None, skip_kind: str | None) -> str | None:
    """The :data:`NOT_SUCCEEDED` word of a run that ended so, or None (it succeeded, is
    still active, was cancelled, or was skipped for another reason than a halt)."""
    for word, members in NOT_SUCCEEDED.items():
        if status in members and (word != "halted" or skip_kind == SkipKind.ROLLOUT_HALTED):
            return word
    return None


if tuple(RunStatus) != tuple(RunStatus(s) for s in get_args(RunStatusName)):  # pragma: no cover
    raise ImportError("RunStatusName must list every RunStatus, in the same order")

__all__ = [
    "ACTIVE",
    "ALL",
    "BIRTH",
    "EXECUTOR_OUTCOMES",
    "FAILED",
    "FAILED_FOR_ALERTS",
    "FAILED_VALUES",
    "FINISHED",
    "FINISHED_VALUES",
    "LATE",
    "NOT_SUCCEEDED",
    "REACHED",
    "STOPPABLE",
    "TERMINAL",
    "TRANSITIONS",
    "WAITING",
    "ExecutorStatus",
    "RunStatus",
    "RunStatusName",
    "Skip",
    "SkipKind",
    "may_become",
    "not_succeeded",
]
