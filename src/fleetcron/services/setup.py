"""First start: data dir, database at the newest schema, master key, first admin."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fleetcron.crypto import create_key_file
from fleetcron.services.context import SYSTEM, App
from fleetcron.services.users import add_user, check_bootstrap_password, count_users


@dataclass(frozen=True)
class InitResult:
    data_dir: Path
    database_url: str
    master_key_file: Path | None
    admin: str | None


def needs_admin(app: App) -> bool:
    """True before the first admin exists (including on an empty database)."""
    if app.db.current_revision() is None:
        return True
    with app.db.read() as session:
        return count_users(session) == 0


def init(app: App, *, admin_name: str, admin_password: str | None) -> InitResult:
    """Idempotent: creates what is missing and leaves what exists alone."""
    settings = app.settings
    settings.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    app.db.upgrade()
    key_file: Path | None = None
    if settings.master_key is None and not settings.effective_master_key_file.exists():
        create_key_file(settings.effective_master_key_file)
        key_file = settings.effective_master_key_file
    app.master_key  # noqa: B018 - fail now, not at the first pairing, if the key is unusable
    admin: str | None = None
    if needs_admin(app):
        add_user(app, SYSTEM, admin_name, check_bootstrap_password(admin_password), "admin")
        admin = admin_name
    return InitResult(settings.data_dir, _redacted(app.db.url), key_file, admin)


def _redacted(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)
