"""A slot skipped because nobody could prove ownership alerts as late, and evaluation knows
it by the run's ``skip_kind`` column, not by the words of its reason."""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.core.ownership import Verdict
from fleetcron.notify.webhook import WebhookSpec
from fleetcron.scheduler.service import policy_from
from fleetcron.services.alerts.channels import RuleTimers, add_channel, add_rule
from fleetcron.services.alerts.evaluation import evaluate_alerts
from fleetcron.store.runs import RunStore, Standalone
from fleetcron.store.schema import NotificationDelivery, Run
from integration.notify.conftest import add_job


class NobodyOwns(Standalone):
    def verdict(self, session: Session, *, of_shards: Collection[int] | None = None) -> Verdict:
        return Verdict("invalid", "no owner row")


def skip_a_slot(app: App, admin: Actor, clock: FakeClock) -> None:
    add_channel(app, admin, "ops", WebhookSpec(url="http://127.0.0.1:9/hook"))
    add_rule(app, admin, "ops", timers=RuleTimers(group_wait_s=0))
    add_job(app, admin, "backup", "true")
    clock.advance(minutes=1)  # 09:01:30: the 09:01 slot is due
    store = RunStore(app.db, node="n1", guard=NobodyOwns(), policy=policy_from(app), clock=clock)
    assert store.claim_due(clock.now).skipped == 1


def deliveries(app: App) -> list[tuple[str, str, str | None]]:
    with app.db.read() as session:
        return [
            (d.event, d.payload["run"]["status"], d.payload["run"].get("reason"))
            for d in session.scalars(select(NotificationDelivery).order_by(NotificationDelivery.id))
        ]


def test_an_ownership_uncertain_skip_is_one_late_alert(
    app: App, admin: Actor, box: str, clock: FakeClock
) -> None:
    skip_a_slot(app, admin, clock)

    assert evaluate_alerts(app, clock.now) == 1
    assert evaluate_alerts(app, clock.now) == 0
    [(event, status, _)] = deliveries(app)
    assert (event, status) == ("late", "skipped")


def test_the_reason_alone_does_not_make_a_skip_late(
    app: App, admin: Actor, box: str, clock: FakeClock
) -> None:
    """Negative control: the same skip without its kind (same reason text) says nothing."""
    skip_a_slot(app, admin, clock)
    with app.db.session() as session:
        session.execute(update(Run).values(skip_kind=None))
        assert session.scalar(select(Run.reason)) == "ownership uncertain: no owner row"

    assert evaluate_alerts(app, clock.now) == 0
    assert deliveries(app) == []
