"""Cost and message count of alert evaluation on a large bulk job with a tenth failing.

The fleet: ``--targets`` local targets (default 5,000) and one bulk job on all of them; its
09:01 slot finished a second after its time with ``--failing`` (default 10 %) of the
targets ``failed`` and the rest ``succeeded``. Rows are inserted in bulk (not through the
scheduler); one webhook channel with one rule for every job (its default timers). Then
``evaluate_alerts`` runs every 10 s, as the scheduler's notifier does, for ``--rounds``
rounds (default 6: one minute), and each round's time and queued messages are reported:
the process's CPU time (user + system, ``time.process_time``; the machine is shared, so
wall time says more about the neighbours; on PostgreSQL the server's own CPU is not in
it), the wall time, and beside the incident messages queued the per-assignment messages
the code before incidents would have queued (one per alert state that changed in the
round, counted from ``alert_states`` outside the timed part). ``--failures-before`` and
``--successes-before`` set the rule's thresholds (``core/incidents.Thresholds``).

The same script measures the code before incidents with that version's sources first on
the path: ``PYTHONPATH=/path/to/old/src .venv/bin/python bench/alert_bench.py``.

Run by hand: ``.venv/bin/python bench/alert_bench.py [--targets 5000] [--failing 0.1]
[--rounds 6] [--backends sqlite,postgresql] [--failures-before 1] [--successes-before 1]``.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sqlalchemy import insert, select

from _common import (
    after_bulk_load,
    catch_up_sequences,
    core_table,
    counting_off,
    databases,
    job_row,
    loadavg,
    make_app,
    table,
)
from fleetcron.app import Actor, App
from fleetcron.notify.webhook import WebhookSpec
from fleetcron.services.alerts.channels import add_channel, add_rule
from fleetcron.services.alerts.evaluation import evaluate_alerts
from fleetcron.store.schema import AlertState, Assignment, Job, Run, Target

SLOT = datetime(2026, 3, 2, 9, 1, tzinfo=UTC)
ADMIN = Actor("bench", "admin")


def fill(app: App, n_targets: int, failing: float) -> int:
    created = SLOT - timedelta(days=1)
    every = max(1, round(1 / failing)) if failing > 0 else 0
    failed = 0
    with app.db.engine.begin() as conn:
        counting_off(conn)
        conn.execute(
            insert(core_table(Target)),
            [
                {"id": t + 1, "name": f"host{t:05d}", "kind": "local", "paired": True}
                | {"created_at": created, "updated_at": created, "labels": {}, "notes": ""}
                for t in range(n_targets)
            ],
        )
        conn.execute(
            insert(core_table(Job)),
            [
                job_row(
                    created,
                    id=1,
                    name="backup",
                    origin="bulk",
                    schedule="1 9 2 3 *",
                    timezone="UTC",
                    command="/usr/local/bin/backup",
                )
            ],
        )
        conn.execute(
            insert(core_table(Assignment)),
            [
                {
                    "id": t + 1,
                    "job_id": 1,
                    "target_id": t + 1,
                    "enabled": True,
                    "next_fire_at": SLOT + timedelta(days=365),
                    "created_at": created,
                    "updated_at": created,
                }
                for t in range(n_targets)
            ],
        )
        rows = []
        for t in range(n_targets):
            bad = every and t % every == 0
            failed += bool(bad)
            rows.append(
                {
                    "assignment_id": t + 1,
                    "job_id": 1,
                    "target_id": t + 1,
                    "job_name": "backup",
                    "target_name": f"host{t:05d}",
                    "origin": "bulk",
                    "command": "/usr/local/bin/backup",
                    "scheduled_for": SLOT,
                    "trigger": "schedule",
                    "attempt": 1,
                    "status": "failed" if bad else "succeeded",
                    "exit_code": 3 if bad else 0,
                    "stderr_head": "disk full\n" if bad else "",
                    "started_at": SLOT,
                    "finished_at": SLOT + timedelta(seconds=1),
                    "duration_ms": 1000,
                    "node": "bench",
                    "actor": "system",
                    "created_at": SLOT,
                }
            )
        conn.execute(insert(core_table(Run)), rows)
        if app.db.dialect == "postgresql":
            catch_up_sequences(conn)
    after_bulk_load(app)
    return failed


def add_ops_rule(app: App, failures_before: int, successes_before: int) -> None:
    """The one rule, with its thresholds where the code measured has them (the code before
    incidents and before thresholds is measured with the defaults)."""
    from fleetcron.services.alerts import channels

    thresholds = getattr(channels, "Thresholds", None)
    if thresholds is None:
        assert (failures_before, successes_before) == (1, 1), "this code has no thresholds"
        add_rule(app, ADMIN, "ops")
        return
    add_rule(app, ADMIN, "ops", thresholds=thresholds(failures_before, successes_before))


def alert_states(app: App) -> dict[int, str]:
    """Each assignment's stored alert state: what the per-assignment code messaged about."""
    with app.db.read() as session:
        return dict(session.execute(select(AlertState.assignment_id, AlertState.state)).all())


def changed(before: dict[int, str], after: dict[int, str]) -> int:
    """Per-assignment messages: one per assignment whose alert state changed."""
    return sum(1 for aid, state in after.items() if before.get(aid, "ok") != state) + sum(
        1 for aid, state in before.items() if aid not in after and state != "ok"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=5000)
    parser.add_argument("--failing", type=float, default=0.1)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--failures-before", type=int, default=1)
    parser.add_argument("--successes-before", type=int, default=1)
    args = parser.parse_args()
    import fleetcron.services.alerts.evaluation as evaluation

    print(f"code: {Path(evaluation.__file__).resolve().parents[3]}; load {loadavg()}")
    results = []
    for backend, url, directory in databases(args.backends, "alert-bench"):
        now = SLOT + timedelta(seconds=1)
        app = make_app(url, directory / "data", functools.partial(lambda at: at, now))
        try:
            failed = fill(app, args.targets, args.failing)
            add_channel(app, ADMIN, "ops", WebhookSpec(url="http://127.0.0.1:9/hook"))
            add_ops_rule(app, args.failures_before, args.successes_before)
            total = naive_total = 0
            states = alert_states(app)
            for round_ in range(args.rounds):
                at = now + timedelta(seconds=10 * round_)
                cpu, started = time.process_time(), time.perf_counter()
                queued = evaluate_alerts(app, at)
                cpu, elapsed = time.process_time() - cpu, time.perf_counter() - started
                total += queued
                after = alert_states(app)
                naive = changed(states, after)
                naive_total, states = naive_total + naive, after
                results.append(
                    (
                        backend,
                        args.targets,
                        failed,
                        at.strftime("%H:%M:%S"),
                        f"{cpu * 1000:.0f}",
                        f"{elapsed * 1000:.0f}",
                        queued,
                        total,
                        naive,
                        naive_total,
                    )
                )
        finally:
            app.close()
    print(
        table(
            [
                "backend",
                "targets",
                "failed",
                "round at",
                "CPU ms",
                "wall ms",
                "queued",
                "queued so far",
                "per-assignment",
                "per-assignment so far",
            ],
            results,
        )
    )


if __name__ == "__main__":
    main()
