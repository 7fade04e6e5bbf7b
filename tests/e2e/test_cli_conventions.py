"""The CLI's conventions, through the installed console script and real processes.

- A command on a data dir without a database names the data dir and how it was chosen,
  and creates nothing there; only ``init`` (and ``serve``/``scheduler``) create one.
- ``job run --wait`` says within seconds when no scheduler starts the run, and otherwise
  waits for the outcome, bounded.
- Tables into a pipe are not cut; ``runs list --status`` may be repeated; names, notes and
  command output are printed as text (no rich markup, no terminal control sequences).
- Files in the data dir are owner-only even when the directory is not.
"""

from __future__ import annotations

import io
import os
import shlex
import signal
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console
from rich.errors import MarkupError
from rich.table import Table

from e2e.conftest import (
    FLEETCRON,
    Fleet,
    Zygote,
    describe,
    environment,
    succeeded,
    wait_until_started,
)

#: Local targets are an admin-enabled feature, and local commands refuse to run as root
#: unless allowed (the suite runs as root in CI).
LOCAL = {"FLEETCRON_ALLOW_LOCAL_TARGETS": "true", "FLEETCRON_LOCAL_ALLOW_ROOT": "true"}
OSC52 = "\x1b]52;c;cHduZWQ=\x07"
TITLE = "\x1b]0;owned\x07"
LONG_COMMAND = "echo " + "-".join(f"part{i:03d}" for i in range(30))
MARKUP_NOTES = "n [/x] [bold]b[/bold] [link=https://example.invalid]l[/link]"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _listing(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir())


# -- data dir mistakes -------------------------------------------------------------------


READ_AND_WRITE_COMMANDS = (
    "job list",
    "runs list",
    "runs show 1",
    "target add here --local",
    "job run nightly --wait",
    "health",
    "user list",
    "db upgrade",
    "backup snapshot.backup --no-key",
)


@pytest.mark.parametrize("command", READ_AND_WRITE_COMMANDS)
def test_a_command_on_an_empty_data_dir_names_it_and_creates_nothing(
    tmp_path: Path, zygote: Zygote, command: str
) -> None:
    fleet = Fleet(tmp_path, zygote)
    fleet.data_dir.mkdir(mode=0o700)
    result = fleet.run(command, **LOCAL)
    assert result.returncode == 1, describe(result)
    assert result.stderr.startswith(
        f"error: no fleetcron database in the data dir {fleet.data_dir} "
        "(from FLEETCRON_DATA_DIR); nothing was created there."
    ), describe(result)
    assert "set FLEETCRON_DATA_DIR=DIR" in result.stderr
    assert "`fleetcron init`" in result.stderr
    assert "Traceback" not in result.stderr
    assert _listing(fleet.data_dir) == []
    assert _listing(tmp_path) == ["data"]  # no backup file either


def test_a_missing_data_dir_is_not_created(tmp_path: Path, zygote: Zygote) -> None:
    fleet = Fleet(tmp_path, zygote)
    result = fleet.run("job list")
    assert result.returncode == 1, describe(result)
    assert f"no fleetcron database in the data dir {fleet.data_dir}" in result.stderr
    assert not fleet.data_dir.exists()


def test_the_default_data_dir_is_named_as_the_default(tmp_path: Path, zygote: Zygote) -> None:
    fleet = Fleet(tmp_path, zygote)
    xdg = tmp_path / "xdg"
    # an empty FLEETCRON_DATA_DIR counts as unset
    result = fleet.run("job list", FLEETCRON_DATA_DIR="", XDG_DATA_HOME=str(xdg))
    assert result.returncode == 1, describe(result)
    assert (
        f"no fleetcron database in the data dir {xdg / 'fleetcron'} (the default "
        "$XDG_DATA_HOME/fleetcron, as FLEETCRON_DATA_DIR is not set)"
    ) in result.stderr, describe(result)
    assert not xdg.exists()


