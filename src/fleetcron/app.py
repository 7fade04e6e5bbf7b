"""The foundation every layer above the store shares.

`App` is one process's handle (database, settings, master key, clock); `Actor` is who acts.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import cached_property

from fleetcron.config import Settings
from fleetcron.core.permissions import DEFAULT_PROJECT, FULL_SCOPE, demand
from fleetcron.crypto import MasterKey, load_master_key
from fleetcron.store.db import Database, application_name, session_bounds


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Actor:
    """Who performs an action: a user with a global role (``none``: roles in projects
    only) and its roles in projects, or the system itself."""

    name: str
    role: str
    #: what an API token may do within the role (see core/permissions.py)
    scope: str = FULL_SCOPE
    #: (project, role) pairs, sorted (``core.permissions.roles_of``)
    project_roles: tuple[tuple[str, str], ...] = ()
    #: the one project an API token is narrowed to; None: every project of its owner
    token_project: str | None = None
    #: the project it acts in (the CLI's ``--project``, the API's ``?project=``): the
    #: objects it names are looked up there and its project actions weighed there
    project: str = DEFAULT_PROJECT

    def authorize(self, action: str) -> None:
        """Raise PermissionDenied unless the global role allows ``action``: the check of
        every operation not yet scoped to a project (fail closed: a role in a project
        grants nothing there)."""
        demand(self, action, None)

    def authorize_in(self, action: str, project: str | None = None) -> None:
        """Raise PermissionDenied unless the actor may perform ``action`` on an object of
        ``project`` (by default the project it acts in), from its global role or its role
        there; NotFound when it does not see that project. For operations whose reads
        and writes are confined to that project."""
        demand(self, action, project or self.project)

    def within(self, project: str | None) -> Actor:
        """The same actor acting in ``project`` (None: where it acts now)."""
        return self if project is None else replace(self, project=project)


SYSTEM = Actor("system", "admin")


@dataclass
class App:
    """One fleetcron process's handle on its data."""

    settings: Settings
    db: Database
    clock: Callable[[], datetime] = field(default=utc_now)

    @classmethod
    def open(cls, settings: Settings, *, clock: Callable[[], datetime] = utc_now) -> App:
        name = application_name(settings.node_name or socket.gethostname(), "process")
        db = Database(
            settings.effective_database_url, bounds=session_bounds(settings.lease_s), name=name
        )
        return cls(settings=settings, db=db, clock=clock)

    @cached_property
    def master_key(self) -> MasterKey:
        secret = self.settings.master_key
        return load_master_key(
            secret.get_secret_value() if secret else None, self.settings.effective_master_key_file
        )

    @cached_property
    def node_name(self) -> str:
        return self.settings.node_name or socket.gethostname()

    def now(self) -> datetime:
        return self.clock()

    def close(self) -> None:
        self.db.dispose()
