"""Runs: ask for a run now, stop it, follow its output (the views of what ran are in
:mod:`fleetcron.services.runs.views`).

"Run now" records a ``queued`` run (trigger ``manual``); the scheduler that may run jobs
picks it up on its next tick, so a request made on any node never runs outside the
scheduler and its guard.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from sqlalchemy import select

from fleetcron.app import Actor, App
from fleetcron.core import statuses
from fleetcron.core.statuses import RunStatusName
from fleetcron.core.stopping import StopFacts
from fleetcron.errors import Conflict, NotFound
from fleetcron.executors.output import LiveOutput
from fleetcron.services.audit import AuditNote, audited
from fleetcron.services.fleet.assignments import get_target
from fleetcron.services.jobs.edit import get_job
from fleetcron.services.jobs.plan import chosen_assignments, rolled_out_run
from fleetcron.services.jobs.selection import Selection
from fleetcron.services.projects.scope import authorize_job_object, place, uniform
from fleetcron.store.run_writes import queue_manual_runs, request_stop
from fleetcron.store.schema import Run

RunStatus = RunStatusName
"""The status strings an API filter accepts (the vocabulary lives in ``core/statuses.py``)."""
RUN_STATUSES: tuple[str, ...] = tuple(s.value for s in statuses.ALL)
"""Plain strings (not enum members), so the CLI choices and the page list show the values."""
FINISHED_STATUSES = frozenset(statuses.TERMINAL)


def request_run(
    app: App,
    actor: Actor,
    job: str,
    *,
    target: str | None = None,
    selection: Selection | None = None,
    all_at_once: bool = False,
) -> list[int]:
    """Ask for a manual run of ``job`` on one target, or on every enabled target of it, or
    on the targets a :class:`~fleetcron.services.jobs.selection.Selection` names (audited with
    it; a selection that matches nothing queues nothing and raises InvalidInput).

    A job with rollout options runs through them as a scheduled slot does (canaries first,
    batches, the stop threshold): its rows are recorded ``pending`` and the owner's
    rollout step starts them (``store/run_rollouts.py``); ``all_at_once`` skips the
    rollout (audited as ``rollout: all_at_once``) and queues every run at once. The
    targets and the policy are chosen by ``services/jobs/plan.py``, as ``job plan`` shows.

    Naming a target runs it there even when the job is paused on that target."""
    note = AuditNote("job.run", job_name=job, target_name=target)
    with audited(app, actor, note) as session:
        actor.authorize_in("job.run")
        the_job = get_job(session, job, place(session, actor))
        note.job_id = the_job.id
        if target is not None:
            note.target_id = get_target(session, target, the_job.project_id, shared=True).id
        if selection is not None and selection.given:
            note.detail["selection"] = selection.audit_detail()
        assignments = chosen_assignments(session, the_job, target=target, selection=selection)
        rolled_out = rolled_out_run(the_job, all_at_once=all_at_once)
        run_ids = queue_manual_runs(
            session,
            the_job,
            assignments,
            now=app.now(),
            node=app.node_name,
            actor=actor.name,
            rolled_out=rolled_out,
        )
        if rolled_out:
            note.detail["rollout"] = "job"
        elif all_at_once:
            note.detail["rollout"] = "all_at_once"
        note.detail.update({"runs": len(run_ids)})
        return run_ids


@dataclass(frozen=True)
class RunFilter:
    job: str | None = None
    target: str | None = None
    status: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    grep: str | None = None
    run_ids: Sequence[int] | None = None
    statuses: Sequence[str] | None = None


def run_row(app: App, actor: Actor, run_id: int, *, action: str = "run.read") -> Run:
    """The row of one run, for the operations on it here (stop, follow) and for
    :func:`~fleetcron.services.runs.views.show_run`; the adapters take that view. A run of
    a project the actor does not see does not exist for it."""
    # Weighed first in the project the actor acts in, so that another project's run is
    # answered as a missing one is.
    actor.authorize_in(action)
    with app.db.read() as session:
        run = session.get(Run, run_id)
        if run is None:
            raise NotFound("run", run_id)
        authorize_job_object(session, actor, action, job_id=run.job_id, kind="run", ident=run_id)
        return run


# -- stopping and following a run -------------------------------------------------------------


@dataclass(frozen=True)
class StopOutcome:
    """What a stop request did."""

    run_id: int
    #: ``cancelled``: the run had not started and never will; ``running``: the node
    #: running it kills it (at once when ``immediate``, else on its next tick).
    status: str
    node: str
    immediate: bool
    #: The run as the stop found it (job, target, start, who asked first and when).
    facts: StopFacts


def stop_facts(app: App, actor: Actor, run_id: int) -> StopFacts:
    """What stopping ``run_id`` would touch and do, for the confirmation an operator sees
    first (the page's "Stop…", ``GET /api/v1/runs/{id}/stop``). Raises ``NotFound``, or
    ``Conflict`` for a run that has ended, as the stop itself would."""
    run = run_row(app, actor, run_id, action="run.stop")
    if run.status not in statuses.STOPPABLE:
        raise Conflict(
            f"run {run_id} has already ended ({run.status}); only a queued or running run "
            "can be stopped",
            field="run",
        )
    return facts_of(run)


def facts_of(run: Run) -> StopFacts:
    """A run's stop facts as its row holds them."""
    return StopFacts(
        run_id=run.id,
        job=run.job_name,
        target=run.target_name,
        status=str(run.status),
        node=run.node,
        started_at=run.started_at,
        command=run.command,
        requested_by=run.stop_requested_by,
        requested_at=run.stop_requested_at,
    )


def stop_run(
    app: App,
    actor: Actor,
    run_id: int,
    *,
    local_stop: Callable[[int, str], bool] | None = None,
) -> StopOutcome:
    """Stop a queued or running run (operator), audited as ``run.stop``.

    The request is written to the run row in any case, so the node that runs it acts on it
    whichever node (or CLI) it was made on; ``local_stop`` is this process's scheduler
    (``Scheduler.stop``), which kills the run at once when it is the one running it.
    Raises ``NotFound``, or ``Conflict`` (exit 2, HTTP 409) for a run that has ended."""
    note = AuditNote("run.stop", detail={"run_id": run_id})
    with audited(app, actor, note) as session:
        actor.authorize_in("run.stop")
        job_id = session.scalar(select(Run.job_id).where(Run.id == run_id))
        if job_id is None:
            raise NotFound("run", run_id)
        authorize_job_object(session, actor, "run.stop", job_id=job_id, kind="run", ident=run_id)
        before = session.scalar(select(Run.status).where(Run.id == run_id))
        run = request_stop(session, run_id, actor.name, app.now())
        note.job_id, note.job_name = run.job_id, run.job_name
        note.target_id, note.target_name = run.target_id, run.target_name
        note.detail.update({"was": str(before), "node": run.node})
        status, node = str(run.status), run.node
        facts = facts_of(run)
    immediate = False
    if status == statuses.RunStatus.RUNNING and local_stop is not None:
        immediate = local_stop(run_id, actor.name)
    return StopOutcome(run_id=run_id, status=status, node=node, immediate=immediate, facts=facts)


class LiveEntry(Protocol):
    """A run this process runs now (``scheduler.live.LiveRun``), as followers see it."""

    @property
    def output(self) -> LiveOutput: ...

    @property
    def node(self) -> str: ...

    @property
    def started_at(self) -> datetime: ...

    @property
    def stopped_by(self) -> str | None: ...


class LiveSource(Protocol):
    """The live runs of this process (``scheduler.live.LiveRuns``)."""

    def get(self, run_id: int) -> LiveEntry | None: ...


@dataclass(frozen=True)
class LiveView:
    """The output of a run from byte ``since`` on.

    ``source``: ``live`` (this process runs it: the output as it comes), ``snapshot``
    (another process runs it: the tail it last wrote to the database, ``as_of``),
    ``recorded`` (it has ended: its recorded output, :func:`recorded_output`), or ``none``
    (not started yet, or nothing printed yet on another node). ``gap`` bytes that are no
    longer kept were skipped at ``gap_at`` (characters into ``text``)."""

    run_id: int
    status: str
    node: str
    started_at: datetime | None
    finished_at: datetime | None
    running: bool
    source: str
    text: str
    offset: int
    gap: int
    gap_at: int
    total: int
    as_of: datetime | None
    stop_requested_by: str | None


@dataclass(frozen=True)
class RecordedChunk:
    """A piece of a run's output for a follower (see :func:`recorded_output`)."""

    text: str
    offset: int
    gap: int
    gap_at: int
    total: int


def _stream(run: Run, name: str) -> tuple[bytes, int, bytes]:
    """A recorded stream as (head, bytes not kept in the middle, tail)."""
    total: int = getattr(run, f"{name}_bytes")
    head: bytes = getattr(run, f"{name}_head").encode()
    tail: bytes = getattr(run, f"{name}_tail").encode()
    if not getattr(run, f"{name}_truncated"):
        return head + tail, 0, b""
    return head, max(total - len(head) - len(tail), 0), tail


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def recorded_output(run: Run, since: int) -> RecordedChunk:
    """The recorded output of an ended run from byte ``since`` of its live stream on: what
    a follower who saw ``since`` bytes while it ran has not seen yet.

    The live stream is stdout and stderr interleaved; what is recorded keeps each stream's
    head and tail apart. A run that wrote to one stream (the common case): that stream is
    the live stream, so the answer continues exactly where the follower was, the omitted
    middle (if any) as the ``gap``. A run that wrote to both: from byte 0, stdout then
    stderr, each omitted middle marked in the text as ``runs show`` shows it; from further
    on, which bytes the follower missed cannot be told, so the answer has no text and the
    rest as its ``gap`` (read ``GET /runs/{id}`` or ``runs show``)."""
    streams = [s for s in ("stdout", "stderr") if getattr(run, f"{s}_bytes")]
    total = sum(getattr(run, f"{s}_bytes") for s in streams)
    since = min(max(since, 0), total)
    if len(streams) == 2:
        if since:
            return RecordedChunk("", total, total - since, 0, total)
        parts = []
        for name in streams:
            head, omitted, tail = _stream(run, name)
            middle = f"\n[... {omitted} bytes omitted ...]\n" if omitted else ""
            parts.append(_decode(head) + middle + _decode(tail))
        return RecordedChunk("".join(parts), total, 0, 0, total)
    if not streams:
        return RecordedChunk("", since, 0, 0, total)
    head, omitted, tail = _stream(run, streams[0])
    tail_at = len(head) + omitted
    if since < len(head):
        first = _decode(head[since:])
        return RecordedChunk(
            first + _decode(tail), total, omitted, len(first) if omitted else 0, total
        )
    if since < tail_at:
        return RecordedChunk(_decode(tail), total, tail_at - since, 0, total)
    return RecordedChunk(_decode(tail[since - tail_at :]), total, 0, 0, total)


def follow_output(
    app: App, actor: Actor, run_id: int, since: int, *, live: LiveSource | None = None
) -> LiveView:
    """What a follower of ``run_id`` sees next (the run page's poll, ``runs tail``).

    A run this process runs is answered from its live entry alone, without reading the
    database (a page open on each of a thousand runs costs no transaction); any other from
    its row."""
    entry = live.get(run_id) if live is not None else None
    if entry is not None and uniform(actor):
        actor.authorize("run.read")
        return _live_view(app, run_id, entry, since)
    run = run_row(app, actor, run_id)
    if entry is not None:
        return _live_view(app, run_id, entry, since)
    source, chunk, as_of = "none", RecordedChunk("", since, 0, 0, since), None
    if run.status in statuses.TERMINAL:
        source, chunk = "recorded", recorded_output(run, since)
    elif run.status == "running" and run.live_output is not None and run.live_bytes is not None:
        source, chunk, as_of = "snapshot", _snapshot_output(run, since), run.live_at
    return LiveView(
        run_id=run.id,
        status=str(run.status),
        node=run.node,
        started_at=run.started_at,
        finished_at=run.finished_at,
        running=run.status in statuses.ACTIVE,
        source=source,
        text=chunk.text,
        offset=chunk.offset,
        gap=chunk.gap,
        gap_at=chunk.gap_at,
        total=chunk.total,
        as_of=as_of,
        stop_requested_by=run.stop_requested_by,
    )


def _live_view(app: App, run_id: int, entry: LiveEntry, since: int) -> LiveView:
    """A run this process runs, from its output as it comes."""
    chunk = entry.output.read(since)
    return LiveView(
        run_id=run_id,
        status=str(statuses.RunStatus.RUNNING),
        node=entry.node,
        started_at=entry.started_at,
        finished_at=None,
        running=True,
        source="live",
        text=chunk.text,
        offset=chunk.offset,
        gap=chunk.gap,
        gap_at=chunk.gap_at,
        total=chunk.total,
        as_of=app.now(),
        stop_requested_by=entry.stopped_by,
    )


def _snapshot_output(run: Run, since: int) -> RecordedChunk:
    """A run another process runs: the tail of its output it last wrote to the row, from
    byte ``since`` on (what is no longer in the tail is a gap)."""
    assert run.live_output is not None and run.live_bytes is not None
    data = run.live_output.encode()
    start = run.live_bytes - len(data)
    since = min(max(since, 0), run.live_bytes)
    if since >= start:
        text = data[since - start :].decode("utf-8", errors="replace")
        return RecordedChunk(text, run.live_bytes, 0, 0, run.live_bytes)
    return RecordedChunk(run.live_output, run.live_bytes, start - since, 0, run.live_bytes)
