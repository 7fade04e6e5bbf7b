"""The one status display classification: every status of the run vocabulary has a state,
a badge tone, a chart outcome and a strip character, derived from one table, and the pages
and the CLI show what it says instead of classifying statuses themselves."""

from __future__ import annotations

import re
from collections.abc import Callable
from importlib.resources import files
from pathlib import Path
from typing import cast

import pytest

from fleetcron.cli.job_status_cmd import strip_text
from fleetcron.core import status_display as shown
from fleetcron.core import statuses
from fleetcron.core.statuses import RunStatus
from fleetcron.services.fleet.job_page import SlotMark, TargetRow
from fleetcron.services.runs.history import Slot, bars_of
from fleetcron.web.pages.render import templates

SRC = Path(str(files("fleetcron")))
STATUS_WORDS = "|".join(s.value for s in RunStatus)


def _macro(name: str) -> Callable[..., object]:
    """A macro of the pages' ``macros.html``, as the pages call it."""
    module = templates.env.get_template("macros.html").make_module({})
    return cast(Callable[..., object], getattr(module, name))


@pytest.mark.parametrize("status", list(RunStatus))
def test_every_status_has_every_display(status: RunStatus) -> None:
    display = shown.display_of(status)
    assert display.state in shown.STATES
    assert display.tone == shown.TONE_OF[display.state]
    assert display.outcome == shown.OUTCOME_OF[display.state]
    assert display.state in shown.STRIP_CHARS
    assert display.outcome in shown.CHART_COLOURS
    assert display.label == status.value.replace("_", " ")


def test_every_state_and_outcome_is_reachable_and_none_is_never() -> None:
    reached = {shown.state_of(s) for s in RunStatus} | {shown.state_of(None)}
    assert reached == set(shown.STATES)
    assert {shown.outcome_of(s) for s in RunStatus} == set(shown.OUTCOMES)
    assert shown.display_of(None).label == "never ran"
    assert shown.display_of(None).tone == "muted"


def test_a_status_is_shown_failed_exactly_when_it_is_a_failure() -> None:
    failed = {s for s in RunStatus if shown.state_of(s) == "failed"}
    assert failed == set(statuses.FAILED)
    assert {s for s in RunStatus if shown.display_of(s).tone == "bad"} == set(statuses.FAILED)
    assert {s for s in RunStatus if shown.outcome_of(s) == "failed"} == set(statuses.FAILED)
    assert shown.display_of(RunStatus.INTERRUPTED).tone == "bad"


def test_waiting_statuses_are_waiting_and_cancelled_is_no_failure() -> None:
    assert {s for s in RunStatus if shown.state_of(s) == "waiting"} == set(statuses.WAITING)
    assert shown.state_of(RunStatus.CANCELLED) == "skipped"
    assert shown.outcome_of(RunStatus.QUEUED) == "running"


def test_a_string_that_is_no_status_is_refused() -> None:
    with pytest.raises(ValueError):
        shown.state_of("exploded")
    with pytest.raises(ValueError):
        shown.display_of("")


@pytest.mark.parametrize("status", list(RunStatus))
def test_the_status_badge_macro_shows_the_classification(status: RunStatus) -> None:
    macro = _macro("status_badge")
    html = str(macro({"status": status.value}))
    assert f'class="badge badge-{shown.display_of(status).tone}"' in html


@pytest.mark.parametrize("state", shown.STATES)
def test_the_state_badge_macro_shows_the_classification(state: shown.State) -> None:
    macro = _macro("state_badge")
    assert f'class="badge badge-{shown.TONE_OF[state]}"' in str(macro(state))


def test_the_chart_and_the_cli_strip_follow_the_classification() -> None:
    from datetime import UTC, datetime, timedelta

    t0 = datetime(2026, 3, 1, tzinfo=UTC)
    slots = [
        Slot(t0 + timedelta(minutes=i), {shown.outcome_of(s): 1}, 10, i)
        for i, s in enumerate(RunStatus)
    ]
    bars = bars_of(slots).bars
    assert [b.outcome for b in bars] == [shown.outcome_of(s) for s in RunStatus]
    assert [b.colour for b in bars] == [shown.CHART_COLOURS[shown.outcome_of(s)] for s in RunStatus]
    strip = tuple(SlotMark(i, s.value, t0) for i, s in enumerate(RunStatus))
    row = TargetRow("t", {}, True, False, None, "ok", None, 0, None, strip)
    assert strip_text(row) == "".join(shown.STRIP_CHARS[shown.state_of(s)] for s in RunStatus)


def test_no_template_or_adapter_classifies_statuses_itself() -> None:
    """A mapping from a status word to a badge class or state, written anywhere but the
    core, would be a second classification."""
    mapping = re.compile(rf'["\']({STATUS_WORDS})["\']\s*:\s*["\'](ok|bad|warn|info|muted)["\']')
    offenders = []
    for path in [*SRC.joinpath("web").rglob("*.html"), *SRC.joinpath("web").rglob("*.py")]:
        offenders += [f"{path.name}: {m.group(0)}" for m in mapping.finditer(path.read_text())]
    for path in [*SRC.joinpath("cli").rglob("*.py"), *SRC.joinpath("services").rglob("*.py")]:
        offenders += [f"{path.name}: {m.group(0)}" for m in mapping.finditer(path.read_text())]
    assert offenders == []


def test_the_scan_finds_a_classification_written_in_a_template() -> None:
    """Negative control: the pattern above matches the kind of table it forbids."""
    mapping = re.compile(rf'["\']({STATUS_WORDS})["\']\s*:\s*["\'](ok|bad|warn|info|muted)["\']')
    assert mapping.search('{% set kind = {"succeeded": "ok", "failed": "bad"} %}')
