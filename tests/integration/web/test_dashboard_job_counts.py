"""The dashboard's job counts (SQLite and PostgreSQL): bulk and individual jobs counted in
one grouped statement, whatever the number of assignments (it loaded every job with every
assignment and its target: 30 s at 50 bulk jobs on 5,000 targets, docs/benchmarks.md)."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient
from sqlalchemy import insert, select

from fleetcron.app import Actor, App
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.store.schema import Assignment, Target
from sql_statements import statements

ADMIN = Actor("admin", "admin")
_COUNT = re.compile(r'<span class="big">(\d+)</span><span class="label">(bulk|individual) jobs')


def counts_shown(client: TestClient, headers: dict[str, str]) -> dict[str, int]:
    response = client.get("/", headers=headers)
    assert response.status_code == 200, response.text
    return {kind: int(n) for n, kind in _COUNT.findall(response.text)}


def add_local_targets(app: App, names: list[str]) -> None:
    now = app.now()
    with app.db.engine.begin() as conn:
        conn.execute(
            insert(Target.__table__),  # type: ignore[arg-type]
            [
                {"name": n, "kind": "local", "paired": True, "labels": {}, "notes": ""}
                | {"created_at": now, "updated_at": now}
                for n in names
            ],
        )


def test_the_dashboard_counts_bulk_and_individual_jobs(
    app: App, client: TestClient, as_viewer: dict[str, str]
) -> None:
    assert counts_shown(client, as_viewer) == {"bulk": 0, "individual": 0}
    add_local_targets(app, ["one", "two"])
    jobs.add_job(app, ADMIN, "nightly", JobSpec("0 2 * * *", "true"), bulk=True)
    jobs.add_job(app, ADMIN, "hourly", JobSpec("0 * * * *", "date"), bulk=True)
    jobs.add_job(app, ADMIN, "backup", JobSpec("0 3 * * *", "backup.sh"), target="one")
    assert counts_shown(client, as_viewer) == {"bulk": 2, "individual": 1}
    assert jobs.count_by_origin(app, ADMIN) == {"bulk": 2, "individual": 1}


def test_counting_the_jobs_does_not_read_their_assignments(app: App) -> None:
    add_local_targets(app, [f"t{i:02d}" for i in range(30)])
    jobs.add_job(app, ADMIN, "nightly", JobSpec("0 2 * * *", "true"), bulk=True)
    with app.db.read() as session:
        assert len(session.scalars(select(Assignment)).all()) == 30
    with statements(app) as seen:
        assert jobs.count_by_origin(app, ADMIN) == {"bulk": 1}
        counted = list(seen)
        seen.clear()
        jobs.list_jobs(app, ADMIN)  # negative control: the full listing reads them
        listed = list(seen)
    assert not any("assignments" in s for s in counted), counted
    assert any("assignments" in s for s in listed), listed
