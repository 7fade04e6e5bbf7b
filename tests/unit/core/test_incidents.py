"""Incident decisions: when a channel hears of an incident, with Alertmanager's timers."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from fleetcron.core.incidents import (
    INCIDENT_SCHEMA,
    TARGETS_SHOWN,
    Cluster,
    FirstRun,
    IncidentFacts,
    IncidentMessage,
    NoticeFacts,
    SilenceFacts,
    TargetLine,
    Timers,
    bounded,
    checked_timers,
    clusters,
    failure_key,
    is_flapping,
    is_silenced,
    merged,
    next_message,
    parse_duration,
    payload,
    render,
    silence_window,
)
from fleetcron.errors import InvalidInput

OPENED = datetime(2026, 3, 2, 9, 1, tzinfo=UTC)
DEFAULTS = Timers()


def at(seconds: float) -> datetime:
    return OPENED + timedelta(seconds=seconds)


def incident(
    targets: set[int], *, resolved: float | None = None, acknowledged: bool = False
) -> IncidentFacts:
    return IncidentFacts(
        opened_at=OPENED,
        resolved_at=None if resolved is None else at(resolved),
        acknowledged=acknowledged,
        targets=frozenset(targets),
    )


def told(sent: float, targets: set[int], *, closed: bool = False) -> NoticeFacts:
    return NoticeFacts(last_sent_at=at(sent), notified=frozenset(targets), closed=closed)


NEVER = NoticeFacts()


def test_the_defaults_are_alertmanagers() -> None:
    assert (DEFAULTS.group_wait_s, DEFAULTS.group_interval_s, DEFAULTS.repeat_interval_s) == (
        30.0,
        300.0,
        14400.0,
    )


def test_nothing_is_sent_before_group_wait() -> None:
    assert next_message(incident({1, 2}), NEVER, DEFAULTS, at(29.9)) is None


def test_the_first_message_goes_out_once_group_wait_has_passed() -> None:
    assert next_message(incident({1, 2}), NEVER, DEFAULTS, at(30)) == "firing"


def test_an_unchanged_set_sends_nothing_until_repeat_interval() -> None:
    sent = told(30, {1, 2})
    assert next_message(incident({1, 2}), sent, DEFAULTS, at(30 + 14399)) is None
    assert next_message(incident({1, 2}), sent, DEFAULTS, at(30 + 14400)) == "reminder"


def test_an_acknowledged_incident_is_never_reminded() -> None:
    sent = told(30, {1})
    assert next_message(incident({1}, acknowledged=True), sent, DEFAULTS, at(86400)) is None


def test_a_changed_set_waits_for_group_interval_after_the_last_message() -> None:
    sent = told(30, {1, 2})
    assert next_message(incident({1, 2, 3}), sent, DEFAULTS, at(30 + 299)) is None
    assert next_message(incident({1, 2, 3}), sent, DEFAULTS, at(30 + 300)) == "update"


def test_an_acknowledged_incident_still_sends_updates_and_its_resolution() -> None:
    sent = told(30, {1, 2})
    assert next_message(incident({1}, acknowledged=True), sent, DEFAULTS, at(400)) == "update"
    done = incident(set(), resolved=500, acknowledged=True)
    assert next_message(done, sent, DEFAULTS, at(501)) == "resolved"


def test_a_resolved_incident_is_announced_once() -> None:
    done = incident(set(), resolved=600)
    assert next_message(done, told(30, {1}), DEFAULTS, at(600)) == "resolved"
    assert next_message(done, told(600, set(), closed=True), DEFAULTS, at(700)) is None


def test_an_incident_resolved_within_group_wait_is_one_resolved_message_after_it() -> None:
    done = incident(set(), resolved=10)
    assert next_message(done, NEVER, DEFAULTS, at(20)) is None
    assert next_message(done, NEVER, DEFAULTS, at(30)) == "resolved"


def test_a_silenced_incident_sends_nothing_at_all() -> None:
    for facts, notice in [
        (incident({1}), NEVER),
        (incident({1, 2}), told(30, {1})),
        (incident({1}), told(30, {1})),
        (incident(set(), resolved=60), told(30, {1})),
    ]:
        assert next_message(facts, notice, DEFAULTS, at(86400), silenced=True) is None


def test_a_channel_of_several_rules_gets_the_shortest_timers() -> None:
    slow = Timers(60, 600, 86400)
    fast = Timers(10, 300, 3600)
    assert merged([slow, fast]) == Timers(10, 300, 3600)
    assert merged([]) == DEFAULTS


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("group_wait_s", -1),
        ("group_wait_s", 3601),
        ("group_interval_s", 5),
        ("repeat_interval_s", 30),
    ],
)
def test_timers_out_of_range_are_refused_naming_the_field(field: str, value: float) -> None:
    with pytest.raises(InvalidInput) as caught:
        checked_timers(**{field: value})
    assert caught.value.field == field
    assert field in caught.value.message


def test_timers_not_given_are_the_defaults() -> None:
    assert checked_timers(repeat_interval_s=600) == Timers(30, 300, 600)


def test_six_incidents_within_an_hour_are_flapping_five_are_not() -> None:
    five = [at(-600 * i) for i in range(5)]
    assert not is_flapping(five, at(0))
    assert is_flapping([*five, at(-3000)], at(0))
    # Stable again once the oldest ones are more than an hour old.
    assert not is_flapping([*five, at(-3000)], at(3600 - 3000 + 1))


def test_a_flapping_incident_is_announced_once_then_quiet() -> None:
    open_one = incident({1})
    assert next_message(open_one, NEVER, DEFAULTS, at(0), flapping=True) == "flapping"
    quiet = next_message(open_one, NEVER, DEFAULTS, at(0), flapping=True, flap_announced=True)
    assert quiet is None
    done = incident(set(), resolved=60)
    assert (
        next_message(done, told(0, {1}), DEFAULTS, at(60), flapping=True, flap_announced=True)
        is None
    )


# -- silences ------------------------------------------------------------------------------

NOW = at(0)
HOUR = timedelta(hours=1)


def test_a_silence_of_the_job_mutes_its_incident() -> None:
    job = SilenceFacts(NOW, NOW + HOUR, job_id=7)
    assert is_silenced([job], 7, [(1, {}), (2, {})], NOW)
    assert not is_silenced([job], 8, [(1, {})], NOW)


def test_a_silence_of_one_target_mutes_only_an_incident_of_that_target_alone() -> None:
    one = SilenceFacts(NOW, NOW + HOUR, target_id=1)
    assert is_silenced([one], 7, [(1, {})], NOW)
    assert not is_silenced([one], 7, [(1, {}), (2, {})], NOW)


def test_a_label_selector_mutes_the_targets_carrying_the_labels() -> None:
    rack = SilenceFacts(NOW, NOW + HOUR, selector={"rack": "r12"})
    assert is_silenced([rack], 7, [(1, {"rack": "r12"}), (2, {"rack": "r12", "os": "x"})], NOW)
    assert not is_silenced([rack], 7, [(1, {"rack": "r12"}), (2, {"rack": "r3"})], NOW)


def test_an_expired_silence_lifts_by_itself() -> None:
    everything = SilenceFacts(NOW, NOW + HOUR)
    assert is_silenced([everything], 7, [(1, {})], NOW + HOUR - timedelta(seconds=1))
    assert not is_silenced([everything], 7, [(1, {})], NOW + HOUR)


def test_a_silence_lasts_a_duration_or_until_a_time() -> None:
    assert silence_window(NOW, duration=HOUR, until=None) == (NOW, NOW + HOUR)
    assert silence_window(NOW, duration=None, until=NOW + HOUR) == (NOW, NOW + HOUR)


@pytest.mark.parametrize(
    ("duration", "until", "field"),
    [
        (None, None, "duration"),
        (HOUR, NOW + HOUR, "duration"),
        (timedelta(seconds=59), None, "duration"),
        (timedelta(days=91), None, "duration"),
        (None, NOW - HOUR, "until"),
    ],
)
def test_a_silence_window_out_of_range_is_refused_naming_the_field(
    duration: timedelta | None, until: datetime | None, field: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        silence_window(NOW, duration=duration, until=until)
    assert caught.value.field == field


def test_durations_read_as_people_write_them() -> None:
    assert parse_duration("90m") == timedelta(minutes=90)
    assert parse_duration("1d12h") == timedelta(hours=36)
    assert parse_duration("3600") == HOUR


@pytest.mark.parametrize("text", ["", "h", "2x", "1.5h", "-1h"])
def test_a_duration_that_is_not_one_is_refused(text: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_duration(text, field="until")
    assert caught.value.field == "until"


# -- messages ------------------------------------------------------------------------------


def message(kind: str = "firing", count: int = 50) -> IncidentMessage:
    lines = [TargetLine(i, f"web{i:02}") for i in range(count)]
    return IncidentMessage(
        kind=kind,  # type: ignore[arg-type]
        incident_id=12,
        job_id=4,
        job_name="backup",
        cause="failing",
        opened_at=OPENED,
        at=at(30) if kind != "resolved" else at(1800),
        previous_state="ok" if kind == "firing" else "failing",
        state="ok" if kind == "resolved" else "failing",
        reason="the command exited with code 3",
        targets=bounded(lines),
        target_count=count,
        failed_slots=30,
        resolved_at=at(1800) if kind == "resolved" else None,
        first_run=FirstRun(1234, "failed", 3, None, "disk full"),
    )


def test_a_message_names_the_first_targets_and_the_whole_count() -> None:
    body = payload(message())
    assert body["schema"] == INCIDENT_SCHEMA
    assert (body["incident_id"], body["status"], body["cause"]) == (12, "firing", "failing")
    assert body["targets"]["count"] == 50
    assert len(body["targets"]["shown"]) == TARGETS_SHOWN
    assert body["run"] == {
        "id": 1234,
        "status": "failed",
        "exit_code": 3,
        "error": None,
        "stderr": "disk full",
        "link": "/runs/1234",
    }
    assert body["link"] == "/jobs/backup?status=failing"


def test_subjects_of_one_incident_share_their_beginning() -> None:
    firing, _ = render(message("firing"))
    reminder, _ = render(message("reminder"))
    resolved, text = render(message("resolved"))
    assert firing == "[fleetcron] #12 backup failing: 50 targets"
    assert reminder == "[fleetcron] #12 backup failing: 50 targets (still open)"
    assert resolved == "[fleetcron] #12 backup failing: RESOLVED after 30m"
    assert "Slots:    30 failed" in text
    assert "web00, web01" in render(message("firing"))[1]
    assert "and 30 more" in render(message("firing"))[1]


def test_the_payload_has_every_field_its_documented_schema_requires_and_no_other() -> None:
    schema = json.loads((Path(__file__).parents[3] / "docs" / "incident.schema.json").read_text())
    body = payload(message())
    # delivery_id is added by the webhook sender, per delivery.
    assert set(body) | {"delivery_id"} == set(schema["required"]) == set(schema["properties"])
    assert body["schema"] == schema["properties"]["schema"]["const"]
    assert set(body["targets"]) == set(schema["properties"]["targets"]["required"])


def test_targets_failing_the_same_way_are_one_cluster_with_their_shared_labels() -> None:
    timeout = failure_key("connect_error", None, "connection timed out: 10.0.12.7:22")
    assert timeout == "connect_error: connection timed out"
    failures = [(timeout, {"rack": "r12", "os": f"v{i % 2}"}) for i in range(290)]
    failures += [(failure_key("failed", 1, None), {"rack": f"r{i}"}) for i in range(22)]

    found = clusters(failures)

    assert found == [
        Cluster("connect_error: connection timed out", 290, {"rack": "r12"}),
        Cluster("exit 1", 22, {}),
    ]
    assert found[0].phrase() == "290 connect_error: connection timed out in rack=r12"


def test_beyond_five_clusters_the_rest_are_other() -> None:
    found = clusters([(f"exit {code}", {}) for code in range(1, 9)])
    assert [c.reason for c in found] == ["exit 1", "exit 2", "exit 3", "exit 4", "exit 5", "other"]
    assert found[-1].count == 3
