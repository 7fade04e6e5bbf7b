"""Two admins demoting each other at the same moment must leave one admin (the audit saw
zero admins in 9 of 15 rounds on PostgreSQL). Each transaction lingers between its count of
the admins and its commit, so that without the row lock the two counts always overlap."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from fleetcron.app import SYSTEM, Actor, App
from fleetcron.errors import Conflict
from fleetcron.services.accounts import users
from fleetcron.store.schema import User

postgres_only = pytest.mark.parametrize("database_url", ["postgres"], indirect=True)


def unlocked_admins(session: Session) -> list[int]:
    """The guard as it was: a plain read of the admins, no lock."""
    return list(session.scalars(select(User.id).where(User.role == "admin")))


def lingering(count: Callable[[Session], list[int]]) -> Callable[[Session], list[int]]:
    def slow(session: Session) -> list[int]:
        found = count(session)
        time.sleep(0.3)
        return found

    return slow


def demote_each_other(app: App) -> list[str]:
    users.add_user(app, SYSTEM, "ada", "ada-password", "admin")
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def demote(actor: str, victim: str) -> None:
        barrier.wait()
        try:
            users.set_role(app, Actor(actor, "admin"), victim, "operator")
            outcomes.append("demoted")
        except Conflict:
            outcomes.append("refused")

    threads = [
        threading.Thread(target=demote, args=("admin", "ada")),
        threading.Thread(target=demote, args=("ada", "admin")),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return sorted(outcomes)


def admins(app: App) -> int:
    with app.db.read() as session:
        return session.scalar(select(func.count(User.id)).where(User.role == "admin")) or 0


def test_concurrent_demotions_leave_one_admin(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(users, "locked_admins", lingering(users.locked_admins))

    assert demote_each_other(app) == ["demoted", "refused"]
    assert admins(app) == 1


@postgres_only
def test_without_the_lock_the_same_race_leaves_no_admin(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Negative control: the harness does catch the race when the guard does not lock."""
    monkeypatch.setattr(users, "locked_admins", lingering(unlocked_admins))

    assert demote_each_other(app) == ["demoted", "demoted"]
    assert admins(app) == 0
