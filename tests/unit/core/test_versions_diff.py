"""Diffs of job definitions (pure) and the nearest-rank percentile."""

from __future__ import annotations

from fleetcron.core.versions import changed_fields, diff_definitions, summarize
from fleetcron.services.runs.history import percentile

BEFORE = {"schedule": "0 2 * * *", "command": "a\nb\nc", "selector": {"env": "prod"}, "retries": 0}


def test_an_unchanged_definition_has_no_changes() -> None:
    assert diff_definitions(BEFORE, dict(BEFORE)) == []


def test_key_order_and_tuples_are_not_changes() -> None:
    assert (
        changed_fields(
            {"retry_on": ("a", "b"), "s": {"x": 1, "y": 2}},
            {"retry_on": ["a", "b"], "s": {"y": 2, "x": 1}},
        )
        == []
    )


def test_a_field_present_on_one_side_only_counts_as_none_there() -> None:
    assert changed_fields({"spread_s": None}, {}) == []
    assert changed_fields({}, {"spread_s": 30}) == ["spread_s"]


def test_fields_come_in_a_stable_order_schedule_first() -> None:
    after = {**BEFORE, "retries": 2, "schedule": "0 3 * * *", "command": "a\nB\nc"}

    assert [c.field for c in diff_definitions(BEFORE, after)] == ["schedule", "command", "retries"]


def test_a_multiline_command_gets_a_line_diff() -> None:
    [change] = diff_definitions(BEFORE, {**BEFORE, "command": "a\nB\nc"})

    assert change.lines[2:] == ["@@ -1,3 +1,3 @@", " a", "-b", "+B", " c"]


def test_a_one_line_change_has_no_line_diff_and_a_short_summary() -> None:
    changes = diff_definitions(BEFORE, {**BEFORE, "selector": {}, "retries": 3})

    assert all(not c.lines for c in changes)
    assert summarize(changes) == "selector: env=prod -> (none); retries: 0 -> 3"


def test_a_long_value_is_summarized_by_its_name_only() -> None:
    changes = diff_definitions({"notes": "short"}, {"notes": "x" * 80})

    assert summarize(changes) == "notes changed"


def test_percentile_by_nearest_rank() -> None:
    assert percentile([], 50) is None
    assert percentile([7], 95) == 7
    assert percentile([1, 2, 3, 4], 50) == 2
    assert percentile(list(range(1, 101)), 95) == 95
    assert percentile([5, 1, 3], 100) == 5
