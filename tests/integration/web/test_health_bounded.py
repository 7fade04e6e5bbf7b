"""Health lists a bounded number of lines per cause and keeps the counts whole, on SQLite and
PostgreSQL: the service, ``/api/v1/health?limit=``, the dashboard's *Needs attention* (its
"more" lines lead to lists that hold every line left out) and ``fleetcron health --limit``.

Runs are recorded through the store's write path (``RunStore.claim_due`` then ``finish``)
with the outcome an executor reports. The fleet (bulk jobs ``ping`` and ``sync`` on every
target): five targets ``down1``-``down5`` refuse every connection (unreachable), ``ping``
exits 1 on ``box1``-``box4`` and ``sync`` on ``box1``-``box2`` (six failing job × target),
``fine`` succeeds. The fixture clock starts at 2026-03-02 09:00:30 UTC.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import cast, get_args

import pytest

from cli_env import point_the_cli_at
from fixtures.app import FakeClock
from fleetcron.app import SYSTEM, Actor, App
from fleetcron.cli.main import cli
from fleetcron.cli.output import run_cli
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.errors import InvalidInput
from fleetcron.executors.base import EMPTY_OUTPUT, ExecResult, Status
from fleetcron.services.health import report as health
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.store.runs import RunStore
from fleetcron.web.pages import views
from integration.web.conftest import bearer, log_in, new_client, token_for
from sql_statements import statements

REFUSED = "connection refused: 127.0.0.1:22413"
DOWN = [f"down{i}" for i in range(1, 6)]
BOXES = [f"box{i}" for i in range(1, 5)]
#: (job, target) -> the status its runs end with; every other pair succeeds.
OUTCOMES: dict[tuple[str, str], str] = {
    **{(job, t): "connect_error" for t in DOWN for job in ("ping", "sync")},
    **{("ping", t): "failed" for t in BOXES},
    **{("sync", t): "failed" for t in BOXES[:2]},
}
FAILING = sorted(
    [(job, t) for (job, t), status in OUTCOMES.items() if status == "failed"]
)  # by job, then target: the order of the failing lines


def record(app: App, clock: FakeClock, outcome: Callable[[str, str], str]) -> int:
    """Claim the slots due now through the store and finish each run with
    ``outcome(job, target)``; the number of runs recorded."""
    store = RunStore(app.db, node=app.node_name, clock=clock)
    results = []
    for d in store.claim_due(clock.now).dispatches:
        status = outcome(d.job_name, d.target_name)
        assert status in get_args(Status)
        code = 0 if status == "succeeded" else (1 if status == "failed" else None)
        error = REFUSED if status == "connect_error" else None
        results.append(
            (
                d.run_id,
                ExecResult(
                    cast(Status, status),
                    code,
                    EMPTY_OUTPUT,
                    EMPTY_OUTPUT,
                    clock.now,
                    clock.now + timedelta(milliseconds=5),
                    5,
                    error,
                ),
            )
        )
    assert store.finish(results) == []
    return len(results)


def fleet(app: App, clock: FakeClock, outcomes: Mapping[tuple[str, str], str]) -> None:
    """Every target named in ``outcomes`` plus ``fine``, bulk jobs ``ping`` and ``sync`` on
    all of them, two slots recorded; then the jobs are paused, so that the clock may move
    on without their later slots counting as late."""
    names = sorted({t for _, t in outcomes} | {"fine"})
    for name in names:
        targets.add_target(app, SYSTEM, TargetSpec(name, TargetKind.LOCAL))
    for job in ("ping", "sync"):
        jobs.add_job(app, SYSTEM, job, JobSpec("* * * * *", f"echo {job}"), bulk=True)
    clock.advance(seconds=31)
    for _ in range(2):
        assert record(app, clock, lambda j, t: outcomes.get((j, t), "succeeded")) == 2 * len(names)
        clock.advance(minutes=1)
    for job in ("ping", "sync"):
        jobs.set_enabled(app, SYSTEM, job, False)


@pytest.fixture
def failing_fleet(app: App, clock: FakeClock) -> None:
    fleet(app, clock, OUTCOMES)


def test_a_bounded_summary_lists_the_first_lines_of_each_cause_and_counts_them_all(
    app: App, viewer: Actor, failing_fleet: None
) -> None:
    bounded = health.summary(app, viewer, limit=3)
    everything = health.summary(app, viewer, limit=None)

    # Nothing left out of the full view: every unreachable target, every failing pair.
    assert [(g.kind, g.target) for g in everything.grouped] == [
        *(("unreachable", t) for t in DOWN),
        *(("failing", t) for _, t in FAILING),
    ]
    # The bounded one lists the first three of each cause, in the same order.
    assert [(g.kind, g.target, g.job) for g in bounded.grouped] == [
        *(("unreachable", t, None) for t in DOWN[:3]),
        *(("failing", t, j) for j, t in FAILING[:3]),
    ]
    assert [g for g in everything.grouped if g.target in DOWN[:3]] == [
        g for g in bounded.grouped if g.kind == "unreachable"
    ]
    # ... and counts what it left out.
    groups = {g.kind: (g.total, g.problems, g.shown, g.more) for g in bounded.groups}
    assert groups == {
        "unreachable": (5, 10, 3, 2),
        "failing": (6, 6, 3, 3),
        "stuck": (0, 0, 0, 0),
        "late": (0, 0, 0, 0),
    }
    assert {g.kind: (g.total, g.problems, g.more) for g in everything.groups} == {
        "unreachable": (5, 10, 0),
        "failing": (6, 6, 0),
        "stuck": (0, 0, 0),
        "late": (0, 0, 0),
    }
    for summary in (bounded, everything):
        assert (summary.line_count, summary.problem_count, summary.ok) == (11, 16, False)
        assert [(j.job, j.total, j.failing, j.unreachable) for j in summary.jobs] == [
            ("ping", 9, 9, 5),
            ("sync", 7, 7, 5),
        ]
        assert summary.jobs_total == 2
    # The detail is that of the lines listed: both jobs of each unreachable target shown.
    assert sorted((p.job, p.target) for p in bounded.problems) == sorted(
        [*((j, t) for t in DOWN[:3] for j in ("ping", "sync")), *FAILING[:3]]
    )
    assert {p.failures for p in bounded.problems} == {2}
    # Bounded jobs too: the one with most problems first.
    assert [j.job for j in health.summary(app, viewer, limit=1).jobs] == ["ping"]


def test_late_and_stuck_lines_are_bounded_and_counted_per_job(
    app: App, viewer: Actor, clock: FakeClock
) -> None:
    for name in ("t1", "t2", "t3", "t4"):
        targets.add_target(app, SYSTEM, TargetSpec(name, TargetKind.LOCAL))
    jobs.add_job(app, SYSTEM, "nightly", JobSpec("0 2 * * *", "true"), bulk=True)
    jobs.add_job(app, SYSTEM, "slow", JobSpec("1 9 * * *", "sleep 99", timeout_s=5), bulk=True)
    store = RunStore(app.db, node=app.node_name, clock=clock)
    clock.advance(seconds=31)
    started = store.claim_due(clock.now).dispatches  # slow's 09:01 runs, never finished
    assert sorted(d.target_name for d in started) == ["t1", "t2", "t3", "t4"]
    jobs.set_enabled(app, SYSTEM, "slow", False)
    clock.advance(days=1)  # nightly's 02:00 slot went by undecided; slow's runs are stuck

    result = health.summary(app, viewer, limit=2)

    assert [(g.kind, g.job) for g in result.grouped] == [("stuck", "slow")] * 2 + [
        ("late", "nightly")
    ] * 2
    assert {g.kind: (g.total, g.problems, g.shown, g.more) for g in result.groups} == {
        "unreachable": (0, 0, 0, 0),
        "failing": (0, 0, 0, 0),
        "stuck": (4, 4, 2, 2),
        "late": (4, 4, 2, 2),
    }
    assert [(j.job, j.total, j.late, j.stuck) for j in result.jobs] == [
        ("nightly", 4, 4, 0),
        ("slow", 4, 0, 4),
    ]
    assert result.group("stuck").see_all == "/runs?status=running"
    assert [j.see_all for j in result.jobs] == [
        "/jobs/nightly?sort=next",
        "/runs?job=slow&status=running",
    ]
    assert not result.ok


def test_the_api_answers_the_bounded_lines_with_the_counts(app: App, failing_fleet: None) -> None:
    auth = bearer(token_for(app, "viewer"))
    with new_client(app) as client:
        answer = client.get("/api/v1/health", params={"limit": 2}, headers=auth).json()
        detailed = client.get(
            "/api/v1/health", params={"limit": 2, "detail": "true"}, headers=auth
        ).json()
        default = client.get("/api/v1/health", headers=auth).json()

    assert [(g["kind"], g["target"]) for g in answer["grouped"]] == [
        ("unreachable", "down1"),
        ("unreachable", "down2"),
        ("failing", FAILING[0][1]),
        ("failing", FAILING[1][1]),
    ]
    assert (answer["ok"], answer["line_count"], answer["problem_count"]) == (False, 11, 16)
    assert answer["limit"] == 2 and "problems" not in answer
    assert {g["kind"]: (g["total"], g["more"], g["see_all"]) for g in answer["groups"]} == {
        "unreachable": (5, 3, "/runs?status=connect_error"),
        "failing": (6, 4, None),
        "stuck": (0, 0, "/runs?status=running"),
        "late": (0, 0, None),
    }
    assert [(j["job"], j["total"], j["see_all"]) for j in answer["jobs"]] == [
        ("ping", 9, "/jobs/ping?status=failed"),
        ("sync", 7, "/jobs/sync?status=failed"),
    ]
    assert len(detailed["problems"]) == 2 * 2 + 2  # both jobs of two targets, two pairs
    assert detailed["grouped"] == answer["grouped"]
    # The default limit (20) holds this whole fleet.
    assert default["limit"] == health.DEFAULT_LIMIT
    assert len(default["grouped"]) == 11
    assert all(g["more"] == 0 for g in default["groups"])


@pytest.mark.parametrize(
    ("sent", "fragment"),
    [
        ("0", "limit: 0 is out of range 1-1000"),
        ("1001", "limit: 1001 is out of range 1-1000"),
        ("-5", "limit: -5 is out of range 1-1000"),
        ("many", "limit"),
    ],
)
def test_a_bad_limit_is_a_json_error_naming_the_field(app: App, sent: str, fragment: str) -> None:
    with new_client(app) as client:
        response = client.get(
            "/api/v1/health", params={"limit": sent}, headers=bearer(token_for(app, "viewer"))
        )

    assert response.status_code == 422
    error = response.json()["error"]
    assert error["field"] == "limit"
    assert fragment in error["message"]


def test_the_service_refuses_a_limit_out_of_range(app: App, viewer: Actor) -> None:
    for bad in (0, -1, health.LIMIT_MAX + 1):
        with pytest.raises(InvalidInput) as refused:
            health.summary(app, viewer, limit=bad)
        assert refused.value.field == "limit" and str(bad) in refused.value.message
    health.summary(app, viewer, limit=health.LIMIT_MAX)  # the bound itself is allowed


def test_the_dashboard_lists_the_first_lines_and_its_more_links_hold_the_rest(
    app: App, failing_fleet: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(views, "ATTENTION_LIMIT", 2)  # the dashboard's bound, made small
    with new_client(app) as client:
        log_in(client, "viewer")
        page = client.get("/").text
        table = page[page.index('id="needs-attention"') : page.index("</table>")]
        assert table.count("<tr>") == 1 + 4  # the header, two unreachable, two failing
        assert "11 problem(s) (16 job × target)" in page
        more = re.search(
            r'id="more-unreachable">3 more unreachable target\(s\)[^<]*<a href="([^"]+)"', page
        )
        assert more is not None, page
        assert 'id="more-failing">4 more failing job × target' in page
        unreachable_runs = client.get(more.group(1).replace("&amp;", "&")).text
        per_job = page[page.index('id="attention-by-job"') :]
        per_job = per_job[: per_job.index("</table>")]
        by_job = dict(re.findall(r'<tr data-job="([^"]+)">\s*<td><a href="([^"]+)"', per_job))
        job_pages = {job: client.get(url.replace("&amp;", "&")).text for job, url in by_job.items()}

    # Every unreachable target, listed or not, is in the list the link leads to (its rows,
    # not the filter's list of every target name), and only the runs that could not connect.
    rows = unreachable_runs[unreachable_runs.index("<tbody") :]
    for name in DOWN:
        assert f'<a href="/targets/{name}">{name}</a>' in rows, name
    assert 'href="/targets/box1"' not in rows and 'href="/targets/fine"' not in rows
    # Every failing target of each job (its command failing or its target down) is on
    # the job page the job's line links to.
    assert sorted(by_job) == ["ping", "sync"]
    for (job, target), _ in OUTCOMES.items():
        assert f'data-target="{target}"' in job_pages[job], (job, target)
    assert 'data-target="fine"' not in job_pages["ping"]  # the filter is the failing ones


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_the_cli_lists_up_to_the_limit_and_says_how_many_more(
    app: App,
    failing_fleet: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    point_the_cli_at(app, monkeypatch)
    monkeypatch.setenv("COLUMNS", "250")

    def run(*args: str) -> tuple[int, str, str]:
        try:
            code = run_cli(cli, ["health", *args])
        except SystemExit as exc:
            code = int(exc.code or 0)
        out, err = capsys.readouterr()
        return code, out, err

    code, out, _ = run("--limit", "2")
    assert code == 1
    assert "11 problem(s) (16 job × target)" in out
    assert [name in out for name in DOWN] == [True, True, False, False, False]
    assert (
        "3 more unreachable target(s) not listed: fleetcron runs list --status connect_error" in out
    )
    assert "4 more failing job × target not listed: fleetcron job status JOB --status failed" in out
    assert "2 job(s) with problems: ping (9), sync (7)" in out

    code, out, _ = run("--limit", "0")  # all
    assert code == 1 and "more" not in out
    assert all(name in out for name in [*DOWN, *BOXES])

    code, out, _ = run("--limit", "1", "--json")
    data = json.loads(out)
    assert (code, len(data["grouped"]), data["line_count"]) == (1, 2, 11)

    for bad in ("-1", str(health.LIMIT_MAX + 1)):
        code, out, err = run("--limit", bad)
        assert code == 2, (bad, out, err)
        assert f"--limit: {bad} is out of range 0-{health.LIMIT_MAX}" in out + err


def test_the_statements_of_a_summary_do_not_grow_with_the_failing_targets(
    app: App, viewer: Actor, clock: FakeClock
) -> None:
    """Two failing job × target, forty-two (more than the default limit of twenty lines of
    each cause) or sixty-two: the same statements, and a bounded answer that stays the
    same size while the full one grows with every target (the negative control: the same
    measure does see the failing targets)."""

    def measured(limit: int | None) -> tuple[int, int]:
        with statements(app) as seen:
            result = health.summary(app, viewer, limit=limit)
        return len(seen), len(json.dumps(result.as_dict(), default=str))

    # a00's ping cannot connect while its sync reaches it: a failing line, as is a01's sync.
    outcomes = {("ping", "a00"): "connect_error", ("sync", "a01"): "failed"}
    fleet(app, clock, outcomes)

    def grow(first: int, last: int) -> None:
        """Targets a<first>..a<last - 1>: the even ones unreachable, the odd ones failing
        ``ping``; two more slots of every target recorded."""
        for t in range(first, last):
            targets.add_target(app, SYSTEM, TargetSpec(f"a{t:02d}", TargetKind.LOCAL))
            if t % 2:
                outcomes[("ping", f"a{t:02d}")] = "failed"
            else:
                outcomes.update({(j, f"a{t:02d}"): "connect_error" for j in ("ping", "sync")})
        for job in ("ping", "sync"):
            jobs.set_enabled(app, SYSTEM, job, True)
        for _ in range(2):
            clock.advance(minutes=1)
            assert record(app, clock, lambda j, t: outcomes.get((j, t), "succeeded"))
        for job in ("ping", "sync"):
            jobs.set_enabled(app, SYSTEM, job, False)

    sizes = []
    for first, last in ((0, 0), (2, 42), (42, 62)):
        grow(first, last)
        bounded = health.summary(app, viewer)
        unreachable, failing = bounded.group("unreachable"), bounded.group("failing")
        pairs = (last - 2) // 2 if last else 0  # unreachable targets, failing ping
        assert (unreachable.total, failing.total) == (pairs, pairs + 2)
        assert (unreachable.shown, failing.shown) == (
            min(unreachable.total, 20),
            min(failing.total, 20),
        )
        sizes.append((measured(health.DEFAULT_LIMIT), measured(None)))

    assert len({n for bounded_, full in sizes for n in (bounded_[0], full[0])}) == 1, sizes
    (_, medium_bounded), (_, medium_full) = sizes[1]
    (_, large_bounded), (_, large_full) = sizes[2]
    assert abs(large_bounded - medium_bounded) < 100, sizes  # only the counts' digits
    assert large_full - medium_full > 20 * 100, sizes  # twenty lines more, and their detail