def test_a_data_dir_from_the_config_file_is_named_with_the_file(
    tmp_path: Path, zygote: Zygote
) -> None:
    fleet = Fleet(tmp_path, zygote)
    elsewhere = tmp_path / "elsewhere"
    config = tmp_path / "fleetcron.toml"
    config.write_text(f'data_dir = "{elsewhere}"\n')
    result = fleet.run("runs list", FLEETCRON_DATA_DIR="", FLEETCRON_CONFIG=str(config))
    assert result.returncode == 1, describe(result)
    assert (
        f"no fleetcron database in the data dir {elsewhere} (from data_dir in {config})"
    ) in result.stderr, describe(result)
    assert not elsewhere.exists()


def test_an_empty_database_file_is_named_too(tmp_path: Path, zygote: Zygote) -> None:
    fleet = Fleet(tmp_path, zygote)
    fleet.data_dir.mkdir()
    (fleet.data_dir / "fleetcron.db").touch()  # as left by fleetcron before 0.1
    result = fleet.run("job list")
    assert result.returncode == 1, describe(result)
    assert result.stderr.startswith(
        f"error: an empty fleetcron database in the data dir {fleet.data_dir} "
        "(from FLEETCRON_DATA_DIR). If fleetcron runs with another data dir"
    ), describe(result)


def test_after_init_the_same_commands_work(tmp_path: Path, zygote: Zygote) -> None:
    """Negative control: the check refuses only a data dir without a database."""
    fleet = Fleet(tmp_path, zygote)
    init = fleet.ok("init")
    assert f"data dir:    {fleet.data_dir}" in init
    assert "no jobs yet" in fleet.ok("job list")
    assert fleet.json("runs list --json") == {"total": 0, "runs": []}


# -- job run --wait ---------------------------------------------------------------------


JOBS = (
    ("hello", "echo hello"),
    ("fails", "echo oops >&2; exit 3"),
    ("slow", "sleep 30"),
    ("termesc", f"printf '{OSC52} osc52\\n{TITLE}title\\n'"),
)


def _local_fleet(fleet: Fleet, jobs: tuple[tuple[str, str], ...] = JOBS) -> None:
    fleet.ok("init")
    fleet.ok("target add here --local", **LOCAL)
    for name, command in jobs:
        fleet.ok(
            f"job add {name} --target here --schedule '0 0 1 1 *' --command {_quote(command)}",
            **LOCAL,
        )


def _quote(text: str) -> str:
    return shlex.quote(text)


def test_wait_without_a_scheduler_says_so_within_seconds(tmp_path: Path, zygote: Zygote) -> None:
    fleet = Fleet(tmp_path, zygote)
    _local_fleet(fleet, JOBS[:1])
    started = time.monotonic()
    result = fleet.run("job run hello --wait", **LOCAL)
    waited = time.monotonic() - started
    assert result.returncode == 1, describe(result)
    assert result.stdout == "queued 1 run(s): 1\n"
    assert result.stderr.startswith(
        "error: no scheduler started run(s) 1 within 5 s, so none is running for data dir "
        f"{fleet.data_dir} (a running scheduler starts queued runs on its next tick"
    ), describe(result)
    assert "start one with `fleetcron serve`" in result.stderr
    assert "The run(s) stay queued" in result.stderr
    # far below the default bound (the job's timeout, 300 s, plus 60 s): not a timeout
    assert waited < 30, waited
    assert fleet.json("runs show 1 --json")["status"] == "queued"


