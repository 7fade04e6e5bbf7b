"""The CLI refuses numbers and times that cannot name anything, and files too large to be
what they claim, with exit 2 and a message naming the field: never a traceback from the
database driver (SQLite: "Python int too large to convert to SQLite INTEGER"), and never a
read of ``/dev/zero`` until the system kills the process. On SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_env import point_the_cli_at
from fleetcron.app import Actor, App
from fleetcron.cli.main import cli
from fleetcron.cli.output import MAX_ID, run_cli
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.runs import reads as runs
from fleetcron.services.runs.views import list_run_views
from fleetcron.services.targets import edit as targets

ADMIN = Actor("admin", "admin")
HUGE = "99999999999999999999"


@pytest.fixture
def cli_env(app: App, monkeypatch: pytest.MonkeyPatch) -> App:
    """The CLI pointed at the test's database, with a job that has a version."""
    targets.add_target(app, ADMIN, TargetSpec("alpha", TargetKind.LOCAL))
    jobs.add_job(app, ADMIN, "nightly", JobSpec("0 2 * * *", "true"), bulk=True)
    point_the_cli_at(app, monkeypatch)
    monkeypatch.setenv("FLEETCRON_ALLOW_LOCAL_TARGETS", "true")
    return app


@pytest.mark.parametrize(
    "args",
    [
        ["runs", "show", HUGE],
        ["runs", "tail", HUGE],
        ["runs", "stop", HUGE],
        ["job", "diff", "nightly", HUGE],
        ["job", "diff", "nightly", "1", HUGE],
        ["job", "revert", "nightly", "--to", HUGE],
        ["notify", "rule", "rm", HUGE],
        ["token", "revoke", HUGE],
        ["runs", "list", "--offset", HUGE],
    ],
    ids=lambda args: " ".join(a for a in args if a != HUGE),
)
def test_an_id_beyond_the_id_range_is_refused_naming_the_range(
    cli_env: App, args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code = run_cli(cli, args)

    err = capsys.readouterr().err
    assert code == 2, err
    assert HUGE in err and "range" in err, err
    assert "Traceback" not in err


def test_the_largest_id_is_looked_up_as_any_other(
    cli_env: App, capsys: pytest.CaptureFixture[str]
) -> None:
    # Negative control: the bound lets every id the API takes through to the lookup.
    code = run_cli(cli, ["runs", "show", str(MAX_ID)])

    assert code == 2
    assert f"run {MAX_ID} does not exist" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args",
    [
        ["runs", "list", "--since", "9999-12-31T23:59:59-11:00"],
        ["runs", "list", "--since", "0001-01-01T00:00:00+14:00"],
        ["job", "slots", "nightly", "--before", "9999-12-31T23:59:59-11:00"],
        ["audit", "list", "--since", "0001-01-01T00:00:00+14:00"],
    ],
    ids=lambda args: " ".join(args[:-1]),
)
def test_a_time_outside_the_years_1_to_9999_in_utc_is_refused_naming_the_option(
    cli_env: App, args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code = run_cli(cli, args)

    err = capsys.readouterr().err
    assert code == 2, err
    option = args[-2].removeprefix("--")
    assert err.startswith(f"error: {option}: '{args[-1]}' is out of range"), err


def test_a_time_at_the_edge_but_inside_the_range_is_searched(
    cli_env: App, capsys: pytest.CaptureFixture[str]
) -> None:
    code = run_cli(cli, ["runs", "list", "--since", "9999-12-31T23:59:59+14:00"])

    assert code == 0
    assert "no runs match" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["apply", "/dev/zero", "--dry-run"], "file"),
        (["target", "add", "box", "--local", "--key", "/dev/zero"], "key"),
        (["backup", "BACKUP", "--passphrase-file", "/dev/zero"], "--passphrase-file"),
    ],
    ids=["apply", "target add --key", "backup --passphrase-file"],
)
def test_an_endless_file_is_refused_without_reading_it_whole(
    cli_env: App,
    args: list[str],
    field: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = [str(tmp_path / "b.backup") if a == "BACKUP" else a for a in args]

    code = run_cli(cli, args)

    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith(f"error: {field}: /dev/zero is larger than "), err
    assert not (tmp_path / "b.backup").exists()


def test_a_schedule_file_of_ordinary_size_is_still_applied(
    cli_env: App, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Negative control for the bound: a real file goes through the bounded read.
    path = tmp_path / "schedule.yaml"
    path.write_text(
        "version: 1\njobs:\n"
        "  - name: nightly\n    bulk: true\n    schedule: '0 3 * * *'\n"
        "    timezone: UTC\n    command: 'true'\n    timeout: 3600\n"
    )

    code = run_cli(cli, ["apply", str(path), "--dry-run"])

    assert code == 0, capsys.readouterr().err
    assert "schedule: '0 2 * * *' → '0 3 * * *'" in capsys.readouterr().out


@pytest.mark.parametrize(
    "args",
    [
        ["runs", "tail", "1", "--interval", "nan"],
        ["runs", "stop", "1", "--wait", "--wait-timeout", "nan"],
        ["job", "run", "nightly", "--wait", "--wait-timeout", "nan"],
    ],
    ids=["runs tail --interval", "runs stop --wait-timeout", "job run --wait-timeout"],
)
def test_nan_seconds_are_refused_before_anything_is_asked_or_queued(
    cli_env: App, args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # nan passes click's FloatRange (every comparison is false): `time.sleep(nan)` was a
    # traceback, and `--wait-timeout nan` a wait that never times out.
    code = run_cli(cli, args)

    err = capsys.readouterr().err
    assert code == 2, err
    assert "'nan' is not a number of seconds" in err, err
    found, _ = list_run_views(cli_env, ADMIN, runs.RunFilter(job="nightly"), limit=10)
    assert not found  # nothing was queued


def test_a_seconds_option_still_takes_a_number(
    cli_env: App, capsys: pytest.CaptureFixture[str]
) -> None:
    (run_id,) = runs.request_run(cli_env, ADMIN, "nightly")

    code = run_cli(cli, ["runs", "stop", str(run_id), "--wait", "--wait-timeout", "0.5"])

    assert code == 0, capsys.readouterr().err
    assert f"run {run_id} cancelled before it started" in capsys.readouterr().out


def test_runs_show_keeps_a_space_after_a_long_field_name(
    cli_env: App, capsys: pytest.CaptureFixture[str]
) -> None:
    (run_id,) = runs.request_run(cli_env, ADMIN, "nightly")
    runs.stop_run(cli_env, ADMIN, run_id)

    assert run_cli(cli, ["runs", "show", str(run_id)]) == 0

    out = capsys.readouterr().out
    assert "stop_requested_by: admin" in out  # was "stop_requested_by:admin"
    assert "status:        cancelled" in out  # the short names keep their column


def test_job_show_keeps_a_space_after_every_field_name_and_lists_as_text(
    cli_env: App, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(cli, ["job", "show", "nightly"]) == 0

    out = capsys.readouterr().out
    # were "retry_backoff_s:30", "allow_duplicate:False" and "['connect_error']"
    assert "retry_backoff_s: 30" in out and "allow_duplicate: False" in out
    assert "retry_on:       connect_error\n" in out
    assert "schedule:       0 2 * * *\n" in out  # the short names keep their column


def test_job_edit_names_what_changed_not_what_was_given(
    cli_env: App, capsys: pytest.CaptureFixture[str]
) -> None:
    # An empty zone is the default zone (UTC here), which the job already has.
    assert run_cli(cli, ["job", "edit", "nightly", "--tz", ""]) == 0
    unchanged = capsys.readouterr().out
    assert run_cli(cli, ["job", "edit", "nightly", "--tz", "", "--notes", "why"]) == 0
    changed = capsys.readouterr().out

    assert unchanged.startswith("job nightly: no change"), unchanged  # was "updated (timezone)"
    assert changed.startswith("job nightly updated (notes): "), changed
