"""A scaled-down fleet: a real scheduler fires a bulk job on 300 simulated SSH targets at
50 ms round trip (bench/fleet_sim.py), first over new connections, then over pooled ones.

Correctness only, no timing: every run recorded exactly once per assignment and slot,
every command executed exactly once on its own target (counted by the simulator), all
connections reused on the second fire (the pool holds more than 256 targets, as sized by
the settings), and nothing left running in the simulator.
The negative controls show that the simulator's counters do see an extra execution and a
command left running.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import asyncssh
import pytest
from sqlalchemy import insert, select

from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.executors import ExecRequest, SshExecutor, SshTarget
from fleetcron.executors.ssh import wrap_command
from fleetcron.metrics import Metrics
from fleetcron.scheduler.housekeeping import Housekeeping
from fleetcron.scheduler.service import Scheduler
from fleetcron.services.jobs import edit as jobs
from fleetcron.store.schema import Run, Target

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

from fleet_sim import FAKE_PGID_BASE, FleetSim, Kill, Plan, classify, connect, measure_rtt

pytestmark = [pytest.mark.slow]

TARGETS = 300
RTT_MS = 50


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FleetSim]:
    with FleetSim(TARGETS, rtt_ms=RTT_MS, work_dir=tmp_path_factory.mktemp("fleet")) as sim:
        yield sim


def add_fleet(app: App, sim: FleetSim) -> None:
    """The simulated targets as paired SSH targets (bulk insert: pairing 300 targets one
    handshake at a time is not what this test is about)."""
    now = app.now()
    with app.db.engine.begin() as conn:
        conn.execute(
            insert(Target.__table__),  # type: ignore[arg-type]
            [
                {
                    "name": t.name,
                    "kind": "ssh",
                    "host": t.host,
                    "port": t.port,
                    "user": t.user,
                    "private_key_enc": app.master_key.encrypt(t.client_key.encode()),
                    "host_key": t.host_key,
                    "labels": {"role": "sim"},
                    "notes": "",
                    "paired": True,
                    "paired_at": now,
                    "created_at": now,
                    "updated_at": now,
                }
                for t in sim.targets
            ],
        )


def runs_of(app: App, slot: Any) -> list[Any]:
    with app.db.read() as session:
        return list(
            session.execute(
                select(
                    Run.assignment_id,
                    Run.scheduled_for,
                    Run.target_name,
                    Run.status,
                    Run.exit_code,
                    Run.stdout_head,
                    Run.error,
                ).where(Run.scheduled_for == slot)
            ).all()
        )


def executed(before: dict[str, Any], after: dict[str, Any]) -> list[int]:
    return [b - a for a, b in zip(before["execs_by_target"], after["execs_by_target"], strict=True)]


@pytest.mark.parametrize(
    ("database_url", "command", "expect_stdout", "path"),
    [
        # One database each keeps the file near a minute; the run store's writes are
        # covered on both databases elsewhere.
        ("postgres", "sleep 1", None, "execs_simulated"),
        ("sqlite", 'echo "$FLEETCRON_TARGET"', "target", "execs_real"),
    ],
    ids=["postgres-simulated-sleep", "sqlite-real-sh-echo"],
    indirect=["database_url"],
)
async def test_a_bulk_job_on_300_targets_at_50_ms_records_every_run_exactly_once(
    app: App,
    operator: Actor,
    clock: FakeClock,
    fleet: FleetSim,
    command: str,
    expect_stdout: str | None,
    path: str,
) -> None:
    fleet.wait_idle()
    add_fleet(app, fleet)
    jobs.add_job(app, operator, "fleet", jobs.JobSpec("* * * * *", command), bulk=True)
    metrics = Metrics()
    scheduler = Scheduler(app, clock=clock, maintenance=Housekeeping(app), metrics=metrics)
    await scheduler.start()
    assert isinstance(scheduler.ssh, SshExecutor)
    names = {t.name for t in fleet.targets}
    start = fleet.stats()
    try:
        slot = clock.now.replace(second=0) + timedelta(minutes=1)
        for fire in ("first", "pooled"):
            clock.now = slot
            before = fleet.stats()
            stats = await scheduler.tick()
            await scheduler.idle()
            after = fleet.wait_idle(connections=False)

            assert stats.dispatched == TARGETS, fire
            rows = runs_of(app, slot)
            assert len(rows) == TARGETS, fire
            assert len({(r.assignment_id, r.scheduled_for) for r in rows}) == TARGETS, fire
            assert {r.target_name for r in rows} == names, fire
            failed = [r for r in rows if r.status != "succeeded" or r.exit_code != 0]
            assert failed == [], fire
            if expect_stdout == "target":
                assert all(r.stdout_head == r.target_name + "\n" for r in rows), fire
            # Executed exactly once on each target, by the path this command should take.
            assert executed(before, after) == [1] * TARGETS, fire
            assert after[path] - before[path] == TARGETS, (
                f"{fire} fire: {after[path] - before[path]} of {TARGETS} commands took the "
                f"{path} path; if the executor's remote wrapper changed, fleet_sim.classify "
                "must learn its new shape"
            )
            assert after["running_simulated"] == after["running_real"] == 0, fire
            assert after["sessions_open"] == 0, fire
            slot += timedelta(minutes=1)

        final = fleet.stats()
        # One handshake per target in the first fire, none in the pooled one.
        assert scheduler.ssh.connections_opened == TARGETS
        assert final["connections"] - start["connections"] == TARGETS
        assert final["refused_startups"] == start["refused_startups"]
        exported = metrics.exposition().decode()
        assert f"fleetcron_ssh_connections_opened_total {float(TARGETS)}" in exported
        assert f"fleetcron_ssh_pooled_connections {float(TARGETS)}" in exported
        assert "fleetcron_ssh_connect_retries_total 0.0" in exported
    finally:
        await scheduler.shutdown()
        await scheduler.ssh.close()
    fleet.wait_idle()


def test_the_simulator_recognises_the_wrapper_and_leaves_everything_else_to_sh() -> None:
    env = {"FLEETCRON_RUN_ID": "7", "FLEETCRON_JOB": "it's"}
    assert classify(wrap_command("sleep 1", env)) == Plan(
        "__fleetcron_pgid__=$$", (("sleep", 1.0),), None
    )
    assert classify(wrap_command("echo hi", env)) == Plan(
        "__fleetcron_pgid__=$$", (("echo", "hi\n"),), None
    )
    # The wrapper the executor sends today: the command under the target-side watchdog.
    watched = classify(wrap_command("sleep 1", env, term_after_s=300.0, kill_grace_s=5.0))
    assert isinstance(watched, Plan) and watched.steps == (("sleep", 1.0),), watched
    assert watched.marker is not None and watched.budget_s == 300.0
    # In a cluster the wrapper checks the target's generation mark first: recognised only
    # as the exact text the watchdog writes, and evaluated by the simulator.
    guarded = classify(
        wrap_command(
            "sleep 1", env, term_after_s=300.0, kill_grace_s=5.0, generation=3, mark_scope="inst"
        )
    )
    assert isinstance(guarded, Plan) and guarded.steps == (("sleep", 1.0),), guarded
    assert guarded.mark_check == ("inst", 3) and guarded.budget_s == 300.0
    tampered = wrap_command(
        "sleep 1", env, term_after_s=300.0, kill_grace_s=5.0, generation=3, mark_scope="inst"
    ).replace("-gt 3 ]", "-gt 3 ] || rm -rf x")
    assert classify(tampered) is None
    assert (
        classify(
            wrap_command(
                "sleep 1; id",
                env,
                term_after_s=9.0,
                kill_grace_s=1.0,
                generation=3,
                mark_scope="inst",
            )
        )
        is None
    )
    timed = classify("timeout -s TERM -k 5 10 /bin/sh -c 'sleep 20'")
    assert timed == Plan(None, (("sleep", 20.0),), 10.0)
    for line in (
        "echo $HOME",
        "sleep 1; rm -f x",
        "sleep 1 &",
        "echo hi > out.txt",
        "ls",
        wrap_command("echo `id`", env),
        wrap_command("sleep 1 && touch x", env),
        "export X=$(id); sleep 1",
        "timeout --preserve-status 1 sh -c 'sleep 2'",
    ):
        assert classify(line) is None, line
    assert classify(f"kill -s TERM -- -{FAKE_PGID_BASE + 3} 2>/dev/null") == Kill(
        "TERM", FAKE_PGID_BASE + 3
    )
    assert classify("kill -s TERM -- -4242 2>/dev/null") is None  # a real group: real kill


async def test_the_simulators_counters_see_an_extra_execution_and_a_command_left_running(
    tmp_path: Path,
) -> None:
    """Negative controls for the checks above: the counters are not blind."""
    with FleetSim(3, rtt_ms=10, work_dir=tmp_path) as sim:
        before = sim.stats()
        conn = await connect(sim.targets[1])
        async with conn:
            # A command that is not plain runs in real sh: its effect is on disk.
            marker = tmp_path / "effect"
            result = await conn.run(wrap_command(f"echo ran > {marker}"), check=False)
            assert result.exit_status == 0 and marker.read_text() == "ran\n"
            # A simulated sleep whose channel the client drops keeps "running".
            chan, _ = await conn.create_session(asyncssh.SSHClientSession, wrap_command("sleep 30"))
            await asyncio.sleep(0.3)
            chan.close()
            await asyncio.sleep(0.3)
            busy = sim.stats()
            assert busy["running_simulated"] == 1
            with pytest.raises(TimeoutError, match="still busy"):
                sim.wait_idle(timeout_s=0.5, connections=False)
            assert executed(before, busy) == [0, 2, 0]
            # A kill of its fake process group ends it, as kill -- -PGID ends a real one.
            killed = await conn.run(f"kill -s KILL -- -{FAKE_PGID_BASE + 1} 2>/dev/null")
            assert killed.exit_status == 0
        idle = sim.wait_idle(timeout_s=10)
        assert idle["running_simulated"] == 0 and idle["kills_simulated"] == 1


async def test_a_simulated_run_is_refused_when_the_targets_mark_supersedes_its_generation(
    tmp_path: Path,
) -> None:
    """The wrapper's generation-mark check is simulated, not forked: below the mark the
    run is refused as the real wrapper refuses it (the executor reports connect_error),
    at or above it the sleep is simulated. The counters show which path each took."""
    with FleetSim(1, work_dir=tmp_path) as sim:
        mark = tmp_path / "home" / ".fleetcron" / "generation-inst"
        mark.mkdir(parents=True)
        (mark / "5").touch()
        t = sim.targets[0]
        target = SshTarget(t.name, t.host, t.port, t.user, t.client_key, t.host_key)
        executor = SshExecutor()
        try:
            before = sim.stats()
            old = await executor.run(
                target, ExecRequest("sleep 0.1", generation=4, mark_scope="inst")
            )
            current = await executor.run(
                target, ExecRequest("sleep 0.1", generation=5, mark_scope="inst")
            )
            after = sim.stats()
        finally:
            await executor.close()
    assert old.status == "connect_error"
    assert "generation 4 superseded by 5" in (old.error or ""), old.error
    assert current.status == "succeeded", current.error
    assert after["execs_simulated"] - before["execs_simulated"] == 2
    assert after["execs_real"] == before["execs_real"]
    assert after["refused_superseded"] - before["refused_superseded"] == 1


def test_each_target_has_its_own_host_key_and_accepts_only_its_own_client_key(
    tmp_path: Path,
) -> None:
    with FleetSim(2, work_dir=tmp_path) as sim:
        a, b = sim.targets
        wrong = SshTarget(a.name, a.host, a.port, a.user, b.client_key, a.host_key)
        right = SshTarget(a.name, a.host, a.port, a.user, a.client_key, a.host_key)

        async def attempt(t: SshTarget) -> Any:
            executor = SshExecutor(connect_attempts=1)
            try:
                return await executor.run(t, ExecRequest("echo ok"))
            finally:
                await executor.close()

        refused = asyncio.run(attempt(wrong))
        assert refused.status == "connect_error" and "refused the key" in (refused.error or "")
        ok = asyncio.run(attempt(right))
        assert ok.status == "succeeded" and ok.stdout.text == "ok\n"
        with pytest.raises(asyncssh.HostKeyNotVerifiable):
            asyncio.run(connect(dataclasses.replace(a, host_key=b.host_key)))


@pytest.mark.parametrize("rtt_ms", [0.0, 60.0])
async def test_a_client_sees_the_configured_round_trip(tmp_path: Path, rtt_ms: float) -> None:
    """The delay line cannot be skipped: one SSH request and reply takes at least the
    configured round trip, a command over an open connection at least two. At 0 ms the
    same measurement stays well under 60 ms, so the lower bound is not met by accident."""
    with FleetSim(1, rtt_ms=rtt_ms, work_dir=tmp_path) as sim:
        seen = await measure_rtt(sim.targets[0])
    if rtt_ms:
        assert seen["round_trip_ms"] >= rtt_ms
        assert seen["exec_true_ms"] >= 2 * rtt_ms
        assert seen["handshake_ms"] >= 3 * rtt_ms
    else:
        assert seen["round_trip_ms"] < 60.0
