"""Two scheduler processes on one PostgreSQL roll out the same slot: every target runs
exactly once, and never more than one batch of commands runs at a time.

Each command writes a start line and an end line (with the wall-clock time) to a file
outside the database: the real effects the checkers read.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import select

from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.crypto import generate_key
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import Run
from waiting import eventually

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

DRIVER = Path(__file__).with_name("drive_rollout.py")
TARGETS = 60
BATCH = 10


def most_at_once(lines: list[str]) -> int:
    """The largest number of commands between their start and end line at one moment."""
    events = sorted(
        (float(stamp), 1 if what == "start" else -1)
        for _, what, stamp in (line.split() for line in lines)
    )
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    return peak


def test_the_checker_sees_overlap() -> None:
    # Negative control of the batch checker: two overlapping commands count as two.
    lines = ["a start 1.0", "b start 1.5", "a end 2.0", "b end 3.0", "c start 3.5", "c end 4"]
    assert most_at_once(lines) == 2


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_two_schedulers_roll_out_one_slot_each_target_once_one_batch_at_a_time(
    app: App, operator: Actor, database_url: str, tmp_path: Path
) -> None:
    effects = tmp_path / "effects.log"
    for n in range(TARGETS):
        targets.add_target(
            app, Actor("admin", "admin"), TargetSpec(f"box{n:03d}", TargetKind.LOCAL)
        )
    command = (
        f'echo "$FLEETCRON_TARGET start $(date +%s.%N)" >> {effects}; sleep 0.2; '
        f'echo "$FLEETCRON_TARGET end $(date +%s.%N)" >> {effects}'
    )
    spec = JobSpec("* * * * *", command, batch=str(BATCH))
    jobs.add_job(app, operator, "everywhere", spec, bulk=True)
    now = app.now().replace(second=0, microsecond=0) + timedelta(minutes=1, seconds=1)

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
            [sys.executable, str(DRIVER), database_url, node, now.isoformat(), str(go)],
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
        outputs = [p.communicate(timeout=180)[0].decode() for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            if p.stdout is not None:
                p.stdout.close()
    assert [p.returncode for p in procs] == [0, 0], outputs

    lines = effects.read_text().splitlines()
    starts = Counter(line.split()[0] for line in lines if line.split()[1] == "start")
    assert len(starts) == TARGETS and max(starts.values()) == 1, starts
    assert 1 <= most_at_once(lines) <= BATCH
    with app.db.read() as session:
        rows = session.execute(select(Run.target_name, Run.status, Run.node)).all()
    assert len(rows) == TARGETS
    assert {str(status) for _, status, _ in rows} == {"succeeded"}
    # Both processes really competed for the waves: each was ticking (every 20 ms) from
    # before the last wave started until it had started. Which of them wins a wave is up
    # to the machine's scheduling (the one that just recorded a wave usually ticks first),
    # so who ran the runs is not asked.
    last_wave = max(float(stamp) for _, what, stamp in map(str.split, lines) if what == "start")
    for node in ("node-a", "node-b"):
        first, last = map(float, (tmp_path / f"{node}.ticks").read_text().split())
        assert first < last_wave <= last, (node, first, last_wave, last)
