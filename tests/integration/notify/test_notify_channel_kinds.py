"""Channel kinds go through one table: the registry is what every service dispatches on.

A kind written here (a JSON-lines file) and put in the table with one line is created,
listed, audited, sealed and delivered to exactly as the built-in kinds are; once it is
taken out, the same stored channel fails with "unknown channel kind", which shows the
dispatch really goes through the registry and not through branches on the kind's name.
The database still admits only the kinds its check constraint names (``webhook``,
``email``): a kind shipped for real also widens that constraint in a migration, so the test
kind stands in under the name ``email``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.crypto import Secret
from fleetcron.errors import InvalidInput
from fleetcron.notify import ChannelKind, ChannelSpec, Cipher, Config, DeliveryFailed, Sending
from fleetcron.notify import email as email_kind
from fleetcron.notify import webhook as webhook_kind
from fleetcron.notify.email import EmailSpec
from fleetcron.notify.registry import KINDS, kind_named, kind_of
from fleetcron.notify.webhook import WebhookSpec
from fleetcron.scheduler.service import Scheduler
from fleetcron.services.alerts.channels import RuleTimers, add_channel, add_rule, list_channels
from fleetcron.services.alerts.deliveries import deliver_due
from fleetcron.services.alerts.evaluation import evaluate_alerts
from fleetcron.store.schema import AuditEvent, NotificationChannel, NotificationDelivery
from integration.notify.conftest import FAILING, add_job, next_minute


@dataclass(frozen=True)
class FileSpec(ChannelSpec):
    path: str


def _validate(spec: FileSpec) -> tuple[Config, str | None]:
    if not spec.path.startswith("/"):
        raise InvalidInput(
            f"path: {spec.path!r} is not absolute", field="path", value=spec.path, allowed="/..."
        )
    return {"path": spec.path}, None


def _send(
    config: Config, secret: Secret | None, message: Mapping[str, Any], sending: Sending
) -> str | None:
    with open(config["path"], "a", encoding="utf-8") as out:
        out.write(json.dumps({**message, "delivery_id": sending.delivery_id}) + "\n")
    return None


def _seal(config: Config, encrypt: Cipher) -> Config:
    if "path_enc" in config:
        return config
    return {"path_enc": encrypt(config["path"].encode()).decode()}


def _unseal(config: Config, decrypt: Cipher) -> Config:
    return {"path": decrypt(config["path_enc"].encode()).decode()}


FILE_KIND = ChannelKind(
    name="email",  # a name the schema's check constraint admits
    spec_type=FileSpec,
    validate=_validate,
    send=_send,
    shown=lambda config: {"path": "(sealed)"},
    summary=lambda config, has_secret: f"append to {config['path']}",
    audit=lambda config, signed: {"file": Path(config["path"]).name},
    seal=_seal,
    unseal=_unseal,
)


def test_each_spec_type_finds_its_kind_and_each_name_its_module() -> None:
    assert kind_of(WebhookSpec(url="https://hooks.example.com/x")) is webhook_kind.KIND
    assert kind_of(EmailSpec(host="localhost", sender="a@b.c", to=["d@e.f"])) is email_kind.KIND
    assert {name: kind.name for name, kind in KINDS.items()} == {
        "webhook": "webhook",
        "email": "email",
    }
    assert kind_named("email") is email_kind.KIND
    with pytest.raises(DeliveryFailed, match="unknown channel kind 'pager'"):
        kind_named("pager")
    with pytest.raises(TypeError, match="FileSpec"):
        kind_of(FileSpec(path="/tmp/x"))  # not registered here


async def test_a_kind_registered_with_one_line_is_added_listed_audited_and_delivered(
    app: App,
    admin: Actor,
    box: str,
    scheduler: Scheduler,
    clock: FakeClock,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(KINDS, "email", FILE_KIND)
    assert kind_of(FileSpec(path="/x")) is FILE_KIND
    log = tmp_path / "alerts.jsonl"
    with pytest.raises(InvalidInput, match="path: 'relative' is not absolute"):
        add_channel(app, admin, "disk", FileSpec(path="relative"))

    view = add_channel(app, admin, "disk", FileSpec(path=str(log)))
    add_rule(app, admin, "disk", timers=RuleTimers(group_wait_s=0))

    assert (view.kind, view.config, view.summary) == (
        "email",
        {"path": "(sealed)"},
        "append to (sealed)",
    )
    [listed] = list_channels(app, admin)
    assert listed.summary == "append to (sealed)"
    with app.db.read() as session:
        stored = session.scalars(select(NotificationChannel)).one()
        audit = session.scalars(
            select(AuditEvent).where(AuditEvent.action == "notify.channel.add")
        ).all()
    assert str(log) not in json.dumps(stored.config)  # sealed at rest by the kind
    assert [a.detail for a in audit if a.success] == [
        {"channel": "disk", "kind": "email", "file": "alerts.jsonl"}
    ]

    add_job(app, admin, "backup", FAILING)
    await next_minute(scheduler, clock)
    assert evaluate_alerts(app, clock.now) == 1
    assert deliver_due(app, clock.now) == 1
    [line] = log.read_text().splitlines()
    assert (json.loads(line)["event"], json.loads(line)["job"]["name"]) == ("failure", "backup")

    # Negative control: the same stored channel, its kind no longer registered.
    monkeypatch.delitem(KINDS, "email")
    with app.db.session() as session:
        channel_id = session.scalars(select(NotificationChannel.id)).one()
        session.add(
            NotificationDelivery(
                channel_id=channel_id,
                event="failure",
                payload={"subject": "s", "text": "t"},
                status="pending",
                attempts=0,
                created_at=clock.now,
                next_attempt_at=clock.now,
            )
        )
    assert deliver_due(app, clock.now) == 1
    with app.db.read() as session:
        last = session.scalars(
            select(NotificationDelivery).order_by(NotificationDelivery.id.desc())
        ).first()
    assert last is not None and last.last_error == "unknown channel kind 'email'"
    assert len(log.read_text().splitlines()) == 1
    assert [c.summary for c in list_channels(app, admin)] == ["(unknown channel kind email)"]
