"""The CLI run in the test's own process (``run_cli``) pointed at the test's application:
its database, data directory and master key, as ``fleetcron`` reads them from the
environment. The one setup of the suite's in-process CLI tests."""

from __future__ import annotations

import pytest

from fleetcron.app import App


def point_the_cli_at(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    """Set ``FLEETCRON_DATA_DIR``, ``FLEETCRON_DATABASE_URL`` and ``FLEETCRON_MASTER_KEY``
    to ``app``'s for the rest of the test (``monkeypatch`` puts them back)."""
    settings = app.settings
    assert settings.master_key is not None
    monkeypatch.setenv("FLEETCRON_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("FLEETCRON_DATABASE_URL", settings.effective_database_url)
    monkeypatch.setenv("FLEETCRON_MASTER_KEY", settings.master_key.get_secret_value())
