"""Searching the runs on a real database (SQLite and PostgreSQL): every filter together,
pages read by key that neither skip nor repeat a run, and output text in each column."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import text

from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.errors import InvalidInput
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.runs.reads import RunFilter
from fleetcron.services.runs.search import search_runs
from fleetcron.services.runs.views import list_run_views
from fleetcron.services.targets import edit as targets
from integration.history.runs_helper import fire_minutes

ADMIN = Actor("admin", "admin")


@pytest.fixture
def history(app: App, clock: FakeClock) -> None:
    """Targets a and b; the bulk job sweep fired 12 minutes, b failing on odd minutes,
    with output naming the minute; a's stderr says "disk full" in minute 5."""
    for name in ("a", "b"):
        targets.add_target(app, ADMIN, TargetSpec(name, TargetKind.LOCAL))
    jobs.add_job(app, ADMIN, "sweep", JobSpec("* * * * *", "true"), bulk=True)
    minutes = range(12)
    fire_minutes(
        app,
        clock,
        [[("succeeded", 10), ("failed" if m % 2 else "succeeded", 20)] for m in minutes],
        stdout=[[f"a minute {m} ok", f"b minute {m}"] for m in minutes],
        stderr=[["disk full" if m == 5 else "", ""] for m in minutes],
    )


def test_keyset_pages_cover_every_run_once_newest_first(
    app: App, viewer: Actor, history: None
) -> None:
    seen: list[int] = []
    cursor = None
    pages = 0
    while True:
        page = search_runs(app, viewer, RunFilter(), limit=5, cursor=cursor)
        seen.extend(r.id for r in page.runs)
        pages += 1
        if page.next_cursor is None:
            break
        cursor = page.next_cursor

    assert pages == 5 and len(seen) == 24 and len(set(seen)) == 24
    everything = search_runs(app, viewer, RunFilter(), limit=100)
    assert [r.id for r in everything.runs] == seen
    assert everything.matched == 24 and not everything.more


def test_a_run_recorded_meanwhile_does_not_shift_the_next_page(
    app: App, viewer: Actor, history: None, clock: FakeClock
) -> None:
    before = [r.id for r in search_runs(app, viewer, RunFilter(), limit=100).runs]
    first = search_runs(app, viewer, RunFilter(), limit=4)
    fire_minutes(app, clock, [[("succeeded", 1), ("succeeded", 1)]])

    second = search_runs(app, viewer, RunFilter(), limit=4, cursor=first.next_cursor)

    assert [r.id for r in first.runs] == before[:4]
    assert [r.id for r in second.runs] == before[4:8]


def test_filters_combine_job_target_status_time_and_text(
    app: App, viewer: Actor, history: None, clock: FakeClock
) -> None:
    start = clock.now - timedelta(minutes=12)
    f = RunFilter(
        job="sweep",
        target="b",
        status="failed",
        since=start + timedelta(minutes=2),
        until=start + timedelta(minutes=9),
        grep="minute",
    )

    page = search_runs(app, viewer, f)

    assert [r.stdout_head for r in page.runs] == ["b minute 7", "b minute 5", "b minute 3"]


def test_text_is_found_in_stderr_and_a_fragment_across_two_columns_is_not(
    app: App, viewer: Actor, history: None
) -> None:
    found = search_runs(app, viewer, RunFilter(grep="disk full"))
    across = search_runs(app, viewer, RunFilter(grep="5 ok disk"))  # stdout end + stderr start

    assert [(r.target_name, r.stdout_head) for r in found.runs] == [("a", "a minute 5 ok")]
    assert across.runs == [] and across.matched == 0


def test_like_wildcards_in_the_text_are_plain_characters(
    app: App, viewer: Actor, history: None
) -> None:
    assert search_runs(app, viewer, RunFilter(grep="minute%ok")).runs == []
    assert search_runs(app, viewer, RunFilter(grep="minute _ ok")).runs == []
    assert len(search_runs(app, viewer, RunFilter(grep="minute 1 ok")).runs) == 1


