"""`fleetcron restore` with the wrong passphrase is bad input: exit 2 (the README's rule),
with the message that says what was wrong and that nothing was restored."""

from __future__ import annotations

from pathlib import Path

from e2e.conftest import Zygote, assert_refused, succeeded


def test_a_wrong_backup_passphrase_is_exit_2_and_restores_nothing(
    tmp_path: Path, zygote: Zygote
) -> None:
    run = zygote.run
    source = tmp_path / "source"
    source.mkdir()
    succeeded(run("init", workdir=source))
    good = tmp_path / "good.pw"
    good.write_text("the right passphrase\n")
    wrong = tmp_path / "wrong.pw"
    wrong.write_text("not the passphrase\n")
    backup = tmp_path / "fleet.backup"
    succeeded(run("backup", str(backup), "--passphrase-file", str(good), workdir=source))

    target = tmp_path / "target"
    target.mkdir()
    refused = run("restore", str(backup), "--passphrase-file", str(wrong), workdir=target)

    assert_refused(refused, "does not unwrap", "wrong passphrase?", "nothing was restored")
    assert not (target / "data").exists()

    # The control: the right passphrase restores the same file into the same place.
    restored = run("restore", str(backup), "--passphrase-file", str(good), workdir=target)
    assert "restored:" in succeeded(restored)
    assert (target / "data").exists()
