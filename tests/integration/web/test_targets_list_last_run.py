"""The targets list's "Last run" column (SQLite and PostgreSQL): each target shows its
newest run that started, read for all targets in a constant number of statements (the
list used to issue two per target, which took minutes at 5,000 targets and a million
runs; see docs/benchmarks.md)."""

from __future__ import annotations

import itertools
import re
from datetime import timedelta

from fastapi.testclient import TestClient
from sqlalchemy import insert, select

from fleetcron.app import Actor, App
from fleetcron.services.runs.reads import RunFilter
from fleetcron.services.runs.views import list_run_views
from fleetcron.store.schema import Run, Target
from sql_statements import statements

VIEWER = Actor("victor", "viewer")
_ROW = re.compile(r'<tr data-target="([^"]+)">(.*?)</tr>', re.DOTALL)
_RUN_LINK = re.compile(r'href="/runs/(\d+)"')
_ASSIGNMENT_IDS = itertools.count(1_000_000)


def add_targets(app: App, names: list[str]) -> dict[str, int]:
    now = app.now()
    with app.db.engine.begin() as conn:
        conn.execute(
            insert(Target.__table__),  # type: ignore[arg-type]
            [
                {
                    "name": name,
                    "kind": "local",
                    "paired": True,
                    "labels": {},
                    "notes": "",
                    "created_at": now,
                    "updated_at": now,
                }
                for name in names
            ],
        )
    with app.db.read() as session:
        rows = session.execute(select(Target.name, Target.id).where(Target.name.in_(names)))
        return {name: target_id for name, target_id in rows}


def add_run(app: App, target: str, target_id: int, minutes_ago: int, status: str) -> int:
    slot = app.now() - timedelta(minutes=minutes_ago)
    started = None if status in ("skipped", "missed") else slot + timedelta(seconds=1)
    with app.db.engine.begin() as conn:
        result = conn.execute(
            insert(Run.__table__).returning(Run.__table__.c.id),  # type: ignore[arg-type]
            {
                # runs keep plain ids (history outlives assignments): one of its own each
                "assignment_id": next(_ASSIGNMENT_IDS),
                "job_id": 1,
                "target_id": target_id,
                "job_name": "nightly",
                "target_name": target,
                "origin": "individual",
                "command": "true",
                "scheduled_for": slot,
                "trigger": "schedule",
                "attempt": 1,
                "status": status,
                "exit_code": 0 if status == "succeeded" else None,
                "started_at": started,
                "finished_at": None if started is None else started + timedelta(seconds=1),
                "node": "test",
                "actor": "system",
                "created_at": slot,
            },
        )
        return int(result.scalar_one())


def last_run_cells(client: TestClient, headers: dict[str, str]) -> dict[str, str | None]:
    response = client.get("/targets", headers=headers)
    assert response.status_code == 200, response.text
    cells: dict[str, str | None] = {}
    for name, row in _ROW.findall(response.text):
        link = _RUN_LINK.search(row)
        cells[name] = link.group(1) if link else None
        if link is None:
            assert "never ran" in row, row
    return cells


def test_each_target_shows_its_newest_started_run(
    app: App, client: TestClient, as_viewer: dict[str, str]
) -> None:
    ids = add_targets(app, ["alpha", "bravo", "charlie", "delta"])
    add_run(app, "alpha", ids["alpha"], 30, "succeeded")
    newest_alpha = add_run(app, "alpha", ids["alpha"], 10, "failed")
    add_run(app, "alpha", ids["alpha"], 20, "succeeded")  # inserted later, but older
    add_run(app, "alpha", ids["alpha"], 5, "skipped")  # newer, but never started
    newest_bravo = add_run(app, "bravo", ids["bravo"], 3, "succeeded")
    add_run(app, "charlie", ids["charlie"], 1, "missed")  # its only slot never started
    cells = last_run_cells(client, as_viewer)
    assert cells["alpha"] == str(newest_alpha)
    assert cells["bravo"] == str(newest_bravo)
    assert cells["charlie"] is None and cells["delta"] is None


def test_the_list_reads_every_targets_last_run_in_a_constant_number_of_statements(
    app: App, client: TestClient, as_viewer: dict[str, str]
) -> None:
    few = add_targets(app, [f"few{i}" for i in range(3)])
    for name, target_id in few.items():
        add_run(app, name, target_id, 2, "succeeded")
    client.get("/targets", headers=as_viewer)  # warm-up: token and settings caches
    with statements(app) as small:
        assert len([c for c in last_run_cells(client, as_viewer).values() if c]) == 3
    many = add_targets(app, [f"many{i:02d}" for i in range(40)])
    for name, target_id in many.items():
        add_run(app, name, target_id, 2, "succeeded")
    with statements(app) as large:
        assert len([c for c in last_run_cells(client, as_viewer).values() if c]) == 43
    assert len(large) == len(small), (len(small), len(large))
    # Negative control: the counter does see statements that grow with the targets (the
    # per-target reads the list used to make).
    with statements(app) as per_target:
        for name in [*few, *many]:
            list_run_views(app, VIEWER, RunFilter(target=name), limit=1)
    assert len(per_target) >= 43 > len(large)
