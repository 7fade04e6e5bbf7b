"""Two scheduler processes on one PostgreSQL never fire a slot twice."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select

from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.crypto import generate_key
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import Run
from waiting import eventually

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

DRIVER = Path(__file__).with_name("drive_scheduler.py")
TARGETS = 200
MINUTES = 4


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_two_schedulers_on_one_postgres_fire_every_slot_exactly_once(
    app: App, operator: Actor, database_url: str, tmp_path: Path
) -> None:
    effects = tmp_path / "effects.log"
    for n in range(TARGETS):
        targets.add_target(
            app, Actor("admin", "admin"), TargetSpec(f"box{n:03d}", TargetKind.LOCAL)
        )
    # Each execution appends a line outside the database before it ends: the real effect.
    command = f'echo "$FLEETCRON_TARGET $FLEETCRON_SCHEDULED_FOR $FLEETCRON_RUN_ID" >> {effects}'
    jobs.add_job(app, operator, "everywhere", JobSpec("* * * * *", command), bulk=True)
    start = app.now().replace(second=0, microsecond=0)

    go = tmp_path / "go"
    env = {
        **os.environ,
        "FLEETCRON_MASTER_KEY": generate_key().decode(),
        "FLEETCRON_DATA_DIR": str(tmp_path),
        # The driver imports tests/waiting.py.
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(DRIVER),
                database_url,
                node,
                start.isoformat(),
                str(MINUTES),
                str(go),
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for node in ("node-a", "node-b")
    ]

    def ready() -> bool:
        assert all(p.poll() is None for p in procs), [p.communicate()[0] for p in procs]
        return all((tmp_path / f"{n}.ready").exists() for n in ("node-a", "node-b"))

    try:
        eventually(ready, 60, "the scheduler processes to start", interval=0.02)
        go.touch()
        outputs = [p.communicate(timeout=240)[0].decode() for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            if p.stdout is not None:
                p.stdout.close()
    assert [p.returncode for p in procs] == [0, 0], outputs

    lines = effects.read_text().splitlines()
    executions = Counter(" ".join(line.split()[:2]) for line in lines)
    assert len(executions) == TARGETS * MINUTES
    assert max(executions.values()) == 1
    with app.db.read() as session:
        rows = session.execute(
            select(Run.assignment_id, Run.scheduled_for, Run.status, Run.node)
        ).all()
        assert session.scalar(select(func.count(Run.id))) == TARGETS * MINUTES
    assert {r.status for r in rows} == {"succeeded"}
    # Both processes really competed for the same slots (small claim batches interleave).
    assert set(Counter(r.node for r in rows)) == {"node-a", "node-b"}

    assert len({(r.assignment_id, r.scheduled_for) for r in rows}) == TARGETS * MINUTES
    expected_slots = {start + timedelta(minutes=m) for m in range(1, MINUTES + 1)}
    assert {r.scheduled_for for r in rows} == expected_slots
