"""Notifications, silences, incidents, blackout windows, metrics and health, each confined to
its project, on SQLite and PostgreSQL: projects ``team-a`` and ``team-b`` each have a
target ``box`` and a job ``backup`` on it (the same names), a channel each and a rule for
every job of their own project. Real scheduler and database, the fake executor (``backup``
of team-a runs ``backup-a``, team-b's ``backup-b``) and the fake clock from 09:00:30 UTC;
the rules' group_wait is 0, so a round that opens an incident queues its message (the
deliveries are read from the database, nothing is sent).

Each guarantee has a negative control: the decision it rests on, made to ignore the
project (names alone), lets the crossing through and the same check sees it.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable
from typing import Any

import pytest
from sqlalchemy import select

from cli_env import run_in_process
from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.core import blackouts as blackout_rule
from fleetcron.core import incidents as incident_rule
from fleetcron.core.statuses import SkipKind
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.errors import NotFound
from fleetcron.executors.fake import FakeExecutor, FakeOutcome
from fleetcron.metrics import Metrics
from fleetcron.notify.webhook import WebhookSpec
from fleetcron.scheduler.service import Scheduler
from fleetcron.services.alerts import incident_ops
from fleetcron.services.alerts import incidents as incident_store
from fleetcron.services.alerts.channels import (
    RuleTimers,
    add_channel,
    add_rule,
    list_rules,
    remove_rule,
)
from fleetcron.services.alerts.evaluation import evaluate_alerts
from fleetcron.services.alerts.incident_ops import (
    acknowledge,
    incidents_reading,
    list_incidents,
    show_incident,
)
from fleetcron.services.alerts.silences import (
    SilenceSpec,
    add_silence,
    expire_silence,
    list_silences,
)
from fleetcron.services.blackouts.windows import BlackoutSpec, add_blackout, list_blackouts
from fleetcron.services.health.report import summary
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.projects import admin as projects
from fleetcron.services.targets import edit as targets
from fleetcron.services.targets.shares import share_target
from fleetcron.store.schema import Job, NotificationChannel, NotificationDelivery, Project, Run
from integration.notify.conftest import next_minute

ADMIN = Actor("admin", "admin")
A, B = "team-a", "team-b"
FAIL = FakeOutcome(exit_code=3, stderr="disk full")


@pytest.fixture
def teams(app: App) -> None:
    """Two projects with the same names inside, a channel and a rule for each."""
    for project in (A, B):
        admin = ADMIN.within(project)
        projects.add_project(app, ADMIN, project)
        targets.add_target(app, admin, TargetSpec("box", TargetKind.LOCAL))
        spec = JobSpec(schedule="* * * * *", command=f"backup-{project[-1]}")
        jobs.add_job(app, admin, "backup", spec, target="box")
        add_channel(app, ADMIN, f"ops-{project}", WebhookSpec(url="http://127.0.0.1:9/hook"))
        add_rule(app, admin, f"ops-{project}", timers=RuleTimers(group_wait_s=0))


def failing(fake: FakeExecutor, *projects_failing: str) -> None:
    fake.script = {f"backup-{p[-1]}": FAIL for p in projects_failing}


def member(project: str, role: str = "operator") -> Actor:
    """A user with ``role`` in ``project`` and no global role, acting there."""
    return Actor(f"{role}-{project}", "none", project_roles=((project, role),)).within(project)


def told(app: App) -> list[tuple[str, str, str]]:
    """(channel, event, job) of every message queued, in order."""
    with app.db.read() as session:
        rows = session.execute(
            select(
                NotificationChannel.name, NotificationDelivery.event, NotificationDelivery.payload
            )
            .join(NotificationChannel, NotificationChannel.id == NotificationDelivery.channel_id)
            .order_by(NotificationDelivery.id)
        ).all()
        return [(channel, event, payload["job"]["name"]) for channel, event, payload in rows]


async def minute(app: App, scheduler: Scheduler, clock: FakeClock) -> None:
    await next_minute(scheduler, clock)
    evaluate_alerts(app, clock.now)


def open_ids(app: App, project: str) -> set[int]:
    return {i.id for i in list_incidents(app, member(project, "viewer"))}


# -- rules and incidents -----------------------------------------------------------------


@pytest.mark.usefixtures("teams")
async def test_a_failure_notifies_only_its_projects_rule_and_incident(
    app: App, fake: FakeExecutor, fake_scheduler: Scheduler, clock: FakeClock
) -> None:
    failing(fake, A)
    await minute(app, fake_scheduler, clock)

    assert told(app) == [(f"ops-{A}", "failure", "backup")]
    [incident] = open_ids(app, A)
    assert open_ids(app, B) == set()
    # Another project's incident does not exist for B's people, to read or to acknowledge.
    with pytest.raises(NotFound):
        show_incident(app, member(B, "viewer"), incident)
    with pytest.raises(NotFound):
        acknowledge(app, member(B), incident)
    assert acknowledge(app, member(A), incident).acknowledged

    # B's backup fails too: an incident of its own, told to B's channel alone.
    failing(fake, A, B)
    await minute(app, fake_scheduler, clock)
    assert told(app)[1:] == [(f"ops-{B}", "failure", "backup")]
    [b_incident] = open_ids(app, B)
    assert b_incident != incident and open_ids(app, A) == {incident}
    assert [d.open_targets for d in list_incidents(app, member(A, "viewer"))] == [1]
    assert [d.open_targets for d in list_incidents(app, member(B, "viewer"))] == [1]


@pytest.mark.usefixtures("teams")
async def test_a_bulk_jobs_failure_on_a_shared_target_is_its_jobs_projects(
    app: App, fake: FakeExecutor, fake_scheduler: Scheduler, clock: FakeClock
) -> None:
    # B's target "db" shared into A, where A's bulk job "dump" selects it.
    targets.add_target(app, ADMIN.within(B), TargetSpec("db", TargetKind.LOCAL, labels=["role=db"]))
    share_target(app, ADMIN.within(B), "db", A)
    spec = JobSpec(schedule="* * * * *", command="dump-a")
    jobs.add_job(app, ADMIN.within(A), "dump", spec, bulk=True, selector="role=db")
    fake.script = {"dump-a": FAIL}
    await minute(app, fake_scheduler, clock)

    assert told(app) == [(f"ops-{A}", "failure", "dump")]
    assert [i.job for i in list_incidents(app, member(A, "viewer"))] == ["dump"]
    assert open_ids(app, B) == set()


@pytest.mark.usefixtures("teams")
async def test_a_rule_is_listed_and_removed_in_its_project_only(app: App) -> None:
    a_rules = list_rules(app, member(A, "viewer"))
    b_rules = list_rules(app, member(B, "viewer"))
    assert [r.channel for r in a_rules] == [f"ops-{A}"]
    assert [r.channel for r in b_rules] == [f"ops-{B}"]
    with pytest.raises(NotFound):
        remove_rule(app, ADMIN.within(B), a_rules[0].id)
    remove_rule(app, ADMIN.within(A), a_rules[0].id)
    assert list_rules(app, member(A, "viewer")) == []


@pytest.mark.usefixtures("teams")
async def test_negative_control_rules_matched_by_job_alone_cross_projects(
    app: App,
    fake: FakeExecutor,
    fake_scheduler: Scheduler,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        incident_store.Route, "applies", lambda self, _project, job: self.job_id in (None, job)
    )
    failing(fake, A)
    await minute(app, fake_scheduler, clock)

    assert sorted(told(app)) == [
        (f"ops-{A}", "failure", "backup"),
        (f"ops-{B}", "failure", "backup"),
    ]


# -- silences ----------------------------------------------------------------------------


def silence(app: App, project: str) -> int:
    spec = SilenceSpec(reason="maintenance", everything=True, duration_s=3600)
    return add_silence(app, member(project), spec).id


@pytest.mark.usefixtures("teams")
async def test_a_silence_mutes_only_its_projects_incidents(
    app: App, fake: FakeExecutor, fake_scheduler: Scheduler, clock: FakeClock
) -> None:
    b_silence = silence(app, B)
    failing(fake, A, B)
    await minute(app, fake_scheduler, clock)

    # B's silence of everything leaves A's failure told; B's own is muted.
    assert told(app) == [(f"ops-{A}", "failure", "backup")]
    readings = {(r.project, r.job): r.silenced for r in incidents_reading(app).incidents}
    assert readings == {(A, "backup"): False, (B, "backup"): True}
    # Listed and expired in its project only.
    assert [s.id for s in list_silences(app, member(B, "viewer"))] == [b_silence]
    assert list_silences(app, member(A, "viewer")) == []
    with pytest.raises(NotFound):
        expire_silence(app, member(A), b_silence)


@pytest.mark.usefixtures("teams")
async def test_negative_control_silences_of_every_project_mute_another(
    app: App,
    fake: FakeExecutor,
    fake_scheduler: Scheduler,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(incident_rule, "of_project", lambda silences, _project: list(silences))
    silence(app, B)
    failing(fake, A)
    await minute(app, fake_scheduler, clock)

    assert told(app) == []


# -- blackout windows --------------------------------------------------------------------

WINDOW = BlackoutSpec(
    name="patch",
    reason="kernel patch",
    job="backup",
    target="box",
    zone="UTC",
    start="2026-03-02 09:00",
    end="2026-03-02 10:00",
)


def slots(app: App) -> dict[str, list[str | None]]:
    """Each project's backup runs: their skip kind, or their status."""
    found: dict[str, list[str | None]] = {A: [], B: []}
    with app.db.read() as session:
        rows = session.execute(
            select(Project.name, Run.skip_kind, Run.status)
            .join(Job, Job.id == Run.job_id)
            .join(Project, Project.id == Job.project_id)
            .order_by(Run.id)
        ).all()
        for project, skip_kind, status in rows:
            found[project].append(skip_kind or status)
    return found


