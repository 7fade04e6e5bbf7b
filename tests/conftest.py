"""Root test configuration: fixtures for real PostgreSQL and OpenSSH live in tests/fixtures."""

import pytest

pytest_plugins = [
    "fixtures.postgres",
    "fixtures.sshd",
    "fixtures.app",
    "fixtures.cluster",
    "fixtures.pg_pair",
]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Browser tests run last: Playwright's sync API leaves an event loop marked as running
    in the main thread, which asyncio tests collected after them would trip over."""
    browser = [item for item in items if "/e2e/browser/" in str(item.path)]
    items[:] = [item for item in items if item not in browser] + browser
