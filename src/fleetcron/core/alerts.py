"""Alert decisions: when a run outcome or a late slot becomes a message. Pure: no I/O, no clock.

Every assignment (one job on one target) has one alert state:

- ``ok``: nothing to report;
- ``failing``: its newest final run failed (``failed``, ``timed_out``, ``connect_error``,
  ``lost`` or ``fenced``);
- ``late``: a slot did not start on time — still undecided past the misfire grace (the
  scheduler is down, or no node can prove it owns the jobs), recorded ``missed``, or
  skipped because ownership was uncertain — or a run is still ``running`` past its
  deadline.

A message goes out when the state *changes*, never while it stays the same: three failures
in a row send one ``failure``; the next success sends one ``recovery``. :func:`decide` is the
whole rule, :func:`replay` applies it to everything learnt since the last look, and
:func:`render` and :func:`payload` turn a decided alert into the email text and the webhook
JSON (schema ``fleetcron.alert/1``, documented in docs/notifications.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final, Literal

from fleetcron.core import statuses
from fleetcron.core.planning import should_retry
from fleetcron.core.statuses import RunStatus, SkipKind

AlertStateName = Literal["ok", "failing", "late"]
AlertEvent = Literal["failure", "late", "recovery"]
Outcome = Literal["success", "failure", "late"]
"""What one finished run says about its assignment."""

ALERT_STATES: Final = ("ok", "failing", "late")
ALERT_EVENTS: Final = ("failure", "late", "recovery")
PAYLOAD_SCHEMA: Final = "fleetcron.alert/1"

FAILURE_STATUSES: Final = statuses.FAILED_FOR_ALERTS
LATE_STATUSES: Final = statuses.LATE
#: Prefix of the reason ``store/runs.py`` gives a slot it skipped because no node could
#: prove it owns the jobs: for the job's owner that slot is as good as missed. Readers go
#: by the run's ``skip_kind`` (``SkipKind.OWNERSHIP_UNCERTAIN``), not by this text.
OWNERSHIP_UNCERTAIN: Final = "ownership uncertain"

STDERR_LINES: Final = 20
STDERR_CHARS: Final = 2000
#: Longest wait between two delivery attempts, however many attempts are allowed; also keeps
#: ``backoff * 2**attempt`` from overflowing a timedelta.
MAX_DELIVERY_BACKOFF_S: Final = 24 * 3600.0

_STATE_OF: Final[dict[Outcome, AlertStateName]] = {
    "success": "ok",
    "failure": "failing",
    "late": "late",
}
_EVENT_OF: Final[dict[AlertStateName, AlertEvent]] = {
    "ok": "recovery",
    "failing": "failure",
    "late": "late",
}


def classify_run(
    status: str,
    reason: str | None,
    *,
    attempt: int = 1,
    retries: int = 0,
    retry_on: Sequence[str] = (),
    skip_kind: str | None = None,
) -> Outcome | None:
    """What a run says about its assignment, or None when it says nothing yet.

    A failure the scheduler is about to retry is not the final word on its slot (the
    retry may succeed), so it is not a failure yet; the last attempt's outcome is.
    Runs still ``queued`` or ``running``, ``interrupted`` by a stop, and overlap skips say
    nothing. A skip says "late" when its ``skip_kind`` (the ``runs.skip_kind`` column) is
    ``ownership_uncertain`` (the reason's text is never parsed).
    """
    if status == RunStatus.SUCCEEDED:
        return "success"
    if status in FAILURE_STATUSES:
        if should_retry(status, attempt, retries, list(retry_on)):
            return None
        return "failure"
    if status in LATE_STATUSES:
        return "late"
    if status == RunStatus.SKIPPED:
        return "late" if skip_kind == SkipKind.OWNERSHIP_UNCERTAIN else None
    return None


@dataclass(frozen=True)
class Observations:
    """One thing learnt about an assignment: the ``outcome`` of one of its finished runs,
    and whether it is ``overdue`` now (a slot undecided past the grace, or a run running
    past its deadline)."""

    outcome: Outcome | None = None
    overdue: bool = False


@dataclass(frozen=True)
class Decision:
    state: AlertStateName
    event: AlertEvent | None


def decide(previous: AlertStateName, seen: Observations) -> Decision:
    """The new state of an assignment and the event to send, if the state changed.

    Being overdue wins over any finished run: whatever the last run did, nothing is
    running on time now. Without news the state stays as it is.
    """
    state: AlertStateName
    if seen.overdue:
        state = "late"
    elif seen.outcome is not None:
        state = _STATE_OF[seen.outcome]
    else:
        state = previous
    return Decision(state, None if state == previous else _EVENT_OF[state])


@dataclass(frozen=True)
class Change:
    """A change of state; ``cause`` is the index of the run outcome behind it, or None
    when it is the assignment being overdue now."""

    cause: int | None
    previous: AlertStateName
    decision: Decision


def replay(
    previous: AlertStateName, outcomes: Sequence[Outcome], *, overdue: bool
) -> tuple[AlertStateName, list[Change]]:
    """Apply the outcomes of the runs finished since the last change, oldest first, then
    whether the assignment is overdue now; returns the final state and every change.

    Replaying every outcome rather than only the newest reports what happened between two
    looks: the slots missed while the only node was down (``late``, then ``recovery``),
    or a failure already followed by a success.
    """
    state = previous
    changes: list[Change] = []
    steps: list[tuple[int | None, Observations]] = [
        (index, Observations(outcome=outcome)) for index, outcome in enumerate(outcomes)
    ]
    if overdue:
        steps.append((None, Observations(overdue=True)))
    for cause, seen in steps:
        decision = decide(state, seen)
        if decision.event is not None:
            changes.append(Change(cause, state, decision))
        state = decision.state
    return state, changes


def delivery_delay(attempt: int, backoff_s: float, max_attempts: int) -> float | None:
    """Seconds to wait after failed attempt number ``attempt`` (1-based) before the next
    one: ``backoff_s``, doubling each time, at most a day; None when it was the last."""
    if attempt >= max_attempts:
        return None
    return min(backoff_s * 2.0 ** min(attempt - 1, 62), MAX_DELIVERY_BACKOFF_S)


def stderr_excerpt(text: str, *, lines: int = STDERR_LINES, chars: int = STDERR_CHARS) -> str:
    """The first ``lines`` lines of a run's stderr, at most ``chars`` characters."""
    head = "\n".join(text.splitlines()[:lines])
    if len(head) > chars:
        head = head[: chars - 1] + "…"
    return head


@dataclass(frozen=True)
class RunFacts:
    """The run an alert is about (the failed, stuck or succeeding one)."""

    id: int
    status: str
    attempt: int
    scheduled_for: datetime
    exit_code: int | None = None
    finished_at: datetime | None = None
    deadline_at: datetime | None = None
    error: str | None = None
    reason: str | None = None
    stderr: str = ""

    @property
    def link(self) -> str:
        return f"/runs/{self.id}"


@dataclass(frozen=True)
class Alert:
    """One state change of one assignment, with everything its message shows."""

    event: AlertEvent
    state: AlertStateName
    previous_state: AlertStateName
    at: datetime
    assignment_id: int
    job_id: int
    job_name: str
    target_id: int
    target_name: str
    slot: datetime | None
    reason: str
    run: RunFacts | None = None


def late_slot_reason(slot: datetime, grace: timedelta) -> str:
    return (
        f"the slot {_when(slot)} has not started {_seconds(grace)} after its time: the "
        "scheduler is not running, or no node can prove it owns the jobs"
    )


def stuck_run_reason(run_id: int, deadline: datetime) -> str:
    return (
        f"run {run_id} is still running past its deadline {_when(deadline)}: the node "
        "running it may have stopped"
    )


def run_reason(event: AlertEvent, run: RunFacts, previous: AlertStateName) -> str:
    if event == "recovery":
        was = "failing" if previous == "failing" else "late"
        return f"run {run.id} succeeded; the job was {was} on this target"
    if event == "late":
        return run.reason or f"the slot {_when(run.scheduled_for)} did not run"
    detail = run.error or run.reason
    if run.status == "failed" and run.exit_code is not None:
        return f"the command exited with code {run.exit_code}" + (f": {detail}" if detail else "")
    if run.status == "timed_out":
        return "the command did not finish within its timeout" + (f": {detail}" if detail else "")
    if run.status == "connect_error":
        return "the target could not be reached" + (f": {detail}" if detail else "")
    return f"the run ended {run.status}" + (f": {detail}" if detail else "")


def render(alert: Alert) -> tuple[str, str]:
    """The subject and plain text of the message."""
    word = {"failure": "FAILED", "late": "LATE", "recovery": "RECOVERED"}[alert.event]
    if alert.event == "failure" and alert.run is not None and alert.run.status != "failed":
        word = alert.run.status.replace("_", " ").upper()
    subject = f"[fleetcron] {word} {alert.job_name} on {alert.target_name}"
    if alert.event == "failure" and alert.run is not None and alert.run.exit_code is not None:
        subject += f" (exit {alert.run.exit_code})"
    lines = [
        f"Job:     {alert.job_name}",
        f"Target:  {alert.target_name}",
        f"Event:   {alert.event} (was {alert.previous_state}, now {alert.state})",
    ]
    if alert.run is not None:
        lines.append(f"Status:  {_status_phrase(alert.run)}")
    if alert.slot is not None:
        lines.append(f"Slot:    {_when(alert.slot)}")
    if alert.run is not None:
        lines.append(f"Run:     {alert.run.link} (attempt {alert.run.attempt})")
    lines += ["", alert.reason]
    if alert.run is not None and alert.run.stderr and alert.event != "recovery":
        lines += ["", f"stderr (first {STDERR_LINES} lines):"]
        lines += ["  " + line for line in alert.run.stderr.splitlines()]
    return _one_line(subject), "\n".join(lines) + "\n"


def payload(alert: Alert) -> dict[str, Any]:
    """The webhook body of schema ``fleetcron.alert/1`` (the email uses its subject and
    text). Fields are only ever added to this schema, never renamed or removed."""
    subject, text = render(alert)
    run = alert.run
    return {
        "schema": PAYLOAD_SCHEMA,
        "event": alert.event,
        "state": alert.state,
        "previous_state": alert.previous_state,
        "at": alert.at.isoformat(),
        "subject": subject,
        "text": text,
        "job": {"id": alert.job_id, "name": alert.job_name},
        "target": {"id": alert.target_id, "name": alert.target_name},
        "assignment_id": alert.assignment_id,
        "slot": alert.slot.isoformat() if alert.slot else None,
        "reason": alert.reason,
        "run": None
        if run is None
        else {
            "id": run.id,
            "status": run.status,
            "exit_code": run.exit_code,
            "attempt": run.attempt,
            "scheduled_for": run.scheduled_for.isoformat(),
            "finished_at": run.finished_at.isoformat() if run.finished_at else None,
            "error": run.error,
            "stderr": run.stderr,
            "link": run.link,
        },
    }


def channel_test_payload(channel: str, at: datetime) -> dict[str, Any]:
    """The body of a test message: the same schema, with no job, target or run."""
    subject = f"[fleetcron] test message to channel {channel}"
    text = f"This is a test message from fleetcron to the notification channel {channel}.\n"
    return {
        "schema": PAYLOAD_SCHEMA,
        "event": "test",
        "state": None,
        "previous_state": None,
        "at": at.isoformat(),
        "subject": subject,
        "text": text,
        "job": None,
        "target": None,
        "assignment_id": None,
        "slot": None,
        "reason": "a test requested by an operator",
        "run": None,
    }


def _status_phrase(run: RunFacts) -> str:
    if run.exit_code is not None:
        return f"{run.status} (exit code {run.exit_code})"
    return run.status


def _when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S %Z").strip()


def _seconds(delta: timedelta) -> str:
    return f"{delta.total_seconds():g} s"


def _one_line(text: str) -> str:
    # A subject is a mail header: a line break in it would start a new header.
    return " ".join(text.split())


__all__ = [
    "ALERT_EVENTS",
    "ALERT_STATES",
    "FAILURE_STATUSES",
    "PAYLOAD_SCHEMA",
    "Alert",
    "AlertEvent",
    "AlertStateName",
    "Change",
    "Decision",
    "Observations",
    "Outcome",
    "RunFacts",
    "channel_test_payload",
    "classify_run",
    "decide",
    "delivery_delay",
    "late_slot_reason",
    "payload",
    "render",
    "replay",
    "run_reason",
    "stderr_excerpt",
    "stuck_run_reason",
]
