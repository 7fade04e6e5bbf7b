"""ids are never reused: AUTOINCREMENT on SQLite for the tables whose ids history keeps

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-01

Without ``AUTOINCREMENT`` SQLite gives a new row the largest id plus one, which is the id
of the newest row if that one was deleted: a job added after the newest job was removed
got its id, and since runs, versions and the audit log keep ``job_id`` as a plain column,
the new job's page showed the old job's runs. The same held for targets and assignments
(runs keep ``target_id`` and ``assignment_id``; the slot's unique key and the overlap and
health reads go by ``assignment_id``), runs (claims, fenced writes, run links in
notifications and the audit log name run ids), API tokens and notification rules (the
audit log names them by id). Users and channels are not here: nothing refers to them by
id once they are removed (sessions and tokens, rules and deliveries go with them).

Each table is rebuilt in batch mode with ``sqlite_autoincrement`` (rows, ids, indexes and
constraints copied), and its sequence starts past its largest id *and* past every id
history still refers to, so an id used before this migration is not handed out again
either. The triggers of ``runs`` (the FTS index of migration 0019) go with the old table
and are created again. The rebuild drops the old tables, which needs foreign keys off
(``PRAGMA foreign_keys`` cannot change inside a transaction, so ``env.py`` turns them off
for the migration run): with them on, dropping ``jobs`` would delete every assignment by
its ``ON DELETE CASCADE``. Before the commit, a check that no row refers to a missing one
that did not before. PostgreSQL: nothing to do (sequences never reuse).
"""

from __future__ import annotations

from typing import Any

from alembic import op
from sqlalchemy import text

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

TABLES = ("targets", "jobs", "assignments", "runs", "api_tokens", "notification_rules")

#: For each table, the statements that find the largest id history refers to.
REFERENCED = {
    "targets": (
        "SELECT max(target_id) FROM runs",
        "SELECT max(target_id) FROM audit_events",
    ),
    "jobs": (
        "SELECT max(job_id) FROM runs",
        "SELECT max(job_id) FROM job_versions",
        "SELECT max(job_id) FROM audit_events",
    ),
    "assignments": (
        "SELECT max(assignment_id) FROM runs",
        "SELECT max(assignment_id) FROM alert_states",
    ),
    "runs": (
        "SELECT max(run_id) FROM execution_claims",
        "SELECT max(run_id) FROM fenced_writes",
        "SELECT max(CAST(json_extract(detail, '$.run_id') AS INTEGER)) FROM audit_events"
        " WHERE action = 'run.stop'",
    ),
    "api_tokens": (
        "SELECT max(CAST(json_extract(detail, '$.token_id') AS INTEGER)) FROM audit_events"
        " WHERE action = 'token.revoke'",
    ),
    "notification_rules": (
        "SELECT max(CAST(json_extract(detail, '$.rule') AS INTEGER)) FROM audit_events"
        " WHERE action = 'notify.rule.remove'",
    ),
}


def _scalar(statement: str, **params: Any) -> Any:
    return op.get_bind().execute(text(statement), params).scalar()


def _require_foreign_keys_off() -> None:
    if _scalar("PRAGMA foreign_keys"):
        raise RuntimeError(
            "migration 0020 rebuilds tables that others refer to; with foreign keys on, "
            "dropping the old tables would delete the rows that refer to them. Run it "
            "through `fleetcron db upgrade` (which turns them off for the migration)"
        )


def _triggers(table: str) -> list[str]:
    rows = op.get_bind().execute(
        text("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = :t"),
        {"t": table},
    )
    return [sql for (sql,) in rows if sql]


def _rebuild(table: str, *, autoincrement: bool) -> None:
    triggers = _triggers(table)
    with op.batch_alter_table(
        table, recreate="always", table_kwargs={"sqlite_autoincrement": autoincrement}
    ):
        pass
    for statement in triggers:
        op.execute(statement)


def _start_sequence_past_history(table: str) -> None:
    """The next id of ``table`` is past its largest id and every id history refers to."""
    top = max(
        [_scalar(f"SELECT max(id) FROM {table}") or 0]
        + [_scalar(statement) or 0 for statement in REFERENCED[table]]
    )
    current = _scalar("SELECT seq FROM sqlite_sequence WHERE name = :t", t=table)
    if current is None:
        if top:
            op.execute(
                text("INSERT INTO sqlite_sequence (name, seq) VALUES (:t, :n)").bindparams(
                    t=table, n=top
                )
            )
    elif current < top:
        op.execute(
            text("UPDATE sqlite_sequence SET seq = :n WHERE name = :t").bindparams(t=table, n=top)
        )


def _foreign_key_violations() -> set[tuple[Any, ...]]:
    return {tuple(row) for row in op.get_bind().execute(text("PRAGMA foreign_key_check"))}


def _check_foreign_keys(before: set[tuple[Any, ...]]) -> None:
    """No row refers to a missing one that did not before (rolls the migration back)."""
    broken = _foreign_key_violations() - before
    if broken:
        shown = sorted(broken, key=repr)[:5]
        raise RuntimeError(f"migration 0020: foreign keys broken by the rebuild: {shown}")


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    _require_foreign_keys_off()
    before = _foreign_key_violations()
    for table in TABLES:
        _rebuild(table, autoincrement=True)
        _start_sequence_past_history(table)
    _check_foreign_keys(before)


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    _require_foreign_keys_off()
    before = _foreign_key_violations()
    for table in TABLES:
        _rebuild(table, autoincrement=False)
    _check_foreign_keys(before)
