"""A host whose sshd stops while the scheduler's pooled connection to it stays alive.

Real sshd, real SSH executor and pool, real scheduler, real loopback webhook receiver, on
SQLite and PostgreSQL, with a fake clock moved 10 s at a time. The host probe (one fresh
connection per target and probe interval) must find the host unreachable within one
interval although its jobs still run over the pooled connection; it opens exactly one
host incident, the job's failures while it is open send no message (their runs are
recorded), and once sshd is back the next probe resolves it.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from fixtures.app import FakeClock, make_settings
from fixtures.sshd import SSHD_BINARY, ClientKey, SshServer, running_sshd
from fleetcron.app import Actor, App
from fleetcron.core.reach import Reach
from fleetcron.notify.webhook import WebhookSpec
from fleetcron.scheduler.service import Scheduler
from fleetcron.services.alerts import incident_ops
from fleetcron.services.alerts.channels import RuleTimers, add_channel, add_rule
from fleetcron.services.alerts.deliveries import deliver_due
from fleetcron.services.alerts.evaluation import evaluate_alerts
from fleetcron.services.health import report as health
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import Incident, Run, Target
from integration.notify.conftest import WebhookReceiver
from waiting import eventually

pytestmark = [pytest.mark.sshd, pytest.mark.slow]

INTERVAL_S = 60.0
STEP_S = 10.0


def open_app(database_url: str, tmp_path: Path, clock: FakeClock, interval_s: float) -> App:
    settings = make_settings(
        tmp_path / "data",
        database_url,
        probe_interval_s=interval_s,
        probe_timeout_s=5.0,
        notify_timeout_s=30.0,  # the receiver, a thread here, answers however loaded
    )
    return App.open(settings, clock=clock)


@pytest.fixture
def server(tmp_path: Path, sshd_client_key: ClientKey) -> Iterator[SshServer]:
    with running_sshd(
        tmp_path / "sshd",
        authorized_keys=[sshd_client_key.public_key_line],
        client_key=sshd_client_key,
    ) as running:
        yield running


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    """The job succeeds while this file exists."""
    path = tmp_path / "healthy"
    path.write_text("yes\n")
    return path


class Scene:
    """The app, its scheduler on the real SSH executor, and a step of the fake clock."""

    def __init__(self, app: App, clock: FakeClock, scheduler: Scheduler) -> None:
        self.app, self.clock, self.scheduler = app, clock, scheduler

    async def step(self) -> None:
        """What ``Scheduler.serve`` and the notification round do in 10 s."""
        self.clock.advance(seconds=STEP_S)
        await self.scheduler.tick()
        await self.scheduler.idle()
        await self.scheduler.prober.round(self.clock.now)
        await asyncio.to_thread(evaluate_alerts, self.app, self.clock.now)
        await asyncio.to_thread(deliver_due, self.app, self.clock.now)

    async def drive(self, minutes: float) -> None:
        for _ in range(round(minutes * 60 / STEP_S)):
            await self.step()

    def summary(self, admin: Actor) -> health.HealthSummary:
        return health.summary(self.app, admin)


async def scene_for(
    app: App, clock: FakeClock, server: SshServer, marker: Path, webhook: WebhookReceiver
) -> AsyncIterator[Scene]:
    admin = Actor("admin", "admin")
    add_channel(app, admin, "ops", WebhookSpec(url=webhook.url))
    add_rule(app, admin, "ops", timers=RuleTimers(group_wait_s=30.0))
    await asyncio.to_thread(
        targets.add_target, app, admin, server.spec("db1", host_key=server.host_key_line)
    )
    jobs.add_job(app, admin, "check", JobSpec("* * * * *", f"test -e {marker}"), target="db1")
    scheduler = Scheduler(app, clock=clock)
    await scheduler.start()
    try:
        yield Scene(app, clock, scheduler)
    finally:
        await scheduler.shutdown()


def stop_listening(server: SshServer) -> None:
    """Stop sshd's listener only: the sessions it started (the pooled connection) live on."""
    os.kill(server.pid, signal.SIGTERM)
    eventually(lambda: not _listening(server.port), 10, "sshd to stop listening")


