"""The newest run of every target, for the targets list, in one statement.

The list used to ask for each target's newest run by name, with a count, one target at a
time: two statements per target, each filtering ``runs`` on a column without an index,
so 5,000 targets over a million runs took minutes. This reads, for each target, the
newest run that started, through the ``(target_id, started_at)`` index: one index probe
per target, in one statement. Slots that never started (missed, skipped, queued) do not
count as the target's last run.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select

from fleetcron.app import Actor, App
from fleetcron.services.targets.views import LastRun
from fleetcron.store.schema import Run, Target

CHUNK = 900
"""Target ids per statement (below SQLite's default limit of bound parameters)."""


def last_started_runs(app: App, actor: Actor, target_ids: Iterable[int]) -> dict[int, LastRun]:
    """``{target id: its newest run with a start time}``; targets that never started a
    run are absent."""
    actor.authorize_in("run.read")
    ids = list(target_ids)
    found: dict[int, LastRun] = {}
    with app.db.read() as session:
        for start in range(0, len(ids), CHUNK):
            chunk = ids[start : start + CHUNK]
            newest = (
                select(Run.id)
                .where(Run.target_id == Target.id, Run.started_at.is_not(None))
                .order_by(Run.started_at.desc(), Run.id.desc())
                .limit(1)
                .correlate(Target)
                .scalar_subquery()
            )
            runs = session.scalars(
                select(Run).join(Target, Run.id == newest).where(Target.id.in_(chunk))
            ).all()
            for run in runs:
                if run.target_id is not None:
                    found[run.target_id] = LastRun.of(run)
    return found
