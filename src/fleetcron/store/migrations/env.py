"""Alembic environment: runs migrations on the engine fleetcron hands over."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from fleetcron.store.schema import Base

config = context.config
target_metadata = Base.metadata


def run_migrations_online() -> None:
    engine = config.attributes.get("engine")
    if engine is None:
        engine = create_engine(str(config.get_main_option("sqlalchemy.url")))
    with engine.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=connection.dialect.name == "sqlite",
            compare_type=True,
        )
        with context.begin_transaction():
            context.run_migrations()
        connection.commit()


run_migrations_online()
