"""Alembic environment: runs migrations on the engine fleetcron hands over."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, create_engine

from fleetcron.store.schema import Base

config = context.config
target_metadata = Base.metadata


def _sqlite_foreign_keys(connection: Connection, on: bool) -> None:
    """Set SQLite's ``PRAGMA foreign_keys`` on the driver connection, outside a transaction
    (inside one SQLite ignores it)."""
    driver = connection.connection.driver_connection
    assert driver is not None
    driver.execute(f"PRAGMA foreign_keys={'ON' if on else 'OFF'}")


def run_migrations_online() -> None:
    engine = config.attributes.get("engine")
    if engine is None:
        engine = create_engine(str(config.get_main_option("sqlalchemy.url")))
    with engine.connect() as connection:
        # SQLite: foreign keys are off while migrating. A batch migration rebuilds a table
        # by copying it and dropping the old one, and with foreign keys on, dropping a table
        # others refer to deletes their rows (ON DELETE CASCADE). The migrations that
        # rebuild such a table check the foreign keys before they commit (0020).
        sqlite = connection.dialect.name == "sqlite"
        if sqlite:
            _sqlite_foreign_keys(connection, on=False)
        try:
            context.configure(
                connection=connection,
                target_metadata=target_metadata,
                render_as_batch=sqlite,
                compare_type=True,
            )
            with context.begin_transaction():
                context.run_migrations()
            connection.commit()
        finally:
            if sqlite:
                connection.rollback()
                _sqlite_foreign_keys(connection, on=True)


run_migrations_online()
