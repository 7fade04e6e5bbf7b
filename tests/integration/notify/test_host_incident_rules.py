"""Host incidents from the probe's recorded states, without a network (SQLite and
PostgreSQL): one per target however many rounds see it down, none for a paused target,
resolved at the time a probe reached the target again."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select

from fixtures.app import FakeClock
from fleetcron.app import SYSTEM, App
from fleetcron.core.reach import Reach, last_slot
from fleetcron.core.targets import TargetSpec
from fleetcron.executors.ssh_probe import ProbeResult
from fleetcron.services.alerts.evaluation import evaluate_alerts
from fleetcron.services.targets import edit as targets
from fleetcron.services.targets.reach import due_probes, record_probes
from fleetcron.store.schema import Incident
from integration.test_backup import ssh_private_key

HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHkCY9H2yZ1aBeq1Gx7pCD3uNcD9S7i2nV3Cz7pZr5xJ"


def add_ssh(app: App, name: str) -> int:
    spec = TargetSpec(
        name, host="192.0.2.10", user="ops", private_key=ssh_private_key(), host_key=HOST_KEY
    )
    return targets.add_target(app, SYSTEM, spec, verify=False, allow_same_host=True).target.id


def probed(app: App, clock: FakeClock, target_id: int, reach: Reach) -> None:
    error = None if reach is Reach.REACHABLE else f"{reach.value} at 192.0.2.10:22"
    record_probes(app, [ProbeResult(target_id, reach, error, 0.01)], clock.now)


def incidents(app: App) -> list[tuple[str | None, str, object]]:
    with app.db.read() as session:
        return [
            (i.target_name, i.status, i.resolved_at)
            for i in session.scalars(
                select(Incident).where(Incident.cause == "unreachable").order_by(Incident.id)
            )
        ]


def test_a_host_down_for_many_rounds_is_one_incident_resolved_when_reached(
    app: App, clock: FakeClock
) -> None:
    db1 = add_ssh(app, "db1")
    probed(app, clock, db1, Reach.REFUSED)
    for _ in range(5):
        clock.advance(seconds=10)
        evaluate_alerts(app, clock.now)
        probed(app, clock, db1, Reach.TIMEOUT)  # another failure: still the same incident
    assert incidents(app) == [("db1", "open", None)]

    back = clock.advance(seconds=30)
    probed(app, clock, db1, Reach.REACHABLE)
    clock.advance(seconds=10)
    evaluate_alerts(app, clock.now)
    assert incidents(app) == [("db1", "resolved", back)]


def test_each_host_down_has_its_own_incident_and_a_paused_one_has_none(
    app: App, clock: FakeClock
) -> None:
    """Also the control of the count above: a second host down does make a second one."""
    ids = {name: add_ssh(app, name) for name in ("db1", "db2", "db3")}
    targets.pause_target(app, SYSTEM, "db3", "maintenance")
    for target_id in ids.values():
        probed(app, clock, target_id, Reach.HOST_KEY_CHANGED)
    clock.advance(seconds=10)
    evaluate_alerts(app, clock.now)
    evaluate_alerts(app, clock.now + timedelta(seconds=10))
    assert incidents(app) == [("db1", "open", None), ("db2", "open", None)]


def test_a_target_never_probed_is_first_probed_at_its_offset_after_the_start(
    app: App, clock: FakeClock
) -> None:
    """Not at once: a scheduler starting on a large fleet spreads its first probes. The
    control: without a start time, the same target is due at once."""
    db1 = add_ssh(app, "db1")
    started = clock.now
    slot = last_slot(db1, 300.0, started + timedelta(seconds=300))
    assert [t for t, _ in due_probes(app, started, interval_s=300.0, since=started)] == []
    before = slot - timedelta(microseconds=1)
    assert due_probes(app, before, interval_s=300.0, since=started) == []
    assert [t for t, _ in due_probes(app, slot, interval_s=300.0, since=started)] == [db1]
    assert [t for t, _ in due_probes(app, started, interval_s=300.0)] == [db1]
