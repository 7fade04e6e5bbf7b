"""What the CLI prints for people: control characters escaped, tables as plain text."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from pydantic import SecretStr

from fleetcron.cli.output import print_table, terminal_safe
from fleetcron.config import Settings
from fleetcron.crypto import generate_key
from fleetcron.services.setup import data_dir_warning, write_initial_password
from fleetcron.store.db import create_private_file


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b]52;c;cHduZWQ=\x07", "\\x1b]52;c;cHduZWQ=\\x07"),  # OSC 52 clipboard write
        ("\x1b]0;title\x1b\\", "\\x1b]0;title\\x1b\\"),  # window title, ST terminator
        ("\x1b[2J\x1b[H", "\\x1b[2J\\x1b[H"),  # clear screen, cursor home
        ("ok\rFAKE", "ok\\x0dFAKE"),  # carriage return hiding text
        ("\x9b31m", "\\x9b31m"),  # C1 CSI
        ("\x7f\x00\x08", "\\x7f\\x00\\x08"),
        ("abc\u202edcba", "abc\\u202edcba"),  # bidi override
        ("\u2066x\u2069", "\\u2066x\\u2069"),
    ],
)
def test_control_characters_are_shown_escaped(raw: str, shown: str) -> None:
    assert terminal_safe(raw) == shown


def test_text_newlines_tabs_and_unicode_are_kept() -> None:
    text = "line 1\n\tcol\u00e9 \u65e5\u672c \U0001f600 [/x] \\x1b\n"
    assert terminal_safe(text) == text


def test_tables_print_markup_as_text(capsys: pytest.CaptureFixture[str]) -> None:
    print_table("[bold]t[/bold]", ["[/c]"], [["[/x] [link=https://e.invalid]l[/link]"], [None]])
    out = capsys.readouterr().out
    assert "[/x] [link=https://e.invalid]l[/link]" in out
    assert "[bold]t[/bold]" in out and "[/c]" in out


def test_tables_escape_control_characters(capsys: pytest.CaptureFixture[str]) -> None:
    print_table(None, ["name"], [["a\x1b]52;c;eA==\x07b"]])
    out = capsys.readouterr().out
    assert "\x1b" not in out and "a\\x1b]52;c;eA==\\x07b" in out


def test_tables_into_a_pipe_are_not_cut(capsys: pytest.CaptureFixture[str]) -> None:
    cell = "x" * 300
    print_table(None, ["a", "b"], [["first", cell]])
    assert cell in capsys.readouterr().out


def _settings(data_dir: Path) -> Settings:
    return Settings(data_dir=data_dir, master_key=SecretStr(generate_key().decode()))


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_initial_password_file_is_owner_only_even_if_it_existed(tmp_path: Path) -> None:
    path = tmp_path / "initial-admin-password"
    path.write_text("old\n")
    path.chmod(0o644)
    previous = os.umask(0o022)
    try:
        written = write_initial_password(_settings(tmp_path), "new-password")
    finally:
        os.umask(previous)
    assert written == path
    assert path.read_text() == "new-password\n"
    assert _mode(path) == 0o600


def test_a_new_database_file_is_owner_only_and_an_existing_one_is_left(tmp_path: Path) -> None:
    previous = os.umask(0o022)
    try:
        create_private_file(tmp_path / "new.db")
        existing = tmp_path / "old.db"
        existing.write_bytes(b"kept")
        create_private_file(existing)
        assert os.umask(0o022) == 0o022  # the umask is restored
    finally:
        os.umask(previous)
    assert _mode(tmp_path / "new.db") == 0o600
    assert existing.read_bytes() == b"kept" and _mode(existing) == 0o644


@pytest.mark.parametrize(("mode", "warns"), [(0o700, False), (0o750, True), (0o705, True)])
def test_data_dir_warning(tmp_path: Path, mode: int, warns: bool) -> None:
    data = tmp_path / "data"
    data.mkdir()
    data.chmod(mode)
    warning = data_dir_warning(_settings(data))
    if warns:
        assert warning is not None and f"has mode {mode:04o}" in warning
    else:
        assert warning is None


def test_no_data_dir_no_warning(tmp_path: Path) -> None:
    assert data_dir_warning(_settings(tmp_path / "missing")) is None
