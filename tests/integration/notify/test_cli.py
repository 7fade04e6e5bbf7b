"""`fleetcron notify ...` through the real click group, on a migrated database.

The CLI is a thin adapter over the service, so these run on SQLite only; the command reads
its database and master key from the environment, as in production.
"""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from cli_env import point_the_cli_at
from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.cli.notify_cmd import notify
from fleetcron.cli.output import run_cli
from fleetcron.scheduler.service import Scheduler
from fleetcron.services.alerts.channels import list_channels, list_rules
from fleetcron.services.alerts.deliveries import deliver_due
from fleetcron.services.alerts.evaluation import evaluate_alerts
from fleetcron.store.schema import AuditEvent, NotificationChannel
from integration.notify.conftest import FAILING, WebhookReceiver, add_job, next_minute

sqlite_only = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
pytestmark = sqlite_only

SECRET = "cli-signing-key-0001"
PLAIN_SMTP = ("--smtp-host", "mail", "--from", "a@x", "--to", "b@x")


@pytest.fixture(autouse=True)
def environment(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    point_the_cli_at(app, monkeypatch)
    for name in ("FLEETCRON_NOTIFY_SECRET", "FLEETCRON_SMTP_PASSWORD"):
        monkeypatch.delenv(name, raising=False)


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = run_cli(notify, list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_webhook_channel_is_added_and_listed_without_its_secret(
    app: App, capsys: pytest.CaptureFixture[str]
) -> None:
    url = "https://hooks.example.com/fleetcron"
    shown = "https://hooks.example.com/…"  # the path often holds a token: masked
    code, out, _ = cli(capsys, "channel", "add", "ops", "--url", url, "--secret", SECRET)
    assert (code, out) == (0, f"channel ops added (webhook: POST {shown} (signed))\n")

    code, out, _ = cli(capsys, "channel", "list", "--json")

    assert code == 0
    assert SECRET not in out
    [channel] = json.loads(out)
    assert (channel["name"], channel["kind"], channel["has_secret"]) == ("ops", "webhook", True)
    assert channel["config"] == {"url": shown}
    with app.db.read() as session:
        stored = session.scalars(select(NotificationChannel)).one()
        audited = [e.detail for e in session.scalars(select(AuditEvent))]
    assert stored.secret_enc is not None
    assert app.master_key.decrypt(stored.secret_enc).reveal() == SECRET.encode()
    assert SECRET not in json.dumps(audited)


def test_the_webhook_secret_can_come_from_the_environment(
    app: App, admin: Actor, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLEETCRON_NOTIFY_SECRET", SECRET)

    cli(capsys, "channel", "add", "ops", "--url", "https://hooks.example.com/x")

    [channel] = list_channels(app, admin)
    assert channel.has_secret


def test_an_email_channel_shows_its_server_and_recipients(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = cli(
        capsys,
        "channel",
        "add",
        "mail",
        "--smtp-host",
        "smtp.example.com",
        "--smtp-port",
        "587",
        "--starttls",
        "--username",
        "alerts",
        "--password",
        "smtp-password-1",
        "--from",
        "fleetcron@example.com",
        "--to",
        "ops@example.com",
        "--to",
        "dba@example.com",
    )

    assert code == 0
    assert out == (
        "channel mail added (email: smtp.example.com:587 starttls as alerts "
        "from fleetcron@example.com to ops@example.com, dba@example.com)\n"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--url", "ftp://files.example.com/x"], "url: ftp://files.example.com is not a valid"),
        (["--url", "https://u:p@example.com/x"], "url: credentials in the URL are not supported"),
        (["--url", "http://[::1"], "url: not a valid webhook URL (Invalid IPv6 URL)"),
        (["--url", "https://example.com:99999/x"], "url: not a valid webhook URL (Port out of"),
        (["--url", "https://example.com/x", "--secret", "short"], "secret: must be 16 to"),
        (["--smtp-host", "mail", "--to", "ops@example.com"], "from: an email channel needs"),
        (["--smtp-host", "mail", "--from", "a@example.com"], "to: 0 recipients"),
        (["--smtp-host", "mail", "--from", "nobody", "--to", "ops@x"], "from: 'nobody' is not"),
        (["--smtp-host", "mail", "--smtp-port", "0", "--from", "a@x", "--to", "b@x"], "smtp_port"),
        (
            ["--smtp-host", "mail", "--from", "a@x", "--to", "b@x", "--username", "u"],
            "password: an SMTP login needs both",
        ),
        (
            [*PLAIN_SMTP, "--username", "u", "--password", "pw-123456"],
            "starttls: a password is sent only over STARTTLS",
        ),
        ([], "a channel needs exactly one of --url (webhook) or --smtp-host (email)"),
    ],
)
def test_invalid_channels_are_refused_naming_the_field(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, out, err = cli(capsys, "channel", "add", "bad", *args)

    assert (code, out) == (2, "")
    # A secret given on the command line is warned about first; the error comes last.
    assert err.splitlines()[-1].startswith(f"error: {message}"), err


def test_a_viewer_may_not_add_a_channel(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(
        capsys, "channel", "add", "ops", "--url", "https://example.com/x", "--as", "victor"
    )

    assert code == 2
    assert "needs the admin role" in err


def test_rules_are_added_listed_and_removed(
    app: App, admin: Actor, box: str, capsys: pytest.CaptureFixture[str]
) -> None:
    add_job(app, admin, "backup", "true")
    cli(capsys, "channel", "add", "ops", "--url", "https://example.com/x")

    added = cli(capsys, "rule", "add", "--channel", "ops", "--job", "backup", "--no-late")
    duplicate = cli(capsys, "rule", "add", "--channel", "ops", "--job", "backup")
    listed = cli(capsys, "rule", "list", "--json")
    [rule] = json.loads(listed[1])
    removed = cli(capsys, "rule", "rm", str(rule["id"]))
    missing = cli(capsys, "rule", "rm", str(rule["id"]))

    assert added == (0, f"rule {rule['id']} added: failure, recovery of job backup to ops\n", "")
    assert duplicate[0] == 2 and "already has rule" in duplicate[2]
    assert (rule["channel"], rule["job"], rule["events"]) == (
        "ops",
        "backup",
        ["failure", "recovery"],
    )
    assert removed == (0, f"rule {rule['id']} removed\n", "")
    assert missing[0] == 2 and "does not exist" in missing[2]


def test_a_rule_without_events_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    cli(capsys, "channel", "add", "ops", "--url", "https://example.com/x")

    code, _, err = cli(
        capsys, "rule", "add", "--channel", "ops", "--no-failure", "--no-late", "--no-recovery"
    )

    assert (code, err) == (
        2,
        "error: events: a rule needs at least one of failure, late, recovery\n",
    )


def test_channel_test_sends_a_test_message(
    capsys: pytest.CaptureFixture[str], webhook: WebhookReceiver
) -> None:
    cli(capsys, "channel", "add", "ops", "--url", webhook.url, "--secret", SECRET)

    code, out, _ = cli(capsys, "channel", "test", "ops")

    assert (code, out) == (0, "test message sent to ops\n")
    assert json.loads(webhook.requests[0].body)["event"] == "test"


def test_channel_test_says_why_a_message_did_not_arrive(
    capsys: pytest.CaptureFixture[str], webhook: WebhookReceiver
) -> None:
    cli(capsys, "channel", "add", "ops", "--url", webhook.url)
    webhook.answer(503)

    code, _, err = cli(capsys, "channel", "test", "ops")

    assert code == 1
    assert err == f"error: http://127.0.0.1:{webhook.port} answered HTTP 503 Service Unavailable\n"


def test_removing_a_channel_removes_its_rules(
    admin: Actor, app: App, capsys: pytest.CaptureFixture[str]
) -> None:
    cli(capsys, "channel", "add", "ops", "--url", "https://example.com/x")
    cli(capsys, "rule", "add", "--channel", "ops")

    code, out, _ = cli(capsys, "channel", "rm", "ops")

    assert (code, out) == (0, "channel ops removed (with 1 rule(s))\n")
    assert list_rules(app, admin) == []


async def test_deliveries_lists_what_was_queued_and_sent(
    app: App,
    admin: Actor,
    box: str,
    scheduler: Scheduler,
    clock: FakeClock,
    capsys: pytest.CaptureFixture[str],
    webhook: WebhookReceiver,
) -> None:
    cli(capsys, "channel", "add", "ops", "--url", webhook.url)
    cli(capsys, "rule", "add", "--channel", "ops", "--group-wait", "0s")
    add_job(app, admin, "backup", FAILING)
    await next_minute(scheduler, clock)
    evaluate_alerts(app, clock.now)
    deliver_due(app, clock.now)

    code, out, _ = cli(capsys, "deliveries", "--json")

    assert code == 0
    [delivery] = json.loads(out)
    assert (delivery["channel"], delivery["event"], delivery["status"]) == (
        "ops",
        "failure",
        "sent",
    )
    assert delivery["subject"] == "[fleetcron] #1 backup failing: 1 target"
    assert delivery["attempts"] == 1
    code, out, _ = cli(capsys, "deliveries", "--status", "failed", "--json")
    assert json.loads(out) == []


def test_a_rule_takes_its_timers_and_refuses_one_out_of_range(
    app: App, capsys: pytest.CaptureFixture[str]
) -> None:
    cli(capsys, "channel", "add", "ops", "--url", "https://example.com/x")

    too_long = cli(capsys, "rule", "add", "--channel", "ops", "--group-wait", "2h")
    not_one = cli(capsys, "rule", "add", "--channel", "ops", "--repeat-interval", "often")
    added = cli(capsys, "rule", "add", "--channel", "ops", "--repeat-interval", "1h")
    [rule] = json.loads(cli(capsys, "rule", "list", "--json")[1])

    assert too_long[0] == 2 and "group_wait_s: 7200 is out of range" in too_long[2]
    assert not_one[0] == 2 and "repeat_interval_s" in not_one[2]
    assert added[0] == 0
    assert (rule["group_wait_s"], rule["group_interval_s"], rule["repeat_interval_s"]) == (
        30.0,
        300.0,
        3600.0,
    )


def test_a_rule_takes_its_thresholds_and_refuses_one_out_of_range(
    app: App, capsys: pytest.CaptureFixture[str]
) -> None:
    cli(capsys, "channel", "add", "ops", "--url", "https://example.com/x")

    zero = cli(capsys, "rule", "add", "--channel", "ops", "--failures-before", "0")
    too_many = cli(capsys, "rule", "add", "--channel", "ops", "--successes-before", "101")
    nothing = json.loads(cli(capsys, "rule", "list", "--json")[1])
    added = cli(
        capsys,
        "rule",
        "add",
        "--channel",
        "ops",
        "--failures-before",
        "3",
        "--successes-before",
        "2",
    )
    [rule] = json.loads(cli(capsys, "rule", "list", "--json")[1])
    table = cli(capsys, "rule", "list")[1]

    assert zero[0] == 2 and "failures_before: 0 is not a whole number from 1 to 100" in zero[2]
    assert too_many[0] == 2 and "successes_before: 101" in too_many[2]
    assert nothing == []  # nothing half-saved
    assert added[0] == 0
    assert (rule["failures_before"], rule["successes_before"]) == (3, 2)
    assert "3/2" in table
