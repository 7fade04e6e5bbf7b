"""Backup and restore: every row comes back, the key decrypts, the scheduler resumes.

Each round trip runs on SQLite and on PostgreSQL (the ``app`` fixture is parametrized over
both). The fixture clock starts at 2026-03-02 09:00:30 UTC; tests move it by hand.
"""

from __future__ import annotations

import io
import json
import os
import sqlite3
import tarfile
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
import pytest
from alembic import command
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from pydantic import SecretStr
from sqlalchemy import inspect, select

from fixtures.app import FakeClock, make_settings
from fixtures.postgres import PostgresServer
from fleetcron.app import Actor, App
from fleetcron.cli.ops_cmd import backup as backup_command
from fleetcron.cli.ops_cmd import restore as restore_command
from fleetcron.cli.output import run_cli
from fleetcron.config import Settings
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.crypto import create_key_file, generate_key
from fleetcron.errors import Conflict, InvalidInput, SecretError, StoreError
from fleetcron.scheduler.service import Scheduler
from fleetcron.services.backup import create as backup_module
from fleetcron.services.backup.create import (
    MANIFEST,
    BackupResult,
    create_backup,
    libpq_conninfo,
    read_manifest,
    restore_backup,
)
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.runs import reads as runs
from fleetcron.services.targets import edit as targets
from fleetcron.services.targets import reads as target_reads
from fleetcron.store.db import Database, alembic_config
from fleetcron.store.schema import AuditEvent, Base, Run, Target

PASSPHRASE = "correct horse battery staple"
BACKUP_NAME = "fleetcron.backup"


