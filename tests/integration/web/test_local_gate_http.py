"""Regression: an operator may not bring his own command onto a privileged local target by
relabelling it (the reproduction of the audit's finding N1, over HTTP on the real app).

Preconditions as in the finding: local targets enabled, ``local_run_as`` unset, the
installation's default ``local_job_role`` (admin), and an admin's local target ``here``.
Before the local gate, step 2 gave the operator's bulk job an assignment on ``here``
(audited ``job.extend``) and step 3 queued a run of it there.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from fixtures.app import FakeClock, make_settings
from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import Assignment, AuditEvent, Run
from integration.web.conftest import API, bearer, new_client, token_for

ESC = {
    "name": "esc4",
    "bulk": True,
    "selector": "esc4=1",
    "schedule": "0 0 1 1 *",
    "command": 'head -c 12 "$FLEETCRON_DATA_DIR/master.key"',
}


@pytest.fixture
def strict(database_url: str, tmp_path: Path, clock: FakeClock) -> Iterator[App]:
    """The test database with the defaults of a real install for local commands."""
    the_app = App.open(
        make_settings(tmp_path / "strict", database_url, local_job_role="admin"), clock=clock
    )
    targets.add_target(the_app, Actor("admin", "admin"), TargetSpec("here", TargetKind.LOCAL))
    targets.label_target(the_app, Actor("admin", "admin"), "here", ["role=sched"])
    yield the_app
    the_app.close()


@pytest.fixture
def http(strict: App) -> Iterator[TestClient]:
    with new_client(strict) as the_client:
        yield the_client


def assignments_on_here(app: App) -> list[str]:
    with app.db.read() as session:
        rows = session.scalars(select(Assignment).join(Assignment.target))
        return sorted(a.job.name for a in rows if a.target.name == "here")


def events(app: App, action: str) -> list[AuditEvent]:
    with app.db.read() as session:
        return list(session.scalars(select(AuditEvent).where(AuditEvent.action == action)))


@pytest.mark.parametrize("route", ["patch", "labels"])
def test_relabelling_a_local_target_does_not_bring_an_operators_job_onto_it(
    strict: App, http: TestClient, route: str
) -> None:
    oper = bearer(token_for(strict, "operator"))

    created = http.post(f"{API}/jobs", json=ESC, headers=oper)
    assert created.status_code == 201, created.text
    if route == "patch":
        labelled = http.patch(
            f"{API}/targets/here", json={"labels": {"role": "sched", "esc4": "1"}}, headers=oper
        )
    else:
        labelled = http.post(
            f"{API}/targets/here/labels", json={"labels": {"esc4": "1"}}, headers=oper
        )
    ran = http.post(f"{API}/jobs/esc4/run", json={"target": "here"}, headers=oper)

    # The labelling itself succeeds; the job simply does not extend to the local target.
    assert labelled.status_code == 200, labelled.text
    assert http.get(f"{API}/targets/here", headers=oper).json()["labels"]["esc4"] == "1"
    assert assignments_on_here(strict) == []
    assert ran.status_code == 404, ran.text
    with strict.db.read() as session:
        assert session.scalars(select(Run)).all() == []
    assert events(strict, "job.extend") == []
    refused = events(strict, "job.extend_refused")
    assert [(e.job_name, e.target_name, e.success) for e in refused] == [("esc4", "here", False)]
    assert "olivia (operator)" in refused[0].detail["error"]
    assert http.get(f"{API}/users", headers=oper).status_code == 403


def test_an_admin_saving_the_job_clears_it_for_the_local_target(
    strict: App, http: TestClient
) -> None:
    oper = bearer(token_for(strict, "operator"))
    admin = bearer(token_for(strict, "admin"))
    assert http.post(f"{API}/jobs", json=ESC, headers=oper).status_code == 201
    http.post(f"{API}/targets/here/labels", json={"labels": {"esc4": "1"}}, headers=oper)

    saved = http.patch(f"{API}/jobs/esc4", json={"command": "uptime"}, headers=admin)
    # The label is already there: pairing again (or any extension) brings the job on now.
    http.post(f"{API}/targets/here/labels", json={"labels": {"other": "1"}}, headers=oper)

    assert saved.status_code == 200, saved.text
    assert assignments_on_here(strict) == ["esc4"]
    # And the operator rewriting the admin's command there is refused as before (403).
    rewrite = http.patch(f"{API}/jobs/esc4", json={"command": "id"}, headers=oper)
    assert rewrite.status_code == 403, rewrite.text
