"""The migrations build exactly the schema the models describe, on both databases."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from fleetcron.app import App
from fleetcron.store.schema import Base, is_modeled


def test_the_migrated_database_matches_the_models(app: App) -> None:
    with app.db.engine.connect() as connection:
        context = MigrationContext.configure(
            connection,
            opts={
                "compare_type": True,
                "include_name": lambda name, kind, _parent: kind != "table" or is_modeled(name),
            },
        )
        differences = compare_metadata(context, Base.metadata)

    assert differences == []


def test_the_database_is_at_the_newest_revision(app: App) -> None:
    assert app.db.current_revision() == app.db.head_revision()


def test_the_head_revision_constant_is_alembics_head() -> None:
    from alembic.script import ScriptDirectory

    from fleetcron.store.db import HEAD_REVISION, alembic_config

    assert ScriptDirectory.from_config(alembic_config()).get_current_head() == HEAD_REVISION
