"""PostgreSQL backups and restores with the client tools (``pg_dump``/``pg_restore``),
found beside the server's version, given the connection as a libpq conninfo.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from fleetcron.config_view import mask_url
from fleetcron.errors import Conflict, StoreError
from fleetcron.services.backup.archive import Manifest, extract_database
from fleetcron.store.db import Database

log = logging.getLogger(__name__)


def dump_postgres(db: Database, dest: Path, bin_dir: Path | None) -> str:
    before = db.current_revision()
    if before is None:
        raise StoreError("the database holds no fleetcron schema; there is nothing to back up")
    _run_pg_tool(
        "pg_dump",
        ["--format=custom", "--no-owner", "--no-privileges", f"--file={dest}"],
        db.url,
        bin_dir,
    )
    # pg_dump reads one snapshot; only a migration in between could make the revision
    # read beside it wrong.
    if db.current_revision() != before:
        raise StoreError("the database schema changed during the backup; run the backup again")
    return before


def restore_postgres(path: Path, manifest: Manifest, url: str, bin_dir: Path | None) -> None:
    _check_database_empty(url)
    with tempfile.TemporaryDirectory(prefix="fleetcron-restore-") as work:
        dump = Path(work) / manifest.member
        extract_database(path, manifest, dump)
        # One transaction: a failure leaves the database as empty as it was.
        _run_pg_tool(
            "pg_restore",
            ["--no-owner", "--no-privileges", "--exit-on-error", "--single-transaction", str(dump)],
            url,
            bin_dir,
        )


def _check_database_empty(url: str) -> None:
    database = Database(url)
    try:
        with database.engine.connect() as conn:
            relations = conn.execute(
                text(
                    "SELECT count(*) FROM pg_catalog.pg_class c"
                    " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
                    " WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')"
                    " AND n.nspname NOT LIKE 'pg\\_toast%' AND n.nspname NOT LIKE 'pg\\_temp%'"
                )
            ).scalar_one()
    except SQLAlchemyError as exc:
        raise StoreError(
            f"cannot reach the database to restore into ({mask_url(url)}): "
            f"{getattr(exc, 'orig', exc)}; it must exist, empty"
        ) from exc
    finally:
        database.dispose()
    if relations:
        raise Conflict(
            f"the database {mask_url(url)} is not empty ({relations} relation(s)); "
            "restore into a new, empty database so no data is overwritten"
        )


# -- PostgreSQL client tools -----------------------------------------------------------


def find_pg_tool(name: str, bin_dir: Path | None = None) -> Path:
    """``bin_dir/name`` if given, else ``name`` on PATH, else the newest
    ``/usr/lib/postgresql/*/bin/name``."""
    if bin_dir is not None:
        candidate = bin_dir / name
        if candidate.is_file():
            return candidate
        raise StoreError(f"{name} is not in {bin_dir}")
    on_path = shutil.which(name)
    if on_path is not None:
        return Path(on_path)
    installed = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"), key=_pg_version)
    if installed:
        return installed[-1]
    raise StoreError(
        f"{name} was not found on PATH nor under /usr/lib/postgresql/*/bin; install the "
        "PostgreSQL client tools (Debian: postgresql-client) in a version at least as new "
        "as the server"
    )


def _pg_version(tool: Path) -> tuple[int, ...]:
    return tuple(int(part) for part in tool.parent.parent.name.split(".") if part.isdigit())


def libpq_conninfo(url: str) -> tuple[str, str | None]:
    """A libpq connection string for a SQLAlchemy URL, and the password apart (it goes to
    the tool in PGPASSWORD, never on a command line other users can read)."""
    from psycopg.conninfo import make_conninfo

    parsed = make_url(url)
    params: dict[str, str] = {}
    for key, value in (
        ("dbname", parsed.database),
        ("host", parsed.host),
        ("port", parsed.port),
        ("user", parsed.username),
    ):
        if value is not None:
            params[key] = str(value)
    for key, given in parsed.query.items():
        params[key] = given if isinstance(given, str) else given[-1]
    password = params.pop("password", None) or parsed.password
    return make_conninfo(**params), None if password is None else str(password)


def _run_pg_tool(name: str, args: list[str], url: str, bin_dir: Path | None) -> None:
    tool = find_pg_tool(name, bin_dir)
    conninfo, password = libpq_conninfo(url)
    env = dict(os.environ)
    if password is not None:
        env["PGPASSWORD"] = password
    result = subprocess.run(
        [str(tool), *args, "--no-password", f"--dbname={conninfo}"],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        detail = result.stderr.strip() or result.stdout.strip() or "no output"
        raise StoreError(f"{name} failed (exit {result.returncode}): {detail}")
