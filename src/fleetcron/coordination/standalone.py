"""One scheduler per SQLite database in a standalone installation.

The embedded default is one process: a second ``fleetcron serve`` (or ``scheduler``)
started on the same database by mistake would tick beside the first under the same node
name, so a crash of either would leave runs that the other cannot tell from its own. The
lock is an ``flock`` on a file beside the database, held for the life of the process: the
kernel releases it when the process ends, however it ends, so a crash leaves no stale lock.
A cluster (shared PostgreSQL, ``docs/high-availability.md``) coordinates its nodes through
ownership instead and takes no such lock.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy.engine import make_url

from fleetcron.config import Settings
from fleetcron.errors import Conflict


def database_file(settings: Settings) -> Path | None:
    """The SQLite file whose scheduler takes the lock, or None when none is taken (a
    cluster, PostgreSQL, an in-memory database)."""
    if settings.cluster or not settings.is_sqlite:
        return None
    database = make_url(settings.effective_database_url).database
    if not database or database == ":memory:":
        return None
    return Path(database)


def lock_path(database: Path) -> Path:
    return database.with_name(database.name + ".scheduler.lock")


@contextmanager
def only_scheduler(settings: Settings) -> Iterator[None]:
    """Hold the standalone scheduler's lock, or raise Conflict naming the holder."""
    database = database_file(settings)
    if database is None:
        yield
        return
    database.parent.mkdir(parents=True, exist_ok=True, mode=0o700)  # as the database's own
    fd = os.open(lock_path(database), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode("ascii", "replace").strip() or "unknown"
            raise Conflict(
                f"another fleetcron scheduler (pid {holder}) is running on "
                f"{database}: a standalone installation runs one "
                "scheduler per database; stop that one first (several nodes: see "
                "docs/high-availability.md)"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield
    finally:
        os.close(fd)  # releases the lock
