"""run search on SQLite: an FTS5 trigram index of the output text

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-01

SQLite cannot index ``LIKE '%text%'``, so a search for a fragment of output read every run
(seconds on a million). ``runs_fts`` is an FTS5 table over the head and tail of stdout and
stderr and the error, with the trigram tokenizer, so a phrase of three characters or more
is found through the index, within one column (as the search's exact test requires). It
is an external-content table (the text stays only in ``runs``), kept in step by triggers
on every insert, update of those columns, and delete of a run, so the run store's writes
need no change; a run without output (a run as it starts) is not indexed. Existing runs
are indexed here. PostgreSQL has its trigram index (0017).
"""

from __future__ import annotations

from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

COLUMNS = "stdout_head, stdout_tail, stderr_head, stderr_tail, error"
NEW = "new.stdout_head, new.stdout_tail, new.stderr_head, new.stderr_tail, new.error"
OLD = "old.stdout_head, old.stdout_tail, old.stderr_head, old.stderr_tail, old.error"


def _text(row: str) -> str:
    return " || ".join(
        f"coalesce({row}.{c}, '')"
        for c in ("stdout_head", "stdout_tail", "stderr_head", "stderr_tail", "error")
    )


def statements() -> list[str]:
    """The FTS table, its triggers and the indexing of existing runs (also used by
    ``bench/run_search_bench.py``, which builds them after filling its database)."""
    return [
        f"CREATE VIRTUAL TABLE runs_fts USING fts5({COLUMNS}, content='runs', "
        "content_rowid='id', tokenize='trigram')",
        # A run without output (every run as it starts) is not indexed, so claiming a slot
        # costs the index nothing; the delete of an entry mirrors the insert's condition
        # (an external-content delete must name exactly what was indexed).
        f"CREATE TRIGGER runs_fts_insert AFTER INSERT ON runs WHEN {_text('new')} != '' BEGIN "
        f"INSERT INTO runs_fts(rowid, {COLUMNS}) VALUES (new.id, {NEW}); END",
        f"CREATE TRIGGER runs_fts_delete AFTER DELETE ON runs WHEN {_text('old')} != '' BEGIN "
        f"INSERT INTO runs_fts(runs_fts, rowid, {COLUMNS}) VALUES ('delete', old.id, {OLD}); "
        "END",
        f"CREATE TRIGGER runs_fts_update AFTER UPDATE OF {COLUMNS} ON runs BEGIN "
        f"INSERT INTO runs_fts(runs_fts, rowid, {COLUMNS}) "
        f"SELECT 'delete', old.id, {OLD} WHERE {_text('old')} != ''; "
        f"INSERT INTO runs_fts(rowid, {COLUMNS}) SELECT new.id, {NEW} WHERE {_text('new')} != ''; "
        "END",
        "INSERT INTO runs_fts(runs_fts) VALUES ('rebuild')",
    ]


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for statement in statements():
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for trigger in ("runs_fts_update", "runs_fts_delete", "runs_fts_insert"):
        op.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    op.execute("DROP TABLE IF EXISTS runs_fts")
