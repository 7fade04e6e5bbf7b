"""A request refused by its route's role (or CSRF) check is audited, aggregated per caller,
action and reason like ``login.refused``: a flood of refusals leaves a handful of rows."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from fleetcron.app import App
from fleetcron.store.schema import AuditEvent
from fleetcron.web import deps
from integration.web.conftest import API, bearer, csrf_token_of, log_in, new_client, token_for

JOB = {"name": "probe", "schedule": "0 3 * * *", "command": "true", "bulk": True}


def _refused_rows(app: App, actor: str) -> list[tuple[str, int, str]]:
    with app.db.read() as session:
        rows = session.scalars(
            select(AuditEvent)
            .where(AuditEvent.actor == actor, AuditEvent.success.is_(False))
            .order_by(AuditEvent.id)
        )
        return [(r.action, r.detail["refused"], r.detail["reason"]) for r in rows]


def test_a_viewers_flood_of_refused_posts_leaves_a_handful_of_rows(
    app: App, client: TestClient
) -> None:
    viewer = bearer(token_for(app, "viewer"))
    jobs = [client.post(f"{API}/jobs", json=JOB, headers=viewer).status_code for _ in range(100)]
    stops = [client.post(f"{API}/runs/1/stop", headers=viewer).status_code for _ in range(20)]
    # control: the operator's allowed post writes no refusal
    allowed = client.post(f"{API}/jobs", json=JOB, headers=bearer(token_for(app, "operator")))

    assert jobs == [403] * 100 and stops == [403] * 20
    assert _refused_rows(app, "victor") == [
        ("job.add", 1, "role"),
        ("job.add", 10, "role"),
        ("job.add", 100, "role"),
        ("run.stop", 1, "role"),
        ("run.stop", 10, "role"),
    ]
    assert allowed.status_code == 201
    assert _refused_rows(app, "olivia") == []


def test_refused_form_posts_and_a_missing_csrf_token_are_audited(app: App) -> None:
    with new_client(app) as browser:
        log_in(browser, "viewer")
        form = browser.post("/jobs/x/rerun-failed", data={"csrf_token": csrf_token_of(browser)})
    with new_client(app) as other:
        log_in(other, "operator")
        no_csrf = other.post("/jobs/x/rerun-failed", data={})

    assert form.status_code == 403 and no_csrf.status_code == 403
    assert _refused_rows(app, "victor") == [("job.run", 1, "role")]
    assert _refused_rows(app, "olivia") == [("job.run", 1, "csrf")]


def test_without_aggregation_the_same_flood_writes_a_row_each(
    app: App, client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Negative control: with every refusal due for the log, the query above counts 100
    rows, so the handful it counts with aggregation is measured, not assumed."""
    monkeypatch.setattr(deps, "audit_at", lambda count: True)
    viewer = bearer(token_for(app, "viewer"))
    for _ in range(100):
        client.post(f"{API}/jobs", json=JOB, headers=viewer)

    assert len(_refused_rows(app, "victor")) == 100
