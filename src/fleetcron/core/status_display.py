"""How a run's status is shown: the one classification every page and the CLI use.

Each status of the run vocabulary (:mod:`fleetcron.core.statuses`) puts a target in one
*state* (:data:`STATES`, worst first: the job page's rows and filters, the fleet grid's
cells, the status strips, the per-job counts). Everything else a page or the CLI shows of
a status is derived from that state, so the badge, the grid cell, the chart bar and the
CLI's strip character of one status can never disagree:

* the badge's *tone* (:data:`TONE_OF`: the CSS class ``badge-<tone>``),
* the history chart's *outcome* (:data:`OUTCOMES`, worst first, and its colour),
* the CLI's strip character (:data:`STRIP_CHARS`).

A status is a failure here exactly when it is in ``statuses.FAILED`` (``interrupted``
included: the command did not complete on the target). ``cancelled`` (an operator stopped
it) is shown as ``skipped``: it did not run to an outcome, and it is no failure.
Pure, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, get_args

from fleetcron.core import statuses
from fleetcron.core.statuses import RunStatus

State = Literal["failed", "running", "waiting", "missed", "skipped", "never", "ok"]
"""A target's state by its newest run (``never``: it has none)."""

STATES: Final[tuple[State, ...]] = get_args(State)
"""The states in the order "worst first" sorts them. ``waiting``: not started yet
(``statuses.WAITING``: queued, or pending its turn in a rollout)."""

Tone = Literal["ok", "bad", "warn", "info", "muted"]
"""A badge's tone: the CSS class ``badge-<tone>``."""

Outcome = Literal["failed", "running", "skipped", "ok"]
"""A history chart bar's class; a slot takes the worst outcome of its runs."""

OUTCOMES: Final[tuple[Outcome, ...]] = get_args(Outcome)
"""The chart's outcomes, worst first."""


def _state(status: RunStatus) -> State:
    if status is RunStatus.SUCCEEDED:
        return "ok"
    if status in statuses.FAILED:
        return "failed"
    if status in statuses.WAITING:
        return "waiting"
    if status is RunStatus.RUNNING:
        return "running"
    if status is RunStatus.MISSED:
        return "missed"
    return "skipped"  # skipped, and cancelled: stopped by an operator, not a failure


STATE_OF: Final[dict[str | None, State]] = {
    None: "never",
    **{s.value: _state(s) for s in RunStatus},
}
"""Every status (by its string) and None (no run) to its state; a lookup for rows read in
bulk."""

TONE_OF: Final[dict[State, Tone]] = {
    "ok": "ok",
    "failed": "bad",
    "running": "info",
    "waiting": "info",
    "missed": "warn",
    "skipped": "warn",
    "never": "muted",
}

OUTCOME_OF: Final[dict[State, Outcome]] = {
    "ok": "ok",
    "failed": "failed",
    "running": "running",
    "waiting": "running",
    "missed": "skipped",
    "skipped": "skipped",
    "never": "skipped",
}
"""A state's chart outcome: waiting counts as running, missed as skipped (neither ran)."""

CHART_COLOURS: Final[dict[Outcome, str]] = {
    "failed": "#c62828",
    "running": "#1565c0",
    "skipped": "#9e9e9e",
    "ok": "#2e7d32",
}

STRIP_CHARS: Final[dict[State, str]] = {
    "ok": "+",
    "failed": "X",
    "running": ">",
    "waiting": ".",
    "missed": "m",
    "skipped": "s",
    "never": " ",
}
"""One character per run in the CLI's status strip."""


def state_of(status: RunStatus | str | None) -> State:
    """The state a run's status puts its target in; None (no run) is ``never``.

    Raises ``ValueError`` for a string that is no status."""
    return STATE_OF[None if status is None else RunStatus(status).value]


@dataclass(frozen=True)
class StatusDisplay:
    """Everything a page or the CLI shows of one status."""

    status: str | None
    state: State
    tone: Tone
    outcome: Outcome
    label: str
    """The status in words (``timed out``), or ``never ran``."""


def display_of(status: RunStatus | str | None) -> StatusDisplay:
    """How ``status`` is shown: its state, badge tone, chart outcome and label."""
    state = state_of(status)
    label = "never ran" if status is None else RunStatus(status).value.replace("_", " ")
    return StatusDisplay(
        status=None if status is None else RunStatus(status).value,
        state=state,
        tone=TONE_OF[state],
        outcome=OUTCOME_OF[state],
        label=label,
    )


def outcome_of(status: RunStatus | str) -> Outcome:
    """The chart outcome of a run's status."""
    return OUTCOME_OF[state_of(status)]


__all__ = [
    "CHART_COLOURS",
    "OUTCOMES",
    "OUTCOME_OF",
    "STATES",
    "STATE_OF",
    "STRIP_CHARS",
    "TONE_OF",
    "Outcome",
    "State",
    "StatusDisplay",
    "Tone",
    "display_of",
    "outcome_of",
    "state_of",
]
