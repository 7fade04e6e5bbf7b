"""The run vocabulary: one enum, named sets that agree with each other, allowed moves."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import get_args

import pytest

from fleetcron.core import alerts, planning, statuses
from fleetcron.core.statuses import RunStatus, Skip, SkipKind, may_become
from fleetcron.cron import parse
from fleetcron.executors import base
from fleetcron.services.health import report as health
from fleetcron.services.runs import reads as runs

S = RunStatus
_AT = datetime(2026, 3, 2, 4, 0, tzinfo=UTC)


def test_every_status_string_once_in_declared_order() -> None:
    assert [s.value for s in RunStatus] == [
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
    assert list(get_args(statuses.RunStatusName)) == [s.value for s in RunStatus]
    failed: str = S.FAILED
    assert failed == "failed" and f"{S.TIMED_OUT}" == "timed_out"


def test_named_sets_partition_and_nest() -> None:
    assert set(statuses.ACTIVE) | set(statuses.TERMINAL) == set(RunStatus)
    assert not set(statuses.ACTIVE) & set(statuses.TERMINAL)
    assert set(statuses.REACHED) <= set(statuses.FINISHED) <= set(statuses.TERMINAL)
    assert set(statuses.FAILED_FOR_ALERTS) < set(statuses.FAILED)
    assert set(statuses.FAILED) - set(statuses.FAILED_FOR_ALERTS) == {S.INTERRUPTED}
    assert set(statuses.FINISHED) == {S.SUCCEEDED, *statuses.FAILED}
    assert S.MISSED not in statuses.FINISHED and S.SKIPPED not in statuses.FINISHED
    assert statuses.LATE == (S.MISSED,)


def test_callers_keep_their_meaning() -> None:
    # The sets each caller had before the vocabulary existed, spelled out.
    assert set(health.FAILED) == {
        "failed", "timed_out", "connect_error", "lost", "fenced", "interrupted"
    }  # fmt: skip
    assert set(health.FINISHED) == {"succeeded", *health.FAILED}
    assert set(health.REACHED) == {"succeeded", "failed", "timed_out"}
    assert set(alerts.FAILURE_STATUSES) == {
        "failed", "timed_out", "connect_error", "lost", "fenced"
    }  # fmt: skip
    assert set(alerts.LATE_STATUSES) == {"missed"}
    assert set(runs.RUN_STATUSES) - {"queued", "pending", "running"} == runs.FINISHED_STATUSES
    assert list(runs.RUN_STATUSES) == list(get_args(runs.RunStatus))


def test_interrupted_is_a_failure_for_health_but_not_for_alerts() -> None:
    assert S.INTERRUPTED in health.FAILED
    assert alerts.classify_run("interrupted", None) is None
    assert alerts.classify_run("lost", None) == "failure"


def test_cancelled_is_terminal_and_neither_a_failure_nor_an_outcome() -> None:
    assert S.CANCELLED in statuses.TERMINAL
    assert S.CANCELLED not in statuses.FAILED and S.CANCELLED not in statuses.FINISHED
    assert alerts.classify_run("cancelled", "stopped by alice") is None
    assert set(statuses.STOPPABLE) == set(statuses.ACTIVE)


def test_executor_statuses_are_run_statuses() -> None:
    assert get_args(base.Status) == get_args(statuses.ExecutorStatus)
    assert {RunStatus(s) for s in get_args(base.Status)} == set(statuses.EXECUTOR_OUTCOMES)
    assert set(statuses.EXECUTOR_OUTCOMES) <= set(statuses.FINISHED)


def test_planning_outcomes_other_than_fire_are_birth_statuses() -> None:
    decided = set(get_args(planning.Outcome)) - {"fire", "deferred"}
    assert decided == {"missed", "skipped"}
    assert all(may_become(None, s) for s in decided)
    # A slot deferred by a blackout window is born queued (it waits for the window's end).
    assert may_become(None, RunStatus.QUEUED)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (None, S.QUEUED),
        (None, S.RUNNING),
        (None, S.MISSED),
        (None, S.SKIPPED),
        (S.QUEUED, S.RUNNING),
        (S.QUEUED, S.SKIPPED),
        (S.RUNNING, S.SUCCEEDED),
        (S.RUNNING, S.FAILED),
        (S.RUNNING, S.TIMED_OUT),
        (S.RUNNING, S.CONNECT_ERROR),
        (S.RUNNING, S.LOST),
        (S.RUNNING, S.INTERRUPTED),
        (S.RUNNING, S.FENCED),
        (S.RUNNING, S.CANCELLED),
        (S.QUEUED, S.CANCELLED),
        (None, S.PENDING),
        (S.PENDING, S.RUNNING),
        (S.PENDING, S.SKIPPED),
        (S.PENDING, S.CANCELLED),
        ("running", "lost"),
    ],
)
def test_allowed_moves(old: RunStatus | str | None, new: RunStatus | str) -> None:
    assert may_become(old, new)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (None, S.SUCCEEDED),
        (None, S.FENCED),
        (S.QUEUED, S.SUCCEEDED),
        (S.QUEUED, S.QUEUED),
        (S.RUNNING, S.QUEUED),
        (S.RUNNING, S.RUNNING),
        (S.RUNNING, S.MISSED),
        (S.SUCCEEDED, S.FAILED),
        (S.FAILED, S.RUNNING),
        (S.FENCED, S.SUCCEEDED),
        (S.SKIPPED, S.RUNNING),
        (S.CANCELLED, S.RUNNING),
        (None, S.CANCELLED),
        (S.PENDING, S.SUCCEEDED),
        (S.PENDING, S.QUEUED),
        (S.RUNNING, S.PENDING),
        (S.SKIPPED, S.PENDING),
        ("running", "canceled"),
        ("bogus", "failed"),
    ],
)
def test_refused_moves(old: RunStatus | str | None, new: RunStatus | str) -> None:
    assert not may_become(old, new)


def test_terminal_statuses_have_no_moves() -> None:
    for done in statuses.TERMINAL:
        assert not any(may_become(done, new) for new in RunStatus), done
    for active in statuses.ACTIVE:
        assert any(may_become(active, new) for new in RunStatus), active


@pytest.mark.parametrize(
    ("outcome", "kind"),
    [
        (planning.target_hold("ssh", True, "disk swap", True), SkipKind.TARGET_PAUSED),
        (planning.target_hold("ssh", True, None, True), SkipKind.TARGET_PAUSED),
        (planning.target_hold("local", False, None, False), SkipKind.LOCAL_DISABLED),
        (
            planning.plan_assignment(
                parse("* * * * *"),
                planning.AssignmentState(
                    next_fire_at=_AT, overlap="forbid", catchup="none", running=True
                ),
                _AT,
                planning.SlotPolicy(),
            ).outcomes[0],
            SkipKind.OVERLAP,
        ),
    ],
)
def test_a_planner_that_skips_says_the_kind_beside_the_reason(
    outcome: Skip | planning.SlotOutcome | None, kind: SkipKind
) -> None:
    """The kind is carried from the planner that decided the skip; nothing parses it back
    out of the reason's text (the reason says the same thing for an operator)."""
    assert outcome is not None
    carried = outcome.kind if isinstance(outcome, Skip) else outcome.skip_kind
    assert carried is kind
    assert outcome.reason


def test_an_ownership_skip_is_late_by_its_kind_not_its_reason() -> None:
    assert alerts.classify_run("skipped", "free text", skip_kind="ownership_uncertain") == "late"
    assert alerts.classify_run("skipped", "ownership uncertain: x", skip_kind="") is None
    assert alerts.classify_run("skipped", "overlap: still going", skip_kind="overlap") is None
