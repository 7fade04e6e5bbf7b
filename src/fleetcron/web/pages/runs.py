"""What ran: the runs list with its filters, one run with its output, and the audit log."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import HTMLResponse, Response

from fleetcron.core.statuses import ACTIVE
from fleetcron.errors import FleetcronError, InvalidInput
from fleetcron.services import audit as audit_svc
from fleetcron.services.audit import AuditFilter, AuditView
from fleetcron.services.jobs import edit as jobs_svc
from fleetcron.services.runs import reads as svc
from fleetcron.services.runs import views as run_views
from fleetcron.services.runs.reads import RUN_STATUSES, RunFilter
from fleetcron.services.runs.search import search_runs
from fleetcron.services.runs.views import RunView
from fleetcron.services.targets import reads as target_reads
from fleetcron.web.api.runs import MAX_ID, live_source, local_stop
from fleetcron.web.deps import Caller, requires, the_app
from fleetcron.web.pages.forms import Posted, local_time, page, redirect
from fleetcron.web.pages.history import KeysetPager
from fleetcron.web.pages.paging import OffsetPager

router = APIRouter(include_in_schema=False)

PAGE_SIZE = 50
Text = Annotated[str, Query(max_length=200)]
Offset = Annotated[int, Query(ge=0, le=10_000_000)]


#: Characters of each stream the runs list shows when its output is opened (the end of it).
LIST_EXCERPT = 2000


@dataclass(frozen=True)
class Excerpt:
    """One output stream of a run as stored: all of it, or its head and tail."""

    head: str
    tail: str
    size: int
    truncated: bool

    @classmethod
    def of(cls, run: RunView, stream: str) -> Excerpt:
        return cls(
            head=getattr(run, f"{stream}_head"),
            tail=getattr(run, f"{stream}_tail"),
            size=getattr(run, f"{stream}_bytes"),
            truncated=getattr(run, f"{stream}_truncated"),
        )

    @property
    def whole(self) -> str:
        """The complete output when nothing was dropped (head and tail are adjacent)."""
        return self.head + self.tail

    @property
    def omitted(self) -> int:
        return max(0, self.size - len(self.head.encode()) - len(self.tail.encode()))

    @property
    def kept(self) -> str:
        """What the runs list shows the end of: everything when nothing was dropped, else
        the kept tail (the run's page has the head, the gap and the tail)."""
        return self.tail if self.truncated else self.whole

    @property
    def last_text(self) -> str:
        """The last :data:`LIST_EXCERPT` characters of :attr:`kept`."""
        return self.kept[-LIST_EXCERPT:]

    @property
    def cut(self) -> bool:
        """Whether the runs list shows less than the run's page does."""
        return self.truncated or len(self.kept) > LIST_EXCERPT

    @property
    def shown_chars(self) -> int:
        return len(self.last_text)

    @property
    def last_line(self) -> str:
        """The last line with text in it: the runs list's one-line hint of the output."""
        for line in reversed(self.kept[-4096:].splitlines()):
            if line.strip():
                return line.strip()
        return ""


def output_hint(run: RunView) -> str:
    """The one line of output the runs list shows before it is opened: the last line of
    stderr for a run that did not succeed (where the reason usually is), else of stdout,
    else of whichever stream has text."""
    out, err = Excerpt.of(run, "stdout"), Excerpt.of(run, "stderr")
    first, second = (err, out) if run.status != "succeeded" else (out, err)
    return first.last_line or second.last_line


def _filter_query(**values: str) -> dict[str, str]:
    return {key: value for key, value in values.items() if value}


@router.get("/runs", response_class=HTMLResponse)
def list_runs(
    request: Request,
    caller: Annotated[Caller, Depends(requires("run.read"))],
    target: Text = "",
    job: Text = "",
    status: Text = "",
    since: Text = "",
    until: Text = "",
    q: Text = "",
    offset: Offset = 0,
    cursor: Text = "",
    before: Offset = 0,
) -> HTMLResponse:
    app = the_app(request)
    query = _filter_query(target=target, job=job, status=status, since=since, until=until, q=q)
    error = ""
    rows: list[RunView] = []
    found = None
    try:
        f = RunFilter(
            job=job or None,
            target=target or None,
            status=status or None,
            since=local_time(request, since, field="since"),
            until=local_time(request, until, field="until"),
            grep=q or None,
        )
        found = search_runs(
            app, caller.actor, f, limit=PAGE_SIZE, cursor=cursor or None, offset=offset
        )
        rows = list(found.runs)
    except InvalidInput as exc:
        error = exc.message
    return page(
        request,
        "runs.html",
        status_code=422 if error else 200,
        runs=rows,
        pager=KeysetPager(query, offset + before, len(rows), found),
        filters=dict(target=target, job=job, status=status, since=since, until=until, q=q),
        filtered=bool(query),
        error=error,
        statuses=RUN_STATUSES,
        target_names=target_reads.target_names(app, caller.actor),
        job_names=jobs_svc.job_names(app, caller.actor),
        excerpt=Excerpt.of,
        output_hint=output_hint,
    )


#: Without JavaScript, a page of an active run reloads itself this often (seconds).
REFRESH_S = 5


#: A run's number in a page's address, bounded as in the API (the database refuses more).
RunId = Annotated[int, PathParam(ge=1, le=MAX_ID)]


@router.get("/runs/{run_id}", response_class=HTMLResponse)
def show_run(
    run_id: RunId, request: Request, caller: Annotated[Caller, Depends(requires("run.read"))]
) -> HTMLResponse:
    app = the_app(request)
    run = run_views.show_run(app, caller.actor, run_id)
    live = None
    elapsed = None
    if run.status in ACTIVE:
        # The output so far; the page's script follows it from ``live.offset`` on.
        live = svc.follow_output(app, caller.actor, run_id, 0, live=live_source(request))
        if run.started_at is not None:
            elapsed = max(0, int((app.now() - run.started_at).total_seconds()))
    return page(
        request,
        "run.html",
        run=run,
        stdout=Excerpt.of(run, "stdout"),
        stderr=Excerpt.of(run, "stderr"),
        live=live,
        elapsed=elapsed,
        here=run.node == app.node_name,
        this_node=app.node_name,
        refresh_s=REFRESH_S,
        snapshot_age=(
            int((app.now() - live.as_of).total_seconds())
            if live is not None and live.source == "snapshot" and live.as_of is not None
            else None
        ),
    )


@router.get("/runs/{run_id}/stop", response_class=HTMLResponse)
def confirm_stop(
    run_id: RunId, request: Request, caller: Annotated[Caller, Depends(requires("run.stop"))]
) -> Response:
    """The confirmation before a stop: which run of which job on which target, running
    since when and on which node, and what a stop does to it."""
    app = the_app(request)
    try:
        facts = svc.stop_facts(app, caller.actor, run_id)
    except FleetcronError as exc:
        return redirect(f"/runs/{run_id}", exc.message, error=True)
    elapsed = (
        max(0, int((app.now() - facts.started_at).total_seconds()))
        if facts.started_at is not None
        else None
    )
    return page(request, "run_stop.html", facts=facts, elapsed=elapsed)


@router.post("/runs/{run_id}/stop", response_class=HTMLResponse)
def stop_run(
    run_id: RunId,
    request: Request,
    form: Posted,
    caller: Annotated[Caller, Depends(requires("run.stop"))],
) -> Response:
    home = f"/runs/{run_id}"
    try:
        outcome = svc.stop_run(
            the_app(request), caller.actor, run_id, local_stop=local_stop(request)
        )
    except FleetcronError as exc:
        return redirect(home, exc.message, error=True)
    if outcome.status == "cancelled":
        return redirect(home, f"Run #{run_id} was cancelled before it started.")
    if outcome.immediate:
        return redirect(home, f"Stopping run #{run_id}: its process group is being killed.")
    return redirect(
        home,
        f"Stop of run #{run_id} requested; node {outcome.node} kills it on its next tick.",
    )


def readable(value: Any) -> str:
    """One audit detail value: text as is, anything else as compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


@router.get("/audit", response_class=HTMLResponse)
def audit_log(
    request: Request,
    caller: Annotated[Caller, Depends(requires("audit.read"))],
    actor: Text = "",
    action: Text = "",
    target: Text = "",
    since: Text = "",
    offset: Offset = 0,
) -> HTMLResponse:
    app = the_app(request)
    query = _filter_query(actor=actor, action=action, target=target, since=since)
    error = ""
    events: list[AuditView] = []
    total = 0
    try:
        start = local_time(request, since, field="since")
        f = AuditFilter(
            actor=actor or None, action=action or None, target=target or None, since=start
        )
        events, total = audit_svc.list_event_views(
            app, caller.actor, f, limit=PAGE_SIZE, offset=offset
        )
    except InvalidInput as exc:
        error = exc.message
    return page(
        request,
        "audit.html",
        status_code=422 if error else 200,
        events=events,
        details={e.id: [(k, readable(val)) for k, val in sorted(e.detail.items())] for e in events},
        pager=OffsetPager(offset, len(events), total, query, PAGE_SIZE),
        filters={"actor": actor, "action": action, "target": target, "since": since},
        filtered=bool(query),
        error=error,
    )