@pytest.fixture(scope="module")
def scheduled(tmp_path_factory: pytest.TempPathFactory, zygote: Zygote) -> Iterator[Fleet]:
    """A local fleet with a real ``fleetcron scheduler`` process."""
    fleet = Fleet(tmp_path_factory.mktemp("scheduled"), zygote)
    _local_fleet(fleet)
    log = fleet.workdir / "scheduler.log"
    env = environment(
        fleet.workdir, {**LOCAL, "FLEETCRON_TICK_S": "0.2", "FLEETCRON_SHUTDOWN_GRACE_S": "1"}
    )
    with log.open("wb") as out:
        process = subprocess.Popen(
            [FLEETCRON, "scheduler"],
            cwd=fleet.workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until_started(process, log)
        yield fleet
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
    assert "Traceback" not in log.read_text(), log.read_text()


def test_wait_prints_the_outcome_and_exits_by_it(scheduled: Fleet) -> None:
    ok = scheduled.run("job run hello --wait", **LOCAL)
    assert ok.returncode == 0, describe(ok)
    run_id = int(ok.stdout.splitlines()[0].removeprefix("queued 1 run(s): "))
    assert ok.stdout.splitlines() == [
        f"queued 1 run(s): {run_id}",
        f"run {run_id} on here: succeeded exit=0",
        "hello",
    ], describe(ok)

    failed = scheduled.run("job run fails --wait", **LOCAL)
    assert failed.returncode == 1, describe(failed)
    lines = failed.stdout.splitlines()
    assert lines[1].endswith("on here: failed exit=3"), describe(failed)
    assert "stderr: oops" in lines


def test_wait_stops_at_its_bound_and_the_run_goes_on(scheduled: Fleet) -> None:
    """The bound leaves the scheduler (ticking every second) several ticks to start the run,
    also on a loaded machine: at 2 s, a late tick made the wait report that no scheduler
    had started it."""
    result = scheduled.run("job run slow --wait --wait-timeout 8", **LOCAL)
    assert result.returncode == 1, describe(result)
    run_id = int(result.stdout.removeprefix("queued 1 run(s): "))
    assert result.stderr.startswith(
        f"error: run(s) {run_id} not finished after 8 s of waiting; they go on"
    ), describe(result)
    assert scheduled.json(f"runs show {run_id} --json")["status"] == "running"


def test_run_output_cannot_drive_the_terminal(scheduled: Fleet) -> None:
    waited = scheduled.run("job run termesc --wait", **LOCAL)
    assert waited.returncode == 0, describe(waited)
    run_id = int(waited.stdout.splitlines()[0].removeprefix("queued 1 run(s): "))
    shown = succeeded(scheduled.run(f"runs show {run_id}"))
    for printed in (waited.stdout, shown):
        assert "\x1b" not in printed and "\x07" not in printed, repr(printed)
        assert "\\x1b]52;c;cHduZWQ=\\x07 osc52" in printed, printed
        assert "\\x1b]0;owned\\x07title" in printed, printed
    assert "command:       printf '\\x1b]52;" in shown
    # Negative control: the run did print the sequences, and --json keeps them exactly.
    stored = scheduled.json(f"runs show {run_id} --json")["stdout"]["head"]
    assert stored == f"{OSC52} osc52\n{TITLE}title\n"


def test_runs_list_takes_several_statuses(scheduled: Fleet) -> None:
    for job in ("hello", "fails"):
        scheduled.run(f"job run {job} --wait", **LOCAL)

    def statuses(options: str) -> list[tuple[int, str]]:
        """(id, status) of the runs of hello and fails, which are over: other tests' runs
        (slow) may finish between two listings."""
        listed = scheduled.json(f"runs list {options} --json")["runs"]
        return sorted((r["id"], r["status"]) for r in listed if r["job"] in ("hello", "fails"))

    both = statuses("--status succeeded --status failed")
    assert {status for _, status in both} == {"succeeded", "failed"}, both
    assert both == sorted(statuses("--status succeeded") + statuses("--status failed"))
    assert {status for _, status in statuses("--status failed")} == {"failed"}
    refused = scheduled.run("runs list --status failed --status nonsense")
    assert refused.returncode == 2, describe(refused)
    assert "nonsense" in refused.stderr and "Traceback" not in refused.stderr


# -- tables and markup ------------------------------------------------------------------


def _render(table_cells: list[str], width: int) -> str:
    """What rich prints for one row, at ``width`` columns, with cells read as markup
    (what print_table did before)."""
    table = Table()
    for _ in table_cells:
        table.add_column("c")
    table.add_row(*table_cells)
    out = io.StringIO()
    Console(file=out, width=width).print(table)
    return out.getvalue()


def test_tables_into_a_pipe_are_full_width(scheduled: Fleet) -> None:
    scheduled.ok(
        f"job add long-one --target here --schedule '0 0 1 1 *' --command {_quote(LONG_COMMAND)}",
        **LOCAL,
    )
    for columns in ("80", ""):
        listed = scheduled.ok("job list", COLUMNS=columns)
        (row,) = [line for line in listed.splitlines() if "long-one" in line]
        assert LONG_COMMAND in row, listed
    # Negative control: at rich's 80 columns for a pipe the same cell is cut.
    assert LONG_COMMAND not in _render(["long-one", LONG_COMMAND], 80)


def test_job_list_prints_markup_in_notes_as_typed(scheduled: Fleet) -> None:
    scheduled.ok(
        "job add marked --target here --schedule '0 0 1 1 *' --command 'echo marked' "
        f"--notes {_quote(MARKUP_NOTES)}",
        **LOCAL,
    )
    listed = scheduled.ok("job list")
    (row,) = [line for line in listed.splitlines() if "marked" in line and "echo" in line]
    assert MARKUP_NOTES in row, listed
    assert MARKUP_NOTES in scheduled.ok("job show marked")
    # Negative control: read as markup, the same notes crash rich.
    with pytest.raises(MarkupError):
        _render([MARKUP_NOTES], 200)


# -- file modes -------------------------------------------------------------------------


def _umask_022(
    zygote: Zygote, args: list[str], workdir: Path, **extra: str
) -> subprocess.CompletedProcess[str]:
    """``fleetcron ARGS`` in a process of its own under a umask of 022, the common default."""
    return zygote.run(*args, workdir=workdir, env={**LOCAL, **extra}, umask=0o022)


def test_init_in_a_0755_data_dir_creates_owner_only_files_and_warns(
    tmp_path: Path, zygote: Zygote
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    data.chmod(0o755)
    init = _umask_022(zygote, ["init"], tmp_path)
    assert init.returncode == 0, init
    assert (
        f"warning:     the data dir {data} has mode 0755: its group or others may reach it"
    ) in init.stdout, init.stdout
    assert f"`chmod 700 {data}`" in init.stdout
    added = _umask_022(zygote, ["target", "add", "here", "--local"], tmp_path)
    assert added.returncode == 0, added
    files = _listing(data)
    assert {"fleetcron.db", "master.key"} <= set(files), files
    for name in files:
        assert _mode(data / name) == 0o600, (name, oct(_mode(data / name)))
    # Negative control: a file made in the same dir under the same umask is 0644.
    previous = os.umask(0o022)
    try:
        (data / "probe").write_text("x")
    finally:
        os.umask(previous)
    assert _mode(data / "probe") == 0o644


def test_init_in_an_owner_only_data_dir_does_not_warn(tmp_path: Path, zygote: Zygote) -> None:
    (tmp_path / "data").mkdir(mode=0o700)
    init = _umask_022(zygote, ["init"], tmp_path)
    assert init.returncode == 0, init
    assert "warning" not in init.stdout + init.stderr


def test_first_start_writes_owner_only_files_and_logs_the_warning(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    data.chmod(0o755)
    log = tmp_path / "scheduler.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [FLEETCRON, "scheduler"],
            cwd=tmp_path,
            env=environment(tmp_path, {**LOCAL, "FLEETCRON_TICK_S": "0.2"}),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=lambda: os.umask(0o022),
        )
    try:
        wait_until_started(process, log)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
    text = log.read_text()
    assert f"the data dir {data} has mode 0755" in text, text
    password = data / "initial-admin-password"
    assert len(password.read_text().strip()) >= 16
    files = _listing(data)
    assert {"fleetcron.db", "master.key", "initial-admin-password"} <= set(files), files
    for name in files:
        assert _mode(data / name) == 0o600, (name, oct(_mode(data / name)))
