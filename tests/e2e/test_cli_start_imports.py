"""What a cold `fleetcron` command imports: a command loads the heavy libraries (the
database layer, the SSH library) only when it uses them, probed in a fresh interpreter as
the console script runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def loaded_by(argv: list[str], env: dict[str, str] | None = None) -> list[str]:
    """Which of the heavy libraries a fresh interpreter has loaded after ``fleetcron ARGV``."""
    probe = (
        "import sys\n"
        "from fleetcron.cli.main import main\n"
        f"sys.argv = ['fleetcron', *{argv!r}]\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = ('sqlalchemy', 'asyncssh', 'fleetcron.store.schema')\n"
        "print('loaded:', *(m for m in heavy if m in sys.modules), file=sys.stderr)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )
    last = result.stderr.strip().splitlines()[-1:]
    assert last and last[0].startswith("loaded:"), result
    return last[0].split()[1:]


@pytest.mark.parametrize("args", [["check", "0 2 * * sun"], ["next", "@daily", "-n", "1"]])
def test_the_cron_commands_load_neither_the_database_nor_ssh(args: list[str]) -> None:
    # They need only the cron engine: a cold `fleetcron cron check` took 0.6 s of CPU when
    # the project option's plumbing pulled in SQLAlchemy and the schema, 0.13 s without.
    assert loaded_by(["cron", *args]) == []


def test_target_list_loads_the_database_but_not_ssh(tmp_path: Path) -> None:
    # The probe's negative control (it sees the database layer of a command that needs
    # it), and listing targets connects to none: a cold `fleetcron target list` spent about
    # 0.12 s of CPU importing asyncssh through the target services.
    loaded = loaded_by(["target", "list"], {"FLEETCRON_DATA_DIR": str(tmp_path / "none")})
    assert "sqlalchemy" in loaded
    assert "asyncssh" not in loaded