@pytest.fixture(autouse=True)
def no_fleetcron_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No FLEETCRON_* setting of the calling shell leaks into the installations here."""
    for name in list(os.environ):
        if name.startswith("FLEETCRON_"):
            monkeypatch.delenv(name)


@pytest.fixture
def pg_bin_dir(app: App, request: pytest.FixtureRequest) -> Path | None:
    """Where pg_dump and pg_restore of the test server live (None on SQLite)."""
    if app.settings.is_sqlite:
        return None
    server: PostgresServer = request.getfixturevalue("postgres_server")
    return server.bin_dir


@pytest.fixture
def empty(app: App, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Settings]:
    """An empty installation of the same kind as ``app``'s to restore into: a new data dir,
    and on PostgreSQL a new, empty database. No master key: restore writes its file."""
    data_dir = tmp_path / "restored"
    if app.settings.is_sqlite:
        yield Settings(
            data_dir=data_dir, shutdown_grace_s=0.5, allow_local_targets=True, local_allow_root=True
        )
        return
    server: PostgresServer = request.getfixturevalue("postgres_server")
    name = f"r_{uuid.uuid4().hex[:12]}"
    url = server.create_database(name)
    try:
        yield Settings(
            data_dir=data_dir,
            database_url=url,
            shutdown_grace_s=0.5,
            allow_local_targets=True,
            local_allow_root=True,
        )
    finally:
        server.drop_database(name)


def ssh_private_key() -> bytes:
    return Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    )


async def populate(app: App, admin: Actor, clock: FakeClock) -> bytes:
    """Targets (one SSH with an encrypted key), bulk and individual jobs, a paused
    assignment, runs from a real tick, a queued manual run, and their audit rows.
    Returns the SSH private key."""
    key = ssh_private_key()
    targets.add_target(app, admin, TargetSpec("box", TargetKind.LOCAL, labels=["env=prod"]))
    targets.add_target(app, admin, TargetSpec("box2", TargetKind.LOCAL, labels=["env=prod"]))
    targets.add_target(
        app,
        admin,
        TargetSpec(
            "web1",
            host="192.0.2.10",
            user="root",
            private_key=key,
            host_key="ssh-ed25519 "
            "AAAAC3NzaC1lZDI1NTE5AAAAIHkCY9H2yZ1aBeq1Gx7pCD3uNcD9S7i2nV3Cz7pZr5xJ",
        ),
        verify=False,
    )
    jobs.add_job(app, admin, "heartbeat", JobSpec("* * * * *", "echo beat"), bulk=True)
    jobs.add_job(app, admin, "report", JobSpec("*/5 * * * *", "echo report"), target="box")
    jobs.add_job(app, admin, "rotate", JobSpec("0 3 * * *", "logrotate"), target="web1")
    jobs.set_enabled(app, admin, "heartbeat", False, target="box2")
    scheduler = Scheduler(app, clock=clock)
    await scheduler.start()
    clock.advance(seconds=31)  # 09:01:01
    await scheduler.tick()
    await scheduler.idle()
    await scheduler.shutdown()
    runs.request_run(app, admin, "report", target="box")
    return key


def every_row(database_url: str) -> dict[str, list[tuple[Any, ...]]]:
    database = Database(database_url)
    try:
        with database.engine.connect() as conn:
            return {
                table.name: [
                    tuple(row)
                    for row in conn.execute(select(table).order_by(*table.primary_key.columns))
                ]
                for table in Base.metadata.sorted_tables
            }
    finally:
        database.dispose()


def table_names(database_url: str) -> list[str]:
    database = Database(database_url)
    try:
        with database.engine.connect() as conn:
            return inspect(conn).get_table_names()
    finally:
        database.dispose()


def nothing_was_restored(settings: Settings) -> bool:
    if settings.is_sqlite:
        return not settings.data_dir.exists()
    return table_names(settings.effective_database_url) == [] and not settings.data_dir.exists()


def back_up(app: App, directory: Path, bin_dir: Path | None, **options: Any) -> BackupResult:
    values: dict[str, Any] = {"passphrase": PASSPHRASE, "pg_bin_dir": bin_dir, **options}
    return create_backup(app, directory / BACKUP_NAME, **values)


def rewrite(
    path: Path,
    *,
    manifest: Callable[[dict[str, Any]], None] | None = None,
    database: Callable[[bytes], bytes] | None = None,
) -> None:
    """Change a backup file in place, as a newer fleetcron or a bad disk would."""
    with tarfile.open(path, "r:gz") as tar:
        members = [(info, tar.extractfile(info).read()) for info in tar]  # type: ignore[union-attr]
    with tarfile.open(path, "w:gz") as tar:
        for info, data in members:
            if info.name == MANIFEST and manifest is not None:
                loaded = json.loads(data)
                manifest(loaded)
                data = json.dumps(loaded).encode()
            elif info.name != MANIFEST and database is not None:
                data = database(data)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def flip_a_byte(data: bytes) -> bytes:
    middle = len(data) // 2
    return data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :]


# -- round trip ---------------------------------------------------------------------------


async def test_a_restore_brings_every_row_back_and_the_scheduler_resumes(
    app: App,
    admin: Actor,
    clock: FakeClock,
    empty: Settings,
    pg_bin_dir: Path | None,
    tmp_path: Path,
) -> None:
    key = await populate(app, admin, clock)
    before = every_row(app.settings.effective_database_url)

    made = back_up(app, tmp_path, pg_bin_dir)
    result = restore_backup(empty, made.path, passphrase=PASSPHRASE, pg_bin_dir=pg_bin_dir)

    after = every_row(empty.effective_database_url)
    assert after == before
    for table in ("targets", "jobs", "assignments", "runs", "audit_events", "users"):
        assert after[table], f"no {table} rows were seeded"
    assert result.master_key_file == empty.effective_master_key_file
    assert result.master_key_file.stat().st_mode & 0o777 == 0o600
    assert not result.migrated

    restored = App.open(empty, clock=clock)
    try:
        with restored.db.read() as session:
            token = session.scalar(select(Target.private_key_enc).where(Target.name == "web1"))
        assert token is not None
        assert restored.master_key.decrypt(token).reveal() == key

        scheduler = Scheduler(restored, clock=clock)
        await scheduler.start()
        clock.advance(minutes=1)  # 09:02:01
        stats = await scheduler.tick()
        await scheduler.idle()
        await scheduler.shutdown()
        with restored.db.read() as session:
            fired = session.execute(
                select(Run.job_name, Run.target_name, Run.status).where(
                    Run.scheduled_for == datetime(2026, 3, 2, 9, 2, tzinfo=UTC)
                )
            ).all()
            manual = session.scalar(select(Run.status).where(Run.trigger != "schedule"))
    finally:
        restored.close()
    # heartbeat is paused on box2; the queued manual run of report starts as well.
    assert stats.dispatched == 2
    assert fired == [("heartbeat", "box", "succeeded")]
    assert manual == "succeeded"


def test_the_backup_file_is_private_and_says_what_it_holds(
    app: App, pg_bin_dir: Path | None, tmp_path: Path
) -> None:
    made = back_up(app, tmp_path, pg_bin_dir)

    manifest = read_manifest(made.path)
    assert made.path.stat().st_mode & 0o777 == 0o600
    assert manifest.kind == ("sqlite" if app.settings.is_sqlite else "postgresql")
    assert manifest.revision == app.db.head_revision()
    assert manifest.wrapped_key is not None
    assert manifest.created_at == "2026-03-02T09:00:30+00:00"
    assert app.settings.master_key is not None
    secret = app.settings.master_key.get_secret_value()
    assert secret not in made.path.read_bytes().decode("latin-1")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


# -- refusals -----------------------------------------------------------------------------


def test_a_wrong_passphrase_is_refused_and_nothing_is_written(
    app: App, empty: Settings, pg_bin_dir: Path | None, tmp_path: Path
) -> None:
    made = back_up(app, tmp_path, pg_bin_dir)

    with pytest.raises(SecretError, match=r"wrong passphrase.*nothing was restored"):
        restore_backup(empty, made.path, passphrase="not the passphrase", pg_bin_dir=pg_bin_dir)
    assert nothing_was_restored(empty)


def test_restore_refuses_a_target_that_holds_data(
    app: App, empty: Settings, pg_bin_dir: Path | None, tmp_path: Path
) -> None:
    made = back_up(app, tmp_path, pg_bin_dir)
    if empty.is_sqlite:
        empty.data_dir.mkdir()
        (empty.data_dir / "notes.txt").write_text("keep me\n")
    else:
        Database(empty.effective_database_url).upgrade()

    with pytest.raises(Conflict, match="not empty"):
        restore_backup(empty, made.path, passphrase=PASSPHRASE, pg_bin_dir=pg_bin_dir)
    if empty.is_sqlite:
        assert [p.name for p in empty.data_dir.iterdir()] == ["notes.txt"]


def test_a_backup_without_the_key_restores_only_with_that_key_given(
    app: App, empty: Settings, pg_bin_dir: Path | None, tmp_path: Path
) -> None:
    made = back_up(app, tmp_path, pg_bin_dir, passphrase=None, include_key=False)
    assert read_manifest(made.path).wrapped_key is None
    assert app.settings.master_key is not None
    right = {"master_key": app.settings.master_key}
    wrong = {"master_key": SecretStr(generate_key().decode())}

    with pytest.raises(SecretError, match="holds no master key"):
        restore_backup(empty, made.path, passphrase=None, pg_bin_dir=pg_bin_dir)
    with pytest.raises(SecretError, match="not the key of this backup"):
        restore_backup(
            empty.model_copy(update=wrong), made.path, passphrase=None, pg_bin_dir=pg_bin_dir
        )
    assert nothing_was_restored(empty)

    result = restore_backup(
        empty.model_copy(update=right), made.path, passphrase=None, pg_bin_dir=pg_bin_dir
    )
    assert result.master_key_file is None
    assert not empty.effective_master_key_file.exists()


def test_a_backup_from_a_newer_schema_is_refused(
    app: App, empty: Settings, pg_bin_dir: Path | None, tmp_path: Path
) -> None:
    made = back_up(app, tmp_path, pg_bin_dir)
    rewrite(made.path, manifest=lambda m: m["database"].update(revision="9999"))

    with pytest.raises(StoreError, match=r"revision 9999.*newer fleetcron"):
        restore_backup(empty, made.path, passphrase=PASSPHRASE, pg_bin_dir=pg_bin_dir)
    assert nothing_was_restored(empty)


def test_a_damaged_backup_is_refused_and_nothing_is_written(
    app: App, empty: Settings, pg_bin_dir: Path | None, tmp_path: Path
) -> None:
    made = back_up(app, tmp_path, pg_bin_dir)
    rewrite(made.path, database=flip_a_byte)

    with pytest.raises(InvalidInput, match="damaged"):
        restore_backup(empty, made.path, passphrase=PASSPHRASE, pg_bin_dir=pg_bin_dir)
    assert nothing_was_restored(empty)


def test_a_file_that_is_not_a_backup_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello\n")

    with pytest.raises(InvalidInput, match="is not a fleetcron backup"):
        read_manifest(path)


def test_a_backup_is_restored_only_into_the_same_kind_of_database(
    app: App, pg_bin_dir: Path | None, tmp_path: Path
) -> None:
    made = back_up(app, tmp_path, pg_bin_dir)
    other = (
        Settings(data_dir=tmp_path / "x", database_url="postgresql+psycopg://fc:pw@192.0.2.1/x")
        if app.settings.is_sqlite
        else Settings(data_dir=tmp_path / "x")
    )

    with pytest.raises(InvalidInput, match="database but this fleetcron is configured for"):
        restore_backup(other, made.path, passphrase=PASSPHRASE)
    assert not (tmp_path / "x").exists()


def test_a_backup_never_replaces_a_file_unless_told_to(
    app: App, pg_bin_dir: Path | None, tmp_path: Path
) -> None:
    (tmp_path / BACKUP_NAME).write_text("an older backup\n")

    with pytest.raises(Conflict, match="already exists"):
        back_up(app, tmp_path, pg_bin_dir)
    assert (tmp_path / BACKUP_NAME).read_text() == "an older backup\n"
    assert back_up(app, tmp_path, pg_bin_dir, overwrite=True).size > 0


def test_a_short_passphrase_is_refused(app: App, pg_bin_dir: Path | None, tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match=r"too short .* use at least 8") as info:
        back_up(app, tmp_path, pg_bin_dir, passphrase="short")
    assert info.value.allowed == "at least 8 characters"
    assert not (tmp_path / BACKUP_NAME).exists()


def test_the_password_reaches_pg_dump_apart_from_its_command_line() -> None:
    conninfo, password = libpq_conninfo(
        "postgresql+psycopg://fc:s%40cret@db.internal:5433/fleet?sslmode=require"
    )

    assert password == "s@cret"
    assert "s@cret" not in conninfo
    assert sorted(conninfo.split()) == [
        "dbname=fleet",
        "host=db.internal",
        "port=5433",
        "sslmode=require",
        "user=fc",
    ]


def test_every_public_name_of_the_backup_module_exists() -> None:
    assert all(hasattr(backup_module, name) for name in backup_module.__all__)


# -- SQLite specifics ---------------------------------------------------------------------


def test_a_sqlite_backup_is_online_and_holds_only_committed_data(tmp_path: Path) -> None:
    source = App.open(make_settings(tmp_path / "live", None))
    source.db.upgrade()
    targets.add_target(source, Actor("admin", "admin"), TargetSpec("box", TargetKind.LOCAL))
    with source.db.read() as session:
        events = len(session.scalars(select(AuditEvent.id)).all())
    writer = sqlite3.connect(tmp_path / "live" / "fleetcron.db", isolation_level=None)
    try:
        # A writer holds SQLite's write lock with an uncommitted change, as a busy
        # scheduler would: the backup neither waits for it nor sees its change.
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("DELETE FROM audit_events")
        made = back_up(source, tmp_path, None)
    finally:
        writer.execute("ROLLBACK")
        writer.close()
        source.close()
    target = Settings(data_dir=tmp_path / "restored")

    restore_backup(target, made.path, passphrase=PASSPHRASE)

    assert events > 0
    assert len(every_row(target.effective_database_url)["audit_events"]) == events


def test_a_backup_of_an_older_schema_is_migrated_after_the_restore(tmp_path: Path) -> None:
    source = App.open(make_settings(tmp_path / "old", None))
    command.upgrade(alembic_config(engine=source.db.engine), "0003")
    try:
        made = back_up(source, tmp_path, None)
    finally:
        source.close()
    target = Settings(data_dir=tmp_path / "restored")

    result = restore_backup(target, made.path, passphrase=PASSPHRASE)

    assert (result.revision_in_backup, result.migrated) == ("0003", True)
    assert result.revision == Database(target.effective_database_url).head_revision()
    assert "notification_channels" in table_names(target.effective_database_url)


def test_a_missing_database_is_not_created_by_a_backup(tmp_path: Path) -> None:
    source = App.open(make_settings(tmp_path / "nothing", None))
    try:
        with pytest.raises(StoreError, match="there is no database"):
            back_up(source, tmp_path, None)
    finally:
        source.close()
    assert not (tmp_path / "nothing" / "fleetcron.db").exists()


# -- the commands -------------------------------------------------------------------------


@pytest.fixture
def commands() -> click.Group:
    group = click.Group("fleetcron")
    group.add_command(backup_command)
    group.add_command(restore_command)
    return group


@pytest.fixture
def cli_restore_url(database_url: str, request: pytest.FixtureRequest) -> Iterator[str | None]:
    """FLEETCRON_DATABASE_URL to restore into: none (SQLite), or a new empty database."""
    if database_url.startswith("sqlite"):
        yield None
        return
    server: PostgresServer = request.getfixturevalue("postgres_server")
    name = f"r_{uuid.uuid4().hex[:12]}"
    url = server.create_database(name)
    try:
        yield url
    finally:
        server.drop_database(name)


def test_the_commands_back_up_and_restore_with_a_passphrase_from_a_file_or_the_environment(
    commands: click.Group,
    database_url: str,
    cli_restore_url: str | None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    request: pytest.FixtureRequest,
) -> None:
    if cli_restore_url is not None:
        # The tools are found on PATH, as an operator's shell would find them.
        server: PostgresServer = request.getfixturevalue("postgres_server")
        monkeypatch.setenv("PATH", f"{server.bin_dir}{os.pathsep}{os.environ['PATH']}")
    source_dir = tmp_path / "source"
    key = create_key_file(source_dir / "master.key")
    monkeypatch.setenv("FLEETCRON_DATA_DIR", str(source_dir))
    monkeypatch.setenv("FLEETCRON_DATABASE_URL", database_url)
    with_key = App.open(Settings(allow_local_targets=True))
    targets.add_target(with_key, Actor("admin", "admin"), TargetSpec("box", TargetKind.LOCAL))
    with_key.close()
    passphrase_file = tmp_path / "passphrase"
    passphrase_file.write_text(PASSPHRASE + "\n")
    backup_file = tmp_path / "nightly.backup"

    assert run_cli(commands, ["backup", str(backup_file)]) == 2
    assert "--passphrase-file FILE or FLEETCRON_BACKUP_PASSPHRASE" in capsys.readouterr().err
    code = run_cli(
        commands, ["backup", str(backup_file), "--passphrase-file", str(passphrase_file)]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "master key:  included, wrapped with the passphrase" in out

    restored_dir = tmp_path / "restored"
    monkeypatch.setenv("FLEETCRON_DATA_DIR", str(restored_dir))
    if cli_restore_url is None:
        monkeypatch.delenv("FLEETCRON_DATABASE_URL")
    else:
        monkeypatch.setenv("FLEETCRON_DATABASE_URL", cli_restore_url)
    monkeypatch.setenv("FLEETCRON_BACKUP_PASSPHRASE", PASSPHRASE)
    code = run_cli(commands, ["restore", str(backup_file)])
    captured = capsys.readouterr()

    assert code == 0, captured.err
    assert f"master key:  {restored_dir / 'master.key'} (written, mode 0600)" in captured.out
    assert (restored_dir / "master.key").read_bytes().strip() == key
    restored = App.open(Settings())
    try:
        listed = target_reads.list_targets(restored, Actor("admin", "admin"))
        assert [t.name for t in listed] == ["box"]
    finally:
        restored.close()
    assert run_cli(commands, ["restore", str(backup_file)]) == 2
    assert "so no data is overwritten" in capsys.readouterr().err


def test_the_backup_command_takes_no_passphrase_with_no_key(
    commands: click.Group, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    passphrase_file = tmp_path / "passphrase"
    passphrase_file.write_text(PASSPHRASE)

    code = run_cli(
        commands,
        ["backup", str(tmp_path / "b"), "--no-key", "--passphrase-file", str(passphrase_file)],
    )

    assert code == 2
    assert "which --no-key leaves out" in capsys.readouterr().err
