"""Configuration shared by the integration tests: their engines share compiled statements."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine

from fixtures.compiled_cache import SharedView, share_compiled_cache
from fixtures.warm_connections import WARM
from fleetcron.store import db
from fleetcron.store.schema import User


@pytest.fixture(autouse=True)
def shared_compiled_statements(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engines these tests open keep their compiled statements in the process's shared
    cache (fixtures/compiled_cache.py): each test opens an app of its own, and compiling
    every statement again for each new engine was about a fifth of a web test's CPU. The
    ORM's own statements for flushes are kept per mapper and dialect: those share it too."""
    create = db.create_db_engine

    def create_sharing(*args: Any, **kwargs: Any) -> Engine:
        return WARM.attach(share_compiled_cache(create(*args, **kwargs)))

    monkeypatch.setattr(db, "create_db_engine", create_sharing)
    for mapper in User.registry.mappers:  # the flushes' INSERT, UPDATE and DELETE statements
        monkeypatch.setattr(mapper, "_compiled_cache", SharedView())
