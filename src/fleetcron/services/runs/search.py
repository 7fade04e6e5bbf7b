"""Searching the runs: by job, target, status, time range and output text together,
newest first, in pages read by key (``scheduled_for``, ``id``) rather than by offset.

A page after the first starts where the previous one ended (the *cursor* names its last
run), so page 1,000 costs what page 1 costs, and a run recorded meanwhile does not shift
the pages. Each filter has an index in the page order (migration 0017). Output text is
matched in the head and tail of stdout and stderr and in the error; on PostgreSQL the
trigram index over those columns (``store.schema.SEARCH_TEXT_SQL``) finds the candidates
and the exact per-column test keeps only real matches, so a fragment spanning two
columns is not a match; on SQLite an FTS5 trigram table (``runs_fts``, migration 0019,
kept by triggers) does the same.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Select,
    String,
    and_,
    func,
    literal_column,
    or_,
    select,
    text,
    union_all,
)
from sqlalchemy.orm import Session

from fleetcron.app import Actor, App
from fleetcron.core import validation as v
from fleetcron.errors import InvalidInput
from fleetcron.services.projects.scope import runs_in
from fleetcron.services.runs.reads import RUN_STATUSES, RunFilter
from fleetcron.services.runs.views import RunView
from fleetcron.store.schema import SEARCH_TEXT_SQL, Run

#: A count over more rows than this is shown as "more than" (counting every match of a
#: broad search over a million runs would cost more than the page itself).
COUNT_CAP = 10_000
MAX_LIMIT = 1000
GREP_MAX_CHARS = 200
#: The trigram index finds phrases of three characters or more; a shorter one scans.
FTS_MIN_CHARS = 3


@dataclass(frozen=True)
class SearchPage:
    """One page of runs, newest first. ``matched``: how many runs match (at most
    :data:`COUNT_CAP`; ``more`` when there are more). ``next_cursor``: give it back for the
    next page; None on the last one."""

    runs: Sequence[RunView]
    matched: int
    more: bool
    next_cursor: str | None


def encode_cursor(run: RunView) -> str:
    raw = f"{run.scheduled_for.isoformat()}|{run.id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, int]:
    """The (scheduled_for, id) a cursor names; a cursor not made here is refused."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        at, _, run_id = raw.partition("|")
        parsed = datetime.fromisoformat(at)
        if parsed.tzinfo is None:
            raise ValueError("no zone")
        return parsed, int(run_id)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise InvalidInput(
            f"cursor: {cursor[:40]!r} is not a cursor of this search",
            field="cursor",
            value=cursor[:40],
            allowed="the next_cursor of the previous page",
        ) from None


def _text_match(grep: str, dialect: str) -> ColumnElement[bool]:
    exact = or_(
        Run.stdout_head.contains(grep, autoescape=True),
        Run.stdout_tail.contains(grep, autoescape=True),
        Run.stderr_head.contains(grep, autoescape=True),
        Run.stderr_tail.contains(grep, autoescape=True),
        func.coalesce(Run.error, "").contains(grep, autoescape=True),
    )
    if dialect == "postgresql":
        # The index's own expression, so PostgreSQL finds the candidates through it.
        combined: ColumnElement[str] = literal_column(SEARCH_TEXT_SQL, type_=String())
        return and_(combined.contains(grep, autoescape=True), exact)
    if dialect == "sqlite" and len(grep) >= FTS_MIN_CHARS:
        # The FTS5 trigram index (migration 0019) finds the candidates: the phrase within
        # one column, as a substring. It folds case beyond ASCII, LIKE does not: the exact
        # test after it keeps what LIKE alone would find.
        phrase = '"' + grep.replace('"', '""') + '"'
        candidates = text("SELECT rowid FROM runs_fts WHERE runs_fts MATCH :phrase").bindparams(
            phrase=phrase
        )
        return and_(Run.id.in_(candidates), exact)
    return exact


def _filtered(
    query: Select[Any], f: RunFilter, dialect: str, scope: ColumnElement[bool] | None
) -> Select[Any]:
    if scope is not None:
        query = query.where(scope)
    if f.job:
        query = query.where(Run.job_name == f.job)
    if f.target:
        query = query.where(Run.target_name == f.target)
    statuses = [*(f.statuses or ()), *([f.status] if f.status else [])]
    for status in statuses:
        v.validate_choice(status, RUN_STATUSES, field="status")
    if statuses:
        query = query.where(Run.status.in_(statuses))
    if f.since:
        query = query.where(Run.scheduled_for >= f.since)
    if f.until:
        query = query.where(Run.scheduled_for < f.until)
    if f.grep:
        v.validate_length(f.grep, field="q", limit=GREP_MAX_CHARS)
        v.validate_search_text(f.grep, field="q")
        query = query.where(_text_match(f.grep, dialect))
    if f.run_ids is not None:
        query = query.where(Run.id.in_(f.run_ids))
    return query