def test_a_cursor_not_made_by_the_search_is_refused_naming_the_field(
    app: App, viewer: Actor
) -> None:
    with pytest.raises(InvalidInput) as raised:
        search_runs(app, viewer, RunFilter(), cursor="not-a-cursor")

    assert raised.value.field == "cursor"
    with pytest.raises(InvalidInput):
        search_runs(app, viewer, RunFilter(status="exploded"))


def test_output_text_is_found_through_the_databases_trigram_index(
    app: App, viewer: Actor, history: None
) -> None:
    if app.db.dialect == "postgresql":
        query = (
            "EXPLAIN SELECT id FROM runs WHERE (stdout_head || ' ' || stdout_tail"
            " || ' ' || stderr_head || ' ' || stderr_tail || ' ' || coalesce(error, ''))"
            " LIKE '%disk full%'"
        )
        index = "ix_runs_search_trgm"
    else:
        query = (
            "EXPLAIN QUERY PLAN SELECT id FROM runs WHERE id IN"
            " (SELECT rowid FROM runs_fts WHERE runs_fts MATCH '\"disk full\"')"
        )
        index = "VIRTUAL TABLE INDEX"
    with app.db.session() as session:
        if app.db.dialect == "postgresql":
            session.execute(text("SET LOCAL enable_seqscan = off"))
        plan = "\n".join(str(row[-1]) for row in session.execute(text(query)))

    assert index in plan, plan


def test_the_sqlite_text_index_follows_updates_and_deletes(
    app: App, viewer: Actor, history: None
) -> None:
    """Triggers keep ``runs_fts`` in step: a finished run's output (an update) is found,
    a deleted run is not, and no stale entry is left to match."""
    if app.db.dialect != "sqlite":
        pytest.skip("runs_fts is SQLite's")
    with app.db.session() as session:
        session.execute(text("UPDATE runs SET stdout_head = 'rewritten text' WHERE id = 1"))
        session.execute(text("DELETE FROM runs WHERE id = 2"))
    with app.db.read() as session:
        integrity = session.execute(
            text("INSERT INTO runs_fts(runs_fts, rank) VALUES ('integrity-check', 1)")
        )
        del integrity

    assert [r.id for r in search_runs(app, viewer, RunFilter(grep="rewritten")).runs] == [1]
    assert search_runs(app, viewer, RunFilter(grep="a minute 0 ok")).runs == []
    assert [r.id for r in search_runs(app, viewer, RunFilter(grep="b minute 0")).runs] == []
    assert len(search_runs(app, viewer, RunFilter(grep="b minute 3")).runs) == 1


def test_short_and_quoted_texts_are_searched_too(app: App, viewer: Actor, history: None) -> None:
    """Under three characters the trigram index cannot help; the search scans instead."""
    assert len(search_runs(app, viewer, RunFilter(grep="ok"), limit=100).runs) == 12
    assert search_runs(app, viewer, RunFilter(grep='say "hi"')).runs == []


@pytest.mark.parametrize("grep", ["\x00", "minute\x00ok"])
def test_a_nul_in_the_text_is_refused_naming_the_field(
    app: App, viewer: Actor, history: None, grep: str
) -> None:
    # SQLite ends a LIKE pattern at a NUL (a bare one matched every run), PostgreSQL cannot
    # compare one (a database error): both are refused before the query.
    with pytest.raises(InvalidInput) as raised:
        search_runs(app, viewer, RunFilter(grep=grep))
    assert raised.value.field == "q" and "NUL" in raised.value.message

    with pytest.raises(InvalidInput) as listed:
        list_run_views(app, viewer, RunFilter(grep=grep))
    assert listed.value.field == "grep"
    # Negative control: a text without the NUL is searched.
    assert len(search_runs(app, viewer, RunFilter(grep="minute 1 ok")).runs) == 1