def listen_again(server: SshServer, tmp_path: Path) -> subprocess.Popen[bytes]:
    """Start sshd again on the same port, with the same host key and configuration."""
    config = tmp_path / "sshd" / "sshd_config"
    with (tmp_path / "sshd" / "sshd.log").open("ab") as log:
        proc = subprocess.Popen(
            [str(SSHD_BINARY), "-D", "-e", "-f", str(config)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )
    eventually(lambda: _listening(server.port), 10, "sshd to listen again")
    return proc


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def messages(webhook: WebhookReceiver) -> Counter[tuple[str, str]]:
    """(cause, message) of every request the receiver got."""
    bodies: list[dict[str, Any]] = [json.loads(r.body) for r in webhook.requests]
    return Counter((body["cause"], body["message"]) for body in bodies)


def runs_of(app: App, status: str) -> int:
    with app.db.read() as session:
        return int(
            session.scalar(select(func.count()).select_from(Run).where(Run.status == status)) or 0
        )


def host_incidents(app: App) -> list[tuple[str, str | None]]:
    with app.db.read() as session:
        return [
            (i.status, i.target_name)
            for i in session.scalars(select(Incident).where(Incident.cause == "unreachable"))
        ]


def reach_of(app: App) -> str | None:
    with app.db.read() as session:
        return session.scalar(select(Target.reach).where(Target.name == "db1"))


@dataclass(frozen=True)
class Outage:
    """What an outage scene saw: the messages sent, how long health took to notice that
    sshd stopped (capped at 3 intervals), and the job incidents recorded meanwhile."""

    messages: Counter[tuple[str, str]]
    noticed_after: timedelta
    job_incidents: int
    bodies: list[dict[str, Any]]


async def outage(
    app: App, clock: FakeClock, server: SshServer, marker: Path, webhook: WebhookReceiver
) -> Outage:
    """Healthy for 3 minutes; sshd stops listening; once health says so (or after 3
    intervals) the job fails for 10 minutes; then it succeeds again, and a minute later
    sshd listens again, for 3 minutes. Asserts what holds with or without the probe."""
    admin = Actor("admin", "admin")
    tmp_path = marker.parent
    async for scene in scene_for(app, clock, server, marker, webhook):
        await scene.drive(minutes=3)
        assert scene.summary(admin).ok
        assert runs_of(app, "succeeded") >= 2

        stop_listening(server)
        stopped_at = clock.now
        while scene.summary(admin).ok and clock.now - stopped_at < timedelta(
            seconds=3 * INTERVAL_S
        ):
            await scene.step()
        noticed_after = clock.now - stopped_at
        # The pooled connection still works: the job's runs keep succeeding meanwhile.
        succeeded = runs_of(app, "succeeded")
        await scene.drive(minutes=1)
        assert runs_of(app, "succeeded") > succeeded

        marker.unlink()
        await scene.drive(minutes=10)
        assert runs_of(app, "failed") >= 9  # the failures are recorded, whatever is sent

        marker.write_text("yes\n")
        await scene.drive(minutes=1)
        back = listen_again(server, tmp_path)
        try:
            await scene.drive(minutes=3)
        finally:
            back.terminate()
            back.wait(timeout=10)
    with app.db.read() as session:
        failing = session.scalar(
            select(func.count()).select_from(Incident).where(Incident.cause == "failing")
        )
    bodies = [json.loads(r.body) for r in webhook.requests]
    return Outage(messages(webhook), noticed_after, int(failing or 0), bodies)


async def test_a_host_whose_sshd_stopped_is_one_incident_and_mutes_its_job_failures(
    database_url: str,
    tmp_path: Path,
    clock: FakeClock,
    server: SshServer,
    marker: Path,
    webhook: WebhookReceiver,
) -> None:
    app = open_app(database_url, tmp_path, clock, INTERVAL_S)
    try:
        seen = await outage(app, clock, server, marker, webhook)
        # Health went non-zero within one probe interval (plus the step it was seen at).
        assert seen.noticed_after <= timedelta(seconds=INTERVAL_S + STEP_S), seen
        # The job's failures made their incident (shown on its page), but sent nothing.
        assert seen.job_incidents == 1
        assert seen.messages == Counter(
            {("unreachable", "firing"): 1, ("unreachable", "resolved"): 1}
        )
        assert host_incidents(app) == [("resolved", "db1")]
        assert reach_of(app) == Reach.REACHABLE.value
        firing = seen.bodies[0]
        assert (firing["host"]["name"], firing["job"]) == ("db1", {"id": 0, "name": ""})
        assert firing["subject"].endswith("host db1 unreachable: 1 target")
        assert firing["reason"].startswith("db1: connection refused")
        assert firing["link"].endswith("/targets/db1")
        listed = incident_ops.list_incidents(app, Actor("v", "viewer"), status="all")
        assert [(i.job, i.cause, i.link) for i in listed if i.cause == "unreachable"] == [
            ("host db1", "unreachable", "/targets/db1")
        ]
    finally:
        app.close()


async def test_without_the_probe_the_same_outage_is_unseen_and_the_job_failures_are_sent(
    database_url: str,
    tmp_path: Path,
    clock: FakeClock,
    server: SshServer,
    marker: Path,
    webhook: WebhookReceiver,
) -> None:
    """Negative control: with the probe off, health stays green while sshd is gone (the
    pooled connection hides it), no host incident opens, and the job's failures are sent,
    so the exact count above fails."""
    app = open_app(database_url, tmp_path, clock, 0.0)
    try:
        seen = await outage(app, clock, server, marker, webhook)
        assert seen.noticed_after >= timedelta(seconds=3 * INTERVAL_S)  # never noticed
        assert seen.job_incidents == 1
        assert seen.messages == Counter({("failing", "firing"): 1, ("failing", "resolved"): 1})
        assert seen.messages != Counter(
            {("unreachable", "firing"): 1, ("unreachable", "resolved"): 1}
        )
        assert host_incidents(app) == []
        assert reach_of(app) is None
    finally:
        app.close()
