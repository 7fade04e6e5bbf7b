"""A rule's thresholds in the store: the failure streaks that decide whether a channel
hears of a target yet, and the targets held in an incident until enough successes.

``failures_before`` (N) is asked per channel when its messages are decided
(:mod:`fleetcron.services.alerts.incidents`): a target of a ``failing`` incident is in the
channel's view once its current streak of final failed slots (a failure that will be
retried is not final) reached N. ``successes_before`` (M) is the job's: a target whose
alert state recovered stays in its incident (held) until it has had as many consecutive
successes as the most demanding rule routing the job asks for. Pure decisions are in
:mod:`fleetcron.core.incidents` (``Thresholds``, ``reached_at``, ``released_at``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from fleetcron.core import incidents as core
from fleetcron.core.alerts import FAILURE_STATUSES, classify_run
from fleetcron.core.statuses import RunStatus
from fleetcron.store.schema import AlertState, Incident, IncidentTarget, Job, Run

_CHUNK = 500
#: (finished at, failed?) of one target's final verdicts, oldest first.
Verdicts = list[tuple[datetime, bool]]


def final_verdicts(
    session: Session, job_id: int, since: datetime, assignment_ids: Sequence[int]
) -> dict[int, Verdicts]:
    """Each assignment's final verdicts (a success, or a failure that will not be retried)
    finished at or after ``since``, oldest first: one statement per 500 assignments."""
    job = session.execute(select(Job.retries, Job.retry_on).where(Job.id == job_id)).first()
    retries, retry_on = (job.retries, tuple(job.retry_on or ())) if job else (0, ())
    wanted = sorted({*FAILURE_STATUSES, RunStatus.SUCCEEDED})
    found: defaultdict[int, Verdicts] = defaultdict(list)
    ids = sorted(assignment_ids)
    for start in range(0, len(ids), _CHUNK):
        rows = session.execute(
            select(Run.assignment_id, Run.finished_at, Run.status, Run.reason, Run.attempt)
            .where(
                Run.assignment_id.in_(ids[start : start + _CHUNK]),
                Run.job_id == job_id,
                Run.status.in_(wanted),
                Run.finished_at >= since,
            )
            .order_by(Run.finished_at, Run.id)
        )
        for aid, finished, status, reason, attempt in rows:
            verdict = classify_run(
                str(status), reason, attempt=attempt, retries=retries, retry_on=retry_on
            )
            if finished is not None and verdict is not None:
                found[aid].append((finished, verdict == "failure"))
    return dict(found)


def streaks_reached(verdicts: dict[int, Verdicts], failures: int) -> dict[int, datetime]:
    """Assignment -> when its current failure streak reached ``failures`` (those whose
    streak is shorter are left out)."""
    found: dict[int, datetime] = {}
    for aid, seen in verdicts.items():
        at = core.reached_at(seen, failures)
        if at is not None:
            found[aid] = at
    return found


@dataclass(frozen=True)
class Release:
    """A held target's row and when it leaves its incident."""

    row: IncidentTarget
    at: datetime


def held_releases(session: Session, needed: Callable[[int, int], int]) -> list[Release]:
    """The targets held in an open incident (their alert state recovered, the incident
    still counts them) that have now had the successes their job needs (``needed``: job
    and its project -> successes), with the moment of the last one. One statement finds
    the held rows; their successes are read per 500."""
    held = session.execute(
        select(IncidentTarget, Incident.job_id, Incident.project_id)
        .join(Incident, Incident.id == IncidentTarget.incident_id)
        .join(AlertState, AlertState.assignment_id == IncidentTarget.assignment_id)
        .where(
            Incident.status == "open",
            Incident.cause != "halted",
            IncidentTarget.recovered_at.is_(None),
            AlertState.state == "ok",
        )
    ).all()
    if not held:
        return []
    successes = _successes_after(session, [row for row, _, _ in held])
    releases: list[Release] = []
    for row, job_id, project_id in held:
        after = [at for at in successes.get(row.assignment_id, ()) if at > row.last_seen_at]
        at = core.released_at(after, needed(job_id, project_id))
        if at is not None:
            releases.append(Release(row, at))
    return releases


def _successes_after(session: Session, rows: Iterable[IncidentTarget]) -> dict[int, list[datetime]]:
    listed = list(rows)
    since = min(r.last_seen_at for r in listed)
    ids = sorted({r.assignment_id for r in listed})
    found: defaultdict[int, list[datetime]] = defaultdict(list)
    for start in range(0, len(ids), _CHUNK):
        for aid, finished in session.execute(
            select(Run.assignment_id, Run.finished_at).where(
                Run.assignment_id.in_(ids[start : start + _CHUNK]),
                Run.status == RunStatus.SUCCEEDED,
                Run.finished_at > since,
            )
        ):
            if finished is not None:
                found[aid].append(finished)
    return dict(found)


__all__ = ["Release", "Verdicts", "final_verdicts", "held_releases", "streaks_reached"]
