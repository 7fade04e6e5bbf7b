"""`fleetcron job plan` and ``GET /api/v1/jobs/{name}/plan`` show a manual run's rollout
before it runs, and `job run` / ``POST /api/v1/jobs/{name}/run`` take ``--only`` and
``--all-at-once``; bad input names the field (exit 2, a 422 with a JSON error) and
changes nothing. On SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import re
import threading

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from cli_env import point_the_cli_at
from fleetcron.app import Actor, App
from fleetcron.cli.main import cli
from fleetcron.cli.output import run_cli
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.scheduler.service import Scheduler
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import AuditEvent, Run
from integration.web.conftest import error_of

ADMIN = Actor("admin", "admin")


def a_rolled_out_job(app: App) -> None:
    for name in ("alpha", "bravo", "charlie", "delta"):
        labels = ["role=canary"] if name == "delta" else []
        targets.add_target(app, ADMIN, TargetSpec(name, TargetKind.LOCAL, labels=labels))
    spec = JobSpec(
        "0 3 * * *",
        "systemctl reload app",
        canary="role=canary",
        batch="2",
        batch_pause_s=60,
        max_failures="50%",
        spread_s=120,
        jitter_s=10,
    )
    jobs.add_job(app, ADMIN, "reload", spec, bulk=True)
    jobs.set_enabled(app, ADMIN, "reload", False, target="charlie")


def runs_and_audit(app: App) -> tuple[int, int]:
    with app.db.read() as session:
        runs = session.scalar(select(func.count(Run.id))) or 0
        events = session.scalar(
            select(func.count(AuditEvent.id)).where(AuditEvent.action == "job.run")
        )
    return runs, events or 0


def test_job_plan_prints_the_batches_the_threshold_and_the_excluded_targets(
    app: App, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    a_rolled_out_job(app)
    point_the_cli_at(app, monkeypatch)

    assert run_cli(cli, ["job", "plan", "reload"]) == 0
    out = capsys.readouterr().out

    assert "rolled out (canary role=canary, batch 2, 60 s between batches, max_failures 50%)" in out
    assert "2 failed of 3 (max_failures 50%) halt the targets not started yet" in out
    assert out.index("delta") < out.index("alpha") < out.index("bravo")
    assert "excluded: charlie: the job is paused on this target" in out
    assert "nothing was run" in out
    assert runs_and_audit(app) == (0, 0)


def test_job_plan_json_gives_each_target_its_zone_and_start_window(
    app: App, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    a_rolled_out_job(app)
    point_the_cli_at(app, monkeypatch)

    assert run_cli(cli, ["job", "plan", "reload", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)

    assert [[t["target"] for t in b["targets"]] for b in plan["batches"]] == [
        ["delta"],
        ["alpha", "bravo"],
    ]
    assert plan["batches"][0]["canary"] is True
    assert plan["threshold"] == 2 and plan["members"] == 3
    first = plan["batches"][1]["targets"][0]
    assert first["zone"] == "UTC"
    assert 0 <= first["window"]["offset_s"] < 120 and first["window"]["jitter_s"] == 10
    assert first["next_start_local"].startswith(("20", "19"))
    assert plan["excluded"] == [{"target": "charlie", "why": "the job is paused on this target"}]


def test_all_at_once_shows_one_batch_and_no_threshold(
    app: App, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Negative control of the two above: the same job, previewed all at once.
    a_rolled_out_job(app)
    point_the_cli_at(app, monkeypatch)

    assert run_cli(cli, ["job", "plan", "reload", "--all-at-once", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)

    assert plan["rolled_out"] is False and plan["threshold"] is None
    assert [[t["target"] for t in b["targets"]] for b in plan["batches"]] == [
        ["delta", "alpha", "bravo"]
    ]


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--only", "broken"], "only"),
        (["--selector", " "], "selector"),
        (["--failed"], "failed"),
        (["--target", "nowhere"], "target"),
        (["--slot", "yesterday"], "slot"),
        (["--slot", "2020-01-01T00:00:00+00:00"], "slot"),
    ],
)
def test_job_plan_and_job_run_refuse_bad_input_with_exit_2_naming_the_field(
    app: App,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    field: str,
) -> None:
    a_rolled_out_job(app)
    point_the_cli_at(app, monkeypatch)

    for command in ("plan", "run"):
        assert run_cli(cli, ["job", command, "reload", *args]) == 2
        err = capsys.readouterr().err
        assert field in err, err
    assert runs_and_audit(app)[0] == 0


def test_job_run_all_at_once_queues_every_target_and_the_default_waits_its_turn(
    app: App, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    a_rolled_out_job(app)
    point_the_cli_at(app, monkeypatch)

    assert run_cli(cli, ["job", "run", "reload"]) == 0
    assert run_cli(cli, ["job", "run", "reload", "--all-at-once"]) == 0
    capsys.readouterr()

    with app.db.read() as session:
        rows = session.execute(select(Run.status, Run.created_at).order_by(Run.id)).all()
    first, second = rows[:3], rows[3:]
    assert {str(s) for s, _ in first} == {"pending"}
    assert {str(s) for s, _ in second} == {"queued"}


def test_the_api_plan_is_the_cli_plan(
    app: App,
    client: TestClient,
    as_viewer: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    a_rolled_out_job(app)
    point_the_cli_at(app, monkeypatch)
    assert run_cli(cli, ["job", "plan", "reload", "--json"]) == 0
    from_cli = json.loads(capsys.readouterr().out)

    response = client.get("/api/v1/jobs/reload/plan", headers=as_viewer)

    assert response.status_code == 200, response.text
    assert response.json() == from_cli


def test_the_api_plan_refuses_an_unknown_only_word_naming_it(
    app: App, client: TestClient, as_viewer: dict[str, str]
) -> None:
    a_rolled_out_job(app)
    response = client.get("/api/v1/jobs/reload/plan", params={"only": "broken"}, headers=as_viewer)
    assert response.status_code == 422
    error = error_of(response)
    assert error["field"] == "only" and "broken" in str(error["message"])


def test_the_api_run_all_at_once_is_audited_and_a_viewer_may_not_run(
    app: App, client: TestClient, as_operator: dict[str, str], as_viewer: dict[str, str]
) -> None:
    a_rolled_out_job(app)

    refused = client.post("/api/v1/jobs/reload/run", json={"all_at_once": True}, headers=as_viewer)
    assert refused.status_code == 403
    assert runs_and_audit(app)[0] == 0

    bad = client.post("/api/v1/jobs/reload/run", json={"only": ["nope"]}, headers=as_operator)
    assert bad.status_code == 422 and error_of(bad)["field"] == "only"
    assert runs_and_audit(app)[0] == 0

    ran = client.post("/api/v1/jobs/reload/run", json={"all_at_once": True}, headers=as_operator)
    assert ran.status_code == 202, ran.text
    with app.db.read() as session:
        detail = session.scalars(
            select(AuditEvent.detail).where(AuditEvent.action == "job.run", AuditEvent.success)
        ).one()
        statuses = set(session.scalars(select(Run.status)))
    assert detail["rollout"] == "all_at_once"
    assert statuses == {"queued"}


class RunningScheduler:
    """A real scheduler (real clock, real local processes) on the test's database, in a
    thread of its own, for the CLI's --wait to watch."""

    def __init__(self, app: App) -> None:
        settings = app.settings.model_copy(update={"tick_s": 0.1})
        self.app = App.open(settings)
        self.loop = asyncio.new_event_loop()
        self.stop = asyncio.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(Scheduler(self.app).serve(self.stop))

    def __enter__(self) -> RunningScheduler:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(timeout=30)
        self.loop.close()
        self.app.close()


