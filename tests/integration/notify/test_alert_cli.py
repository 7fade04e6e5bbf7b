"""`fleetcron alert ...` and `fleetcron silence ...` through the real click groups: bad
input exits 2 naming the field, with nothing changed."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import func, select

from cli_env import point_the_cli_at
from fleetcron.app import Actor, App
from fleetcron.cli.alert_cmd import alert, silence
from fleetcron.cli.output import run_cli
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import Silence

pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


@pytest.fixture(autouse=True)
def environment(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    point_the_cli_at(app, monkeypatch)
    admin = Actor("admin", "admin")
    targets.add_target(app, admin, TargetSpec("web1", TargetKind.LOCAL, labels=["rack=r12"]))
    jobs.add_job(app, admin, "backup", JobSpec("0 2 * * *", "backup"), target="web1")


def run(capsys: pytest.CaptureFixture[str], group: str, *args: str) -> tuple[int, str, str]:
    code = run_cli(alert if group == "alert" else silence, list(args))
    out, err = capsys.readouterr()
    return code, out, err


def silences(app: App) -> int:
    with app.db.read() as session:
        return int(session.scalar(select(func.count()).select_from(Silence)) or 0)


def test_a_silence_is_added_listed_and_expired(
    app: App, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(
        capsys, "silence", "add", "--selector", "rack=r12", "--duration", "2h", "--reason", "swap"
    )
    assert code == 0 and out.startswith("silence #1 added: selector=rack=r12 until ")

    code, out, _ = run(capsys, "silence", "list", "--json")
    [listed] = json.loads(out)
    assert (listed["scope"], listed["reason"], listed["active"]) == (
        "selector=rack=r12",
        "swap",
        True,
    )

    assert run(capsys, "silence", "expire", "1")[0] == 0
    assert json.loads(run(capsys, "silence", "list", "--json")[1]) == []


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--job", "nosuch", "--duration", "1h"], "job"),
        (["--target", "nosuch", "--duration", "1h"], "target"),
        (["--selector", "rack=r99", "--duration", "1h"], "selector"),
        (["--job", "backup", "--duration", "30s"], "duration"),
        (["--job", "backup", "--duration", "soon"], "duration"),
        (["--job", "backup", "--until", "yesterday"], "until"),
        (["--job", "backup"], "duration"),
    ],
)
def test_a_bad_silence_exits_2_naming_the_field(
    app: App, capsys: pytest.CaptureFixture[str], args: list[str], field: str
) -> None:
    code, _, err = run(capsys, "silence", "add", *args, "--reason", "x")

    assert code == 2
    assert field in err
    assert silences(app) == 0


def test_acknowledging_what_does_not_exist_exits_2(
    app: App, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "alert", "ack", "42")

    assert code == 2
    assert "incident 42 does not exist" in err
    assert run(capsys, "alert", "list", "--json")[1].strip() == "[]"
