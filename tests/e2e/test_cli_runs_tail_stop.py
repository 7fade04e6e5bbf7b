"""`fleetcron runs tail` and `fleetcron runs stop` through the installed console script,
against a real `fleetcron scheduler` process (a CLI process is not the scheduler: it reads
the snapshots the scheduler writes into the run row, and its stop reaches the scheduler
through the database)."""

from __future__ import annotations

import shlex
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.conftest import (
    FLEETCRON,
    Fleet,
    Zygote,
    describe,
    environment,
    succeeded,
    wait_until_started,
)
from integration.executors.procs import kill_all, marker_seconds, sleeping
from waiting import eventually

TITLE = "\x1b]0;owned\x07"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory, zygote: Zygote) -> Iterator[Fleet]:
    the_fleet = Fleet(tmp_path_factory.mktemp("tail"), zygote)
    the_fleet.ok("init")
    the_fleet.ok("target add here --local")
    log = the_fleet.workdir / "scheduler.log"
    env = environment(the_fleet.workdir, {"FLEETCRON_TICK_S": "0.2"})
    with log.open("wb") as out:
        process = subprocess.Popen(
            [FLEETCRON, "scheduler"],
            cwd=the_fleet.workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until_started(process, log)
        yield the_fleet
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
    assert "Traceback" not in log.read_text(), log.read_text()


def add(fleet: Fleet, name: str, command: str) -> None:
    schedule = "--schedule '0 0 1 1 *'"
    fleet.ok(f"job add {name} --target here {schedule} --command {shlex.quote(command)}")


def started(fleet: Fleet, job: str) -> int:
    run_id = int(fleet.ok(f"job run {job}").removeprefix("queued 1 run(s): "))
    eventually(
        lambda: fleet.json(f"runs show {run_id} --json")["status"] == "running",
        15,
        "the scheduler to start the run",
        interval=0.1,
    )
    return run_id


def test_tail_follows_the_output_until_the_run_ends_with_escapes_shown_as_text(
    fleet: Fleet,
) -> None:
    add(
        fleet,
        "ticker",
        f"for i in 1 2 3 4 5 6 7 8; do printf '{TITLE}tick %s\\n' $i; sleep 1; done",
    )
    run_id = started(fleet, "ticker")

    result = fleet.run(f"runs tail {run_id} --interval 0.3")

    out = succeeded(result)
    assert "\x1b" not in out and "\x07" not in out, repr(out)
    assert [line for line in out.splitlines() if line] == [
        f"\\x1b]0;owned\\x07tick {i}" for i in range(1, 9)
    ], describe(result)
    assert result.stderr.splitlines() == [
        f"--- run {run_id} running on node {fleet.json(f'runs show {run_id} --json')['node']}",
        f"--- run {run_id} succeeded: exit 0",
    ], describe(result)
    # Negative control: the run did print the escape sequences.
    assert fleet.json(f"runs show {run_id} --json")["stdout"]["head"].startswith(TITLE)


def test_tail_of_an_ended_run_shows_its_recorded_output(fleet: Fleet) -> None:
    add(fleet, "quick", "echo done quickly")
    run_id = int(fleet.ok("job run quick --wait").splitlines()[0].removeprefix("queued 1 run(s): "))

    out = fleet.ok(f"runs tail {run_id}")

    assert "status:        succeeded" in out and "done quickly" in out


def test_stop_kills_the_whole_group_and_records_who_stopped_it(fleet: Fleet) -> None:
    main, child = marker_seconds(), marker_seconds()
    add(fleet, "stuck", f"sleep {child} & echo stuck; sleep {main}")
    run_id = started(fleet, "stuck")
    try:
        eventually(lambda: sleeping(main) and sleeping(child), 10, "the command to start")

        stopped = fleet.run(f"runs stop {run_id} --wait")
        again = fleet.run(f"runs stop {run_id}")
        unknown = fleet.run("runs stop 999999")
    finally:
        kill_all(main, child)

    said = succeeded(stopped).splitlines()
    assert said[-1] == f"run {run_id} cancelled: stopped by admin"
    assert "job:           stuck" in said and "target:        here" in said
    assert any(line.startswith("running since: 20") for line in said)
    assert any(line.startswith("stopped by:    admin at 20") for line in said)
    effect = next(line for line in said if line.startswith("what stop does: "))
    assert "SIGTERM" in effect and "SIGKILL to what is still alive 5 s later" in effect
    assert sleeping(main) == [] and sleeping(child) == []
    shown = fleet.json(f"runs show {run_id} --json")
    assert (shown["status"], shown["stop_requested_by"]) == ("cancelled", "admin")
    assert shown["stdout"]["head"] == "stuck\n"
    assert again.returncode == 2, describe(again)
    assert "has already ended (cancelled)" in again.stderr and "Traceback" not in again.stderr
    assert unknown.returncode == 2 and "run 999999 does not exist" in unknown.stderr


def test_stop_of_a_queued_run_cancels_it_before_it_starts(
    tmp_path: Path, zygote: Zygote
) -> None:
    """On a data dir no scheduler serves, the run stays queued until the stop."""
    idle = Fleet(tmp_path, zygote)
    idle.ok("init")
    idle.ok("target add here --local")
    add(idle, "later", "echo never")
    run_id = int(idle.ok("job run later").removeprefix("queued 1 run(s): "))

    result = idle.run(f"runs stop {run_id}")

    said = succeeded(result).splitlines()
    assert said[-1] == f"run {run_id} cancelled before it started"
    assert "running since: not started" in said
    assert "what stop does: The run has not started: it is cancelled and never starts." in " ".join(
        said
    )
    shown = idle.json(f"runs show {run_id} --json")
    assert (shown["status"], shown["started_at"]) == ("cancelled", None)
    assert shown["reason"] == "stopped by admin before it started"
