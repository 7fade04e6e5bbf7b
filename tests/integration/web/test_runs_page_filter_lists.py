"""The runs page's filter lists (SQLite and PostgreSQL): the job and target names come
from names-only statements. The page used to load every job with every assignment and its
target for the job list, and every target in full for the target list: 14-34 s at 50 bulk
jobs on 5,000 targets and a million runs (docs/benchmarks.md)."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient
from sqlalchemy import insert, select

from fleetcron.app import Actor, App
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import reads as target_reads
from fleetcron.store.schema import Assignment, Target
from sql_statements import statements

ADMIN = Actor("admin", "admin")
_ASSIGNMENTS = re.compile(r"\bassignments\b")
_OPTION = re.compile(r"<option(?: selected)?>([^<]+)</option>")
_JOB_OPTION = re.compile(r'<option value="([^"]+)">')


def add_local_targets(app: App, names: list[str]) -> None:
    now = app.now()
    with app.db.engine.begin() as conn:
        conn.execute(
            insert(Target.__table__),  # type: ignore[arg-type]
            [
                {"name": n, "kind": "local", "paired": True, "labels": {"zone": "a"}, "notes": ""}
                | {"created_at": now, "updated_at": now}
                for n in names
            ],
        )


def reads_full_targets(statement: str) -> bool:
    return "FROM targets" in statement and "targets.labels" in statement


def test_the_runs_page_lists_job_and_target_names_without_loading_them(
    app: App, client: TestClient, as_viewer: dict[str, str]
) -> None:
    names = [f"t{i:02d}" for i in range(25)]
    add_local_targets(app, names)
    jobs.add_job(app, ADMIN, "nightly", JobSpec("0 2 * * *", "true"), bulk=True)
    jobs.add_job(app, ADMIN, "backup", JobSpec("0 3 * * *", "backup.sh"), target="t03")
    with app.db.read() as session:
        assert len(session.scalars(select(Assignment)).all()) == 26
    client.get("/runs", headers=as_viewer)  # warm-up: token and settings caches
    with statements(app) as page_reads:
        response = client.get("/runs", headers=as_viewer)
    assert response.status_code == 200, response.text
    assert _OPTION.findall(response.text)[-25:] == names
    assert set(_JOB_OPTION.findall(response.text)) >= {"backup", "nightly"}
    assert not any(_ASSIGNMENTS.search(s) for s in page_reads), page_reads
    assert not any(reads_full_targets(s) for s in page_reads), page_reads
    assert jobs.job_names(app, ADMIN) == ["backup", "nightly"]
    assert target_reads.target_names(app, ADMIN) == names
    # Negative control: the full listings the page used do read assignments and whole
    # target rows, so the checks above can fail.
    with statements(app) as listed:
        jobs.list_jobs(app, ADMIN)
        target_reads.list_targets(app, ADMIN)
    assert any(_ASSIGNMENTS.search(s) for s in listed), listed
    assert any(reads_full_targets(s) for s in listed), listed