@pytest.mark.usefixtures("teams")
async def test_a_blackout_window_holds_only_its_projects_job(
    app: App, fake_scheduler: Scheduler, clock: FakeClock
) -> None:
    window = add_blackout(app, member(A), WINDOW)
    for _ in range(2):
        await next_minute(fake_scheduler, clock)

    assert slots(app) == {A: [SkipKind.BLACKOUT] * 2, B: ["succeeded"] * 2}
    assert [w.id for w in list_blackouts(app, member(A, "viewer"))] == [window.id]
    assert list_blackouts(app, member(B, "viewer")) == []


@pytest.mark.usefixtures("teams")
async def test_negative_control_windows_matched_by_name_alone_hold_another_project(
    app: App, fake_scheduler: Scheduler, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    def by_name(subject: blackout_rule.Subject, window: blackout_rule.Window) -> bool:
        return window.scope.covers(
            subject.job, subject.target, subject.labels, window.scope.project
        )

    monkeypatch.setattr(blackout_rule.Subject, "under", by_name)
    add_blackout(app, member(A), WINDOW)
    await next_minute(fake_scheduler, clock)

    assert slots(app) == {A: [SkipKind.BLACKOUT], B: [SkipKind.BLACKOUT]}


# -- metrics and health ------------------------------------------------------------------


def series(app: App) -> list[str]:
    metrics = Metrics()
    metrics.watch_incidents(lambda: incidents_reading(app))
    text = metrics.exposition().decode()
    return [line for line in text.splitlines() if line.startswith("fleetcron_incident_targets{")]


def problems(app: App) -> Iterable[tuple[str, str, str, bool]]:
    result = summary(app, ADMIN)
    return sorted((p.project, p.job, p.target, p.silenced) for p in result.problems)


@pytest.mark.usefixtures("teams")
async def test_metrics_and_health_tell_two_projects_backup_apart(
    app: App, fake: FakeExecutor, fake_scheduler: Scheduler, clock: FakeClock
) -> None:
    failing(fake, A, B)
    await minute(app, fake_scheduler, clock)
    silence(app, A)

    labels = 'cause="failing",fleetcron_job="backup",fleetcron_target=""'
    assert sorted(series(app)) == [
        f'fleetcron_incident_targets{{{labels},project="{A}"}} 1.0',
        f'fleetcron_incident_targets{{{labels},project="{B}"}} 1.0',
    ]
    # A's silence marks A's problem only, although the names are the same.
    assert problems(app) == [(A, "backup", "box", True), (B, "backup", "box", False)]
    result = summary(app, ADMIN)
    assert sorted((j.project, j.job, j.total) for j in result.jobs) == [
        (A, "backup", 1),
        (B, "backup", 1),
    ]
    assert [j.see_all for j in result.jobs if j.project == A] == [
        f"/jobs/backup?project={A}&status=failed"
    ]


# -- the CLI -----------------------------------------------------------------------------


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
@pytest.mark.usefixtures("teams")
def test_the_cli_acts_in_the_project_it_names(
    app: App, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return run_in_process(app, monkeypatch, capsys, *args)

    added = cli("silence", "add", "--all", "--duration", "1h", "--reason", "move", "--project", A)
    assert added.returncode == 0, added.stderr
    window = ("--job", "backup", "--start", "2030-03-02 10:00", "--end", "2030-03-02 11:00")
    made = cli("blackout", "add", "--name", "patch", *window, "--reason", "fw", "--project", B)
    assert made.returncode == 0, made.stderr

    def listed(*command: str, project: str) -> list[dict[str, Any]]:
        done = cli(*command, "--json", "--project", project)
        assert done.returncode == 0, done.stderr
        found: list[dict[str, Any]] = json.loads(done.stdout)
        return found

    assert len(listed("silence", "list", project=A)) == 1
    assert listed("silence", "list", project=B) == []
    assert len(listed("blackout", "list", project=B)) == 1
    assert listed("blackout", "list", project=A) == []
    assert [r["channel"] for r in listed("notify", "rule", "list", project=B)] == [f"ops-{B}"]
    # Another project's silence does not exist where the command acts.
    [silenced] = listed("silence", "list", project=A)
    expired = cli("silence", "expire", str(silenced["id"]), "--project", B)
    assert expired.returncode == 2 and "does not exist" in expired.stderr


@pytest.mark.usefixtures("teams")
async def test_negative_control_health_and_metrics_with_every_projects_silences(
    app: App,
    fake: FakeExecutor,
    fake_scheduler: Scheduler,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def every(silences: Iterable[object], _project: int) -> list[object]:
        return list(silences)

    monkeypatch.setattr(incident_rule, "of_project", every)
    monkeypatch.setattr(incident_ops, "of_project", every)
    failing(fake, A, B)
    await minute(app, fake_scheduler, clock)
    silence(app, A)

    assert problems(app) == [(A, "backup", "box", True), (B, "backup", "box", True)]
    assert all(r.silenced for r in incidents_reading(app).incidents)
