"""The maintainers' regeneration of ``sqlite_head.sql``: migrate a new SQLite file through
every migration and render it (:mod:`fleetcron.store.sqlite_head`)::

    python -m fleetcron.store.sqlite_head_build > src/fleetcron/store/sqlite_head.sql

Apart from :mod:`~fleetcron.store.sqlite_head` because it drives a whole
:class:`~fleetcron.store.db.Database`, which itself loads the script.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from fleetcron.store.db import HEAD_REVISION, Database
from fleetcron.store.sqlite_head import Window, now, render


def migrated_script(path: Path) -> str:
    """Migrate a new SQLite file at ``path`` through every migration and render it: what
    ``sqlite_head.sql`` must hold."""
    with closing(sqlite3.connect(path)) as clock:
        start = now(clock)
    database = Database(f"sqlite:///{path}")
    try:
        database.upgrade(from_script=False)
    finally:
        database.dispose()
    with closing(sqlite3.connect(path)) as migrated:
        return render(migrated, HEAD_REVISION, Window(start, now(migrated)))


if __name__ == "__main__":  # pragma: no cover - the maintainers' regeneration command
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        sys.stdout.write(migrated_script(Path(directory) / "head.db"))
