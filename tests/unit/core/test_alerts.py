"""Alert decisions: one message per change of state, never one per run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fleetcron.core.alerts import (
    MAX_DELIVERY_BACKOFF_S,
    PAYLOAD_SCHEMA,
    Alert,
    AlertStateName,
    Observations,
    RunFacts,
    classify_run,
    decide,
    delivery_delay,
    late_slot_reason,
    payload,
    render,
    replay,
    stderr_excerpt,
)

SLOT = datetime(2026, 3, 2, 9, 1, tzinfo=UTC)
FAILED = Observations(outcome="failure")
SUCCEEDED = Observations(outcome="success")
MISSED = Observations(outcome="late")
OVERDUE = Observations(overdue=True)
NOTHING = Observations()


def fold(observations: list[Observations], state: AlertStateName = "ok") -> list[str]:
    """Events of a sequence of evaluations, as the service applies them."""
    events: list[str] = []
    for seen in observations:
        decision = decide(state, seen)
        state = decision.state
        if decision.event:
            events.append(decision.event)
    return events


# decide


def test_a_first_failure_is_one_failure_event() -> None:
    assert decide("ok", FAILED).event == "failure"


def test_three_failures_in_a_row_make_one_event() -> None:
    assert fold([FAILED, FAILED, FAILED]) == ["failure"]


def test_the_success_after_failures_is_one_recovery() -> None:
    assert fold([FAILED, FAILED, SUCCEEDED, SUCCEEDED]) == ["failure", "recovery"]


def test_successes_while_ok_say_nothing() -> None:
    assert fold([SUCCEEDED, SUCCEEDED]) == []


def test_an_overdue_slot_is_one_late_event_until_a_success() -> None:
    assert fold([OVERDUE, OVERDUE, MISSED, SUCCEEDED]) == ["late", "recovery"]


def test_being_overdue_wins_over_the_last_success() -> None:
    assert decide("ok", Observations(outcome="success", overdue=True)) == decide("ok", OVERDUE)
    assert decide("ok", OVERDUE).state == "late"


def test_a_missed_slot_makes_a_healthy_job_late() -> None:
    assert decide("ok", MISSED).event == "late"


def test_a_failing_job_that_goes_late_says_so_and_back() -> None:
    assert fold([FAILED, OVERDUE, FAILED, SUCCEEDED]) == ["failure", "late", "failure", "recovery"]


def test_no_news_keeps_the_state_and_says_nothing() -> None:
    for state in ("ok", "failing", "late"):
        assert decide(state, NOTHING).state == state
        assert decide(state, NOTHING).event is None


def test_a_recovery_is_only_sent_after_something_was_wrong() -> None:
    assert decide("failing", SUCCEEDED).event == "recovery"
    assert decide("late", SUCCEEDED).event == "recovery"
    assert decide("ok", SUCCEEDED).event is None


# replay


def test_a_replay_reports_slots_missed_while_down_and_the_success_after() -> None:
    state, changes = replay("ok", ["late", "late", "success"], overdue=False)
    assert state == "ok"
    assert [(c.cause, c.previous, c.decision.event) for c in changes] == [
        (0, "ok", "late"),
        (2, "late", "recovery"),
    ]


def test_a_replay_of_repeated_failures_has_one_change_caused_by_the_first() -> None:
    state, changes = replay("ok", ["failure", "failure", "failure"], overdue=False)
    assert state == "failing"
    assert [(c.cause, c.decision.event) for c in changes] == [(0, "failure")]


def test_a_replay_ends_with_being_overdue_now() -> None:
    state, changes = replay("ok", ["success"], overdue=True)
    assert state == "late"
    assert [(c.cause, c.decision.event) for c in changes] == [(None, "late")]


def test_a_replay_of_nothing_changes_nothing() -> None:
    assert replay("failing", [], overdue=False) == ("failing", [])


# classify_run


@pytest.mark.parametrize("status", ["failed", "timed_out", "connect_error", "lost", "fenced"])
def test_these_statuses_are_failures(status: str) -> None:
    assert classify_run(status, None) == "failure"


def test_a_success_is_a_success() -> None:
    assert classify_run("succeeded", None) == "success"


def test_a_missed_slot_is_late() -> None:
    assert classify_run("missed", "scheduler was not running at this time") == "late"


def test_a_slot_skipped_for_uncertain_ownership_is_late() -> None:
    assert classify_run("skipped", "no owner row", skip_kind="ownership_uncertain") == "late"


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        ("skipped", "overlap: the previous run is still going"),
        ("running", None),
        ("queued", None),
        ("interrupted", "the scheduler was stopped before this run finished"),
    ],
)
def test_these_runs_say_nothing_yet(status: str, reason: str | None) -> None:
    assert classify_run(status, reason) is None


def test_a_failure_that_will_be_retried_is_not_a_failure_yet() -> None:
    def verdict(status: str, attempt: int) -> str | None:
        return classify_run(status, None, attempt=attempt, retries=2, retry_on=["connect_error"])

    assert verdict("connect_error", attempt=1) is None
    assert verdict("connect_error", attempt=3) == "failure"
    assert verdict("failed", attempt=1) == "failure"


# delivery backoff


def test_delivery_retries_double_from_the_backoff() -> None:
    assert [delivery_delay(n, 30, 5) for n in range(1, 6)] == [30, 60, 120, 240, None]


def test_a_single_allowed_attempt_is_never_retried() -> None:
    assert delivery_delay(1, 30, 1) is None


def test_delivery_backoff_is_capped_at_a_day() -> None:
    assert delivery_delay(99, 86400, 100) == MAX_DELIVERY_BACKOFF_S


# messages


def failed_run(stderr: str = "") -> RunFacts:
    return RunFacts(
        id=42,
        status="failed",
        attempt=1,
        scheduled_for=SLOT,
        exit_code=3,
        finished_at=SLOT + timedelta(seconds=2),
        stderr=stderr,
    )


def alert(**changes: object) -> Alert:
    values: dict[str, object] = {
        "event": "failure",
        "state": "failing",
        "previous_state": "ok",
        "at": SLOT + timedelta(seconds=5),
        "assignment_id": 7,
        "job_id": 3,
        "job_name": "backup",
        "target_id": 5,
        "target_name": "db1",
        "slot": SLOT,
        "reason": "failed (exit code 3)",
        "run": failed_run("disk full\nno space left"),
    }
    values.update(changes)
    return Alert(**values)  # type: ignore[arg-type]


def test_a_failure_subject_names_job_target_and_exit_code() -> None:
    subject, _ = render(alert())
    assert subject == "[fleetcron] FAILED backup on db1 (exit 3)"


def test_a_failure_text_shows_status_slot_link_and_stderr() -> None:
    _, text = render(alert())
    assert "Status:  failed (exit code 3)" in text
    assert "Slot:    2026-03-02 09:01:00 UTC" in text
    assert "Run:     /runs/42 (attempt 1)" in text
    assert "  disk full\n  no space left\n" in text


def test_a_timeout_says_timed_out_in_the_subject() -> None:
    run = RunFacts(id=1, status="timed_out", attempt=1, scheduled_for=SLOT)
    subject, _ = render(alert(run=run))
    assert subject == "[fleetcron] TIMED OUT backup on db1"


def test_a_late_slot_without_a_run_says_why() -> None:
    late = alert(
        event="late",
        state="late",
        run=None,
        reason=late_slot_reason(SLOT, timedelta(seconds=60)),
    )
    subject, text = render(late)
    assert subject == "[fleetcron] LATE backup on db1"
    assert "has not started 60 s after its time" in text
    assert "Run:" not in text


def test_a_recovery_does_not_repeat_the_old_stderr() -> None:
    _, text = render(alert(event="recovery", state="ok", previous_state="failing"))
    assert "stderr" not in text


def test_only_the_first_lines_of_stderr_are_kept() -> None:
    excerpt = stderr_excerpt("".join(f"line {n}\n" for n in range(100)))
    assert excerpt.splitlines() == [f"line {n}" for n in range(20)]


def test_a_huge_stderr_line_is_cut() -> None:
    assert len(stderr_excerpt("x" * 100_000)) == 2000


def test_a_subject_never_holds_a_line_break() -> None:
    subject, _ = render(alert(job_name="a\r\nBcc: evil@example.com"))
    assert "\n" not in subject and "\r" not in subject


def test_the_payload_has_the_documented_fields() -> None:
    body = payload(alert())
    assert body["schema"] == PAYLOAD_SCHEMA
    assert set(body) == {
        "schema",
        "event",
        "state",
        "previous_state",
        "at",
        "subject",
        "text",
        "job",
        "target",
        "assignment_id",
        "slot",
        "reason",
        "run",
    }
    assert body["job"] == {"id": 3, "name": "backup"}
    assert body["run"]["link"] == "/runs/42"
    assert body["run"]["exit_code"] == 3
    assert body["slot"] == "2026-03-02T09:01:00+00:00"
