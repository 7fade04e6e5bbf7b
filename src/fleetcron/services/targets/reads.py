"""Targets read: the list (whole, paged by name, or read a page at a time), the counts
the dashboard shows, names and labels for pickers and filters, one target with its
assignments, and a target's individual jobs. Each read authorizes ``target.read`` and
reads only the columns its caller shows. The writes are in
:mod:`fleetcron.services.targets.edit`."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from fleetcron.app import Actor, App
from fleetcron.core import validation as v
from fleetcron.core.labels import format_selector, parse_selector, selector_matches
from fleetcron.errors import InvalidInput
from fleetcron.services.fleet.assignments import get_target
from fleetcron.services.projects.scope import place, target_reaches
from fleetcron.services.targets.views import AssignmentView, TargetView
from fleetcron.store.schema import Assignment, Job, Target


def list_targets(app: App, actor: Actor) -> list[TargetView]:
    actor.authorize_in("target.read")
    with app.db.read() as session:
        query = select(Target).where(target_reaches(place(session, actor)))
        return [TargetView.of(t) for t in session.scalars(query.order_by(Target.name))]


def list_targets_page(
    app: App, actor: Actor, *, limit: int | None, offset: int = 0, name: str | None = None
) -> tuple[list[TargetView], int]:
    """One page of the targets by name (all of them from ``offset`` when ``limit`` is
    None), with how many match: ``name`` keeps the targets whose name contains it,
    ignoring case. Two statements, whatever the size of the fleet."""
    actor.authorize_in("target.read")
    if limit is not None and limit < 1:
        raise InvalidInput(
            f"limit: must be at least 1, got {limit}", field="limit", value=limit, allowed=">= 1"
        )
    if offset < 0:
        raise InvalidInput(
            f"offset: must be 0 or more, got {offset}", field="offset", value=offset, allowed=">= 0"
        )
    if name:
        v.validate_search_text(name, field="q")
    query = select(Target)
    counted = select(func.count(Target.id))
    if name:
        matches = func.lower(Target.name).contains(name.lower(), autoescape=True)
        query, counted = query.where(matches), counted.where(matches)
    with app.db.read() as session:
        seen = target_reaches(place(session, actor))
        query, counted = query.where(seen), counted.where(seen)
        total = session.scalar(counted) or 0
        rows = session.scalars(query.order_by(Target.name).offset(offset).limit(limit))
        return [TargetView.of(t) for t in rows], int(total)


def count_targets(app: App, actor: Actor) -> tuple[int, int]:
    """How many targets there are, and how many of them are paired: one statement (what
    the dashboard shows, without loading every target)."""
    actor.authorize_in("target.read")
    with app.db.read() as session:
        total, paired = session.execute(
            select(
                func.count(Target.id), func.count(Target.id).filter(Target.paired.is_(True))
            ).where(target_reaches(place(session, actor)))
        ).one()
    return int(total), int(paired or 0)


def target_names(app: App, actor: Actor) -> list[str]:
    """Every target's name, sorted, in one statement that reads only the names."""
    actor.authorize_in("target.read")
    with app.db.read() as session:
        seen = target_reaches(place(session, actor))
        return list(session.scalars(select(Target.name).where(seen).order_by(Target.name)))


def paired_target_labels(app: App, actor: Actor) -> list[tuple[str, dict[str, str]]]:
    """The name and labels of every paired target, by name (a bulk job form's target
    picker): one statement that reads those two columns, not the whole rows."""
    actor.authorize_in("target.read")
    with app.db.read() as session:
        seen = target_reaches(place(session, actor))
        rows = session.execute(
            select(Target.name, Target.labels)
            .where(Target.paired.is_(True), seen)
            .order_by(Target.name)
        )
        return [(name, dict(labels or {})) for name, labels in rows]


#: Names per ``IN (...)`` list (SQLite allows 32,766 parameters; stay well below).
NAMES_CHUNK = 900


def labels_of(app: App, actor: Actor, names: Iterable[str]) -> dict[str, dict[str, str]]:
    """The labels of the named targets (missing names are left out): the names and labels
    columns only, :data:`NAMES_CHUNK` names a statement."""
    actor.authorize_in("target.read")
    wanted = sorted(set(names))
    found: dict[str, dict[str, str]] = {}
    with app.db.read() as session:
        seen = target_reaches(place(session, actor))
        for start in range(0, len(wanted), NAMES_CHUNK):
            chunk = wanted[start : start + NAMES_CHUNK]
            query = select(Target.name, Target.labels).where(Target.name.in_(chunk), seen)
            rows = session.execute(query)
            found.update((name, dict(labels or {})) for name, labels in rows)
    return found


#: Targets per read of :func:`iter_targets`.
TARGETS_READ_PAGE = 500


def iter_targets(
    app: App, actor: Actor, *, page: int = TARGETS_READ_PAGE
) -> Iterator[list[TargetView]]:
    """Every target by name, ``page`` at a time, each page its own short read (keyset by
    name, so a target added or removed meanwhile neither repeats nor hides another): what
    lists the whole fleet without holding it in one transaction."""
    actor.authorize_in("target.read")
    after: str | None = None
    with app.db.read() as session:
        seen = target_reaches(place(session, actor))
    while True:
        query = select(Target).where(seen).order_by(Target.name).limit(page)
        if after is not None:
            query = query.where(Target.name > after)
        with app.db.read() as session:
            rows = [TargetView.of(t) for t in session.scalars(query)]
        if rows:
            yield rows
        if len(rows) < page:
            return
        after = rows[-1].name


def show_target(app: App, actor: Actor, name: str) -> tuple[TargetView, list[AssignmentView]]:
    """One target and its assignments, each with the zone its job runs in there."""
    actor.authorize_in("target.read")
    default_zone = app.settings.timezone
    with app.db.read() as session:
        pid = place(session, actor)
        target = get_target(session, name, pid, shared=True)
        # Only this project's jobs: another project's on a shared target stay unseen.
        mine = select(Job.id).where(Job.project_id == pid)
        assignments = session.scalars(
            select(Assignment)
            .where(Assignment.target_id == target.id, Assignment.job_id.in_(mine))
            .order_by(Assignment.id)
        )
        views = [AssignmentView.of(a, target, default_zone) for a in assignments]
        return TargetView.of(target), views


def individual_jobs(app: App, actor: Actor, name: str) -> list[str]:
    """Names of the target's individual jobs (what ``rm --with-jobs`` would remove)."""
    actor.authorize_in("target.read")
    with app.db.read() as session:
        pid = place(session, actor)
        target = get_target(session, name, pid, shared=True)
        query = select(Job.name).where(Job.target_id == target.id, Job.project_id == pid)
        return list(session.scalars(query.order_by(Job.name)))


def matching_selector(session: Session, text: str) -> str:
    """``text`` as a selector in its normal form, once some target carries its labels
    (InvalidInput naming ``selector`` otherwise): what a silence or a blackout window
    scoped by labels must match."""
    wanted = parse_selector(text)
    for labels in session.scalars(select(Target.labels)):
        if selector_matches(wanted, labels or {}):
            return format_selector(wanted)
    raise InvalidInput(
        f"selector: {text!r} matches no target (no target carries these labels)",
        field="selector",
        value=text,
        allowed="key=value labels of existing targets",
    )
