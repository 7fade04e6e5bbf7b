"""Root test configuration: fixtures for real PostgreSQL and OpenSSH live in tests/fixtures."""

pytest_plugins = ["fixtures.postgres", "fixtures.sshd", "fixtures.app", "fixtures.cluster"]
