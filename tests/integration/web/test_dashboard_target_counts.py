"""The dashboard's target counts (SQLite and PostgreSQL): paired and all targets counted in
one statement, not by loading every target (5,000 full rows for two numbers)."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient
from sqlalchemy import insert

from fleetcron.app import Actor, App
from fleetcron.services.targets import reads as target_reads
from fleetcron.store.schema import Target
from sql_statements import statements

VIEWER = Actor("victor", "viewer")
_CARD = re.compile(
    r'<span class="big">(\d+)</span><span class="label">paired targets</span>\s*'
    r'<span class="small muted">(\d+) in all</span>'
)


def add_targets(app: App, paired: int, unpaired: int) -> None:
    now = app.now()
    with app.db.engine.begin() as conn:
        conn.execute(
            insert(Target.__table__),  # type: ignore[arg-type]
            [
                {"name": f"t{i:03d}", "kind": "local", "paired": i < paired, "labels": {}}
                | {"notes": "", "created_at": now, "updated_at": now}
                for i in range(paired + unpaired)
            ],
        )


def test_the_dashboard_counts_paired_and_all_targets(
    app: App, client: TestClient, as_viewer: dict[str, str]
) -> None:
    add_targets(app, paired=7, unpaired=3)
    response = client.get("/", headers=as_viewer)
    assert response.status_code == 200, response.text
    assert _CARD.findall(response.text) == [("7", "10")]
    assert target_reads.count_targets(app, VIEWER) == (10, 7)


def test_counting_the_targets_reads_no_target_row(app: App) -> None:
    add_targets(app, paired=4, unpaired=1)
    with statements(app) as seen:
        assert target_reads.count_targets(app, VIEWER) == (5, 4)
        counted = list(seen)
        seen.clear()
        target_reads.list_targets(app, VIEWER)  # negative control: the listing reads them whole
        listed = list(seen)
    queries = [s for s in counted if "targets" in s]
    assert len(queries) == 1 and "targets.labels" not in queries[0], counted
    assert any("targets.labels" in s for s in listed), listed
