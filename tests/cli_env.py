"""The CLI run in the test's own process (``run_cli``) pointed at the test's application:
its database, data directory and master key, as ``fleetcron`` reads them from the
environment. The one setup of the suite's in-process CLI tests."""

from __future__ import annotations

import subprocess

import pytest

from fleetcron.app import App
from fleetcron.cli.main import cli
from fleetcron.cli.output import run_cli


def point_the_cli_at(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    """Set ``FLEETCRON_DATA_DIR``, ``FLEETCRON_DATABASE_URL`` and ``FLEETCRON_MASTER_KEY``
    to ``app``'s for the rest of the test (``monkeypatch`` puts them back)."""
    settings = app.settings
    assert settings.master_key is not None
    monkeypatch.setenv("FLEETCRON_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("FLEETCRON_DATABASE_URL", settings.effective_database_url)
    monkeypatch.setenv("FLEETCRON_MASTER_KEY", settings.master_key.get_secret_value())


def run_in_process(
    app: App,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    *args: str,
    local_targets: bool = True,
) -> subprocess.CompletedProcess[str]:
    """``fleetcron ARGS`` run in this process (``run_cli``, as the console script runs it)
    against ``app``: its exit code and what it printed. The console script itself, started
    cold, is the subject of the tests in tests/e2e; here a cold start would only add about
    a second of CPU per command (importing SQLAlchemy, Alembic, asyncssh, pydantic)."""
    point_the_cli_at(app, monkeypatch)
    if local_targets:
        monkeypatch.setenv("FLEETCRON_ALLOW_LOCAL_TARGETS", "true")
    capsys.readouterr()
    code = run_cli(cli, list(args))
    printed = capsys.readouterr()
    return subprocess.CompletedProcess(["fleetcron", *args], code, printed.out, printed.err)