def test_job_run_wait_follows_the_rollout_and_says_why_the_rest_was_skipped(
    app: App, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("alpha", "bravo", "charlie"):
        targets.add_target(app, ADMIN, TargetSpec(name, TargetKind.LOCAL))
    spec = JobSpec("0 3 1 1 *", 'test "$FLEETCRON_TARGET" != bravo', batch="1", max_failures="1")
    jobs.add_job(app, ADMIN, "deploy", spec, bulk=True)
    point_the_cli_at(app, monkeypatch)

    with RunningScheduler(app), pytest.raises(SystemExit) as ended:
        run_cli(cli, ["job", "run", "deploy", "--wait", "--wait-timeout", "60"])
    out = capsys.readouterr().out

    assert ended.value.code == 1, out  # not every run succeeded
    assert re.search(r"on alpha: succeeded", out) and re.search(r"on bravo: failed", out)
    assert re.search(r"on charlie: skipped", out)
    assert "reason: rollout halted: max_failures 1 reached after failures on bravo" in out


def test_job_run_wait_through_a_rollout_that_ran_through_exits_0(
    app: App, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Negative control of the test above: nothing fails, nothing is skipped.
    for name in ("alpha", "bravo"):
        targets.add_target(app, ADMIN, TargetSpec(name, TargetKind.LOCAL))
    spec = JobSpec("0 3 1 1 *", "true", batch="1", max_failures="1")
    jobs.add_job(app, ADMIN, "deploy", spec, bulk=True)
    point_the_cli_at(app, monkeypatch)

    with RunningScheduler(app):
        code = run_cli(cli, ["job", "run", "deploy", "--wait", "--wait-timeout", "60"])
    out = capsys.readouterr().out

    assert code == 0, out
    assert out.count(": succeeded") == 2 and "reason:" not in out
