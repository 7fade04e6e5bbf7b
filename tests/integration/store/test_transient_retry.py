"""A transaction the database aborts only because of another one (a deadlock) is run
again: on a real PostgreSQL, two sessions lock two rows in opposite orders; the one the
server picks as the victim raises ``TransientStoreError`` (not a plain ``StoreError``), and
``retry_transient`` runs it again to success. A function that keeps failing, or fails for
another reason, is not retried without end."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from sqlalchemy import text

from fleetcron.app import App
from fleetcron.errors import StoreError, TransientStoreError
from fleetcron.store import db as store_db
from fleetcron.store.db import retry_transient


@pytest.mark.postgres
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_a_real_deadlock_is_transient_and_its_transaction_runs_again(app: App) -> None:
    with app.db.session() as session:
        session.execute(text("CREATE TABLE deadlock_pair (id int PRIMARY KEY, n int)"))
        session.execute(text("INSERT INTO deadlock_pair VALUES (1, 0), (2, 0)"))
    both_hold = threading.Barrier(2, timeout=30)
    attempts: list[str] = []

    def lock_in_order(first: int, second: int, name: str) -> Callable[[], None]:
        def transaction() -> None:
            attempts.append(name)
            with app.db.session() as session:
                update = "UPDATE deadlock_pair SET n = n + 1 WHERE id = :id"
                session.execute(text(update), {"id": first})
                if attempts.count(name) == 1:
                    both_hold.wait()  # both hold their first row: a cycle follows
                session.execute(text(update), {"id": second})

        return transaction

    errors: list[BaseException] = []

    def run(fn: Callable[[], None]) -> None:
        try:
            fn()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [
        threading.Thread(target=run, args=(retry_transient(lock_in_order(1, 2, "a")),)),
        threading.Thread(target=run, args=(retry_transient(lock_in_order(2, 1, "b")),)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert errors == []
    # One of the two was the deadlock's victim and ran again; both committed in the end.
    assert sorted(attempts) in (["a", "a", "b"], ["a", "b", "b"])
    with app.db.read() as session:
        assert session.execute(text("SELECT sum(n) FROM deadlock_pair")).scalar() == 4


@pytest.mark.postgres
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_negative_control_without_the_retry_the_deadlock_loses_a_transaction(app: App) -> None:
    """The check above can fail: the same two transactions without the retry leave one
    aborted with the transient error."""
    with app.db.session() as session:
        session.execute(text("CREATE TABLE deadlock_pair (id int PRIMARY KEY, n int)"))
        session.execute(text("INSERT INTO deadlock_pair VALUES (1, 0), (2, 0)"))
    both_hold = threading.Barrier(2, timeout=30)
    errors: list[BaseException] = []

    def transaction(first: int, second: int) -> None:
        try:
            with app.db.session() as session:
                update = "UPDATE deadlock_pair SET n = n + 1 WHERE id = :id"
                session.execute(text(update), {"id": first})
                both_hold.wait()
                session.execute(text(update), {"id": second})
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=transaction, args=p) for p in ((1, 2), (2, 1))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert [type(e) for e in errors] == [TransientStoreError]
    assert "deadlock" in str(errors[0])


def test_the_retry_gives_up_after_its_attempts_and_never_retries_other_errors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("fleetcron.store.db.time.sleep", lambda _s: None)
    calls: list[str] = []

    @retry_transient
    def always_transient() -> None:
        calls.append("transient")
        raise TransientStoreError("deadlock detected")

    @retry_transient
    def broken() -> None:
        calls.append("broken")
        raise StoreError("the database is gone")

    with pytest.raises(TransientStoreError):
        always_transient()
    with pytest.raises(StoreError, match="gone"):
        broken()
    assert calls == ["transient"] * store_db.TRANSIENT_ATTEMPTS + ["broken"]