def _has_indexed_filter(f: RunFilter) -> bool:
    """Whether the search names a job, a target, a status, a text or run ids: each has an
    index (or a list) of its own that yields the page in order."""
    return bool(f.job or f.target or f.status or f.statuses or f.grep or f.run_ids is not None)


def _merged_by_status(page_q: Select[Any], wanted: int) -> Select[Any]:
    """``page_q`` restricted to the newest ``wanted`` runs of each status, found through
    ``ix_runs_status_slot`` (``status, scheduled_for, id``: in page order), for a search
    with no filter of its own but the time range.

    PostgreSQL's ``ix_runs_scheduled`` holds no id, so the newest page with the id as tie-
    break reads and sorts every run of the newest slot time: 250,000 runs when 50 bulk
    jobs on 5,000 targets share a minute (about 200 ms). Per status the index is in page
    order, so the page is among the first ``wanted`` of one status or another: one short
    index scan per status, then a sort of at most ``wanted`` runs per status. SQLite's
    index on ``scheduled_for`` ends in the rowid, the id: already in page order."""
    per_status = [
        page_q.with_only_columns(Run.id)
        .where(Run.status == status)
        .order_by(Run.scheduled_for.desc(), Run.id.desc())
        .limit(wanted)
        for status in RUN_STATUSES
    ]
    candidates = union_all(*per_status).subquery("newest_per_status")
    return page_q.where(Run.id.in_(select(candidates.c.id)))


def _check_limit(limit: int) -> None:
    v.validate_int(limit, field="limit", low=1, high=MAX_LIMIT)


def _page_query(
    f: RunFilter,
    dialect: str,
    *,
    limit: int,
    cursor: str | None,
    offset: int,
    scope: ColumnElement[bool] | None,
) -> Select[Any]:
    """The statement of one page: the filters, then the runs after ``cursor`` (or after
    ``offset`` runs), newest first, one more than ``limit`` to tell whether a next page
    exists."""
    page_q = _filtered(select(Run), f, dialect, scope)
    if cursor:
        at, run_id = decode_cursor(cursor)
        # The first bound is a range on the indexes (all in page order); the second
        # only sorts out the runs of that same slot time.
        page_q = page_q.where(Run.scheduled_for <= at, or_(Run.scheduled_for < at, Run.id < run_id))
    if dialect == "postgresql" and not _has_indexed_filter(f):
        page_q = _merged_by_status(page_q, limit + 1 + (0 if cursor else offset))
    page_q = page_q.order_by(Run.scheduled_for.desc(), Run.id.desc()).limit(limit + 1)
    if offset and not cursor:
        page_q = page_q.offset(offset)
    return page_q


def _count_up_to_cap(
    session: Session, f: RunFilter, dialect: str, scope: ColumnElement[bool] | None
) -> int:
    """How many runs match, counted up to one past :data:`COUNT_CAP`."""
    capped = _filtered(select(Run.id), f, dialect, scope).limit(COUNT_CAP + 1).subquery()
    return session.scalar(select(func.count()).select_from(capped)) or 0


def search_runs(
    app: App,
    actor: Actor,
    f: RunFilter,
    *,
    limit: int = 50,
    cursor: str | None = None,
    offset: int = 0,
) -> SearchPage:
    """Runs matching every given filter, newest first: the page after ``cursor`` (or, for
    callers that page by number, after ``offset`` runs)."""
    actor.authorize_in("run.read")
    _check_limit(limit)
    dialect = app.db.dialect
    with app.db.read() as session:
        scope = runs_in(session, actor)
        page_q = _page_query(f, dialect, limit=limit, cursor=cursor, offset=offset, scope=scope)
        rows = [RunView.of(r) for r in session.scalars(page_q)]
        matched = _count_up_to_cap(session, f, dialect, scope)
    more_pages = len(rows) > limit
    rows = rows[:limit]
    return SearchPage(
        runs=rows,
        matched=min(matched, COUNT_CAP),
        more=matched > COUNT_CAP,
        next_cursor=encode_cursor(rows[-1]) if more_pages and rows else None,
    )


__all__ = ["COUNT_CAP", "SearchPage", "decode_cursor", "encode_cursor", "search_runs"]
