"""run search: indexes for the runs list's filters, and output text search on PostgreSQL

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-01

The runs list filters by job name, target name and status within a time range, newest
first, and pages by (scheduled_for, id): each filter gets an index in that order, so a page
is an index range scan whatever the table's size.

On PostgreSQL the output text (head and tail of stdout and stderr, and the error) gets a
trigram GIN index (``pg_trgm``), so a search for a fragment of output reads the matching
rows only. When the extension cannot be created (not installed, or no privilege), the
index is left out and the search scans, bounded by the other filters.
"""

from __future__ import annotations

import logging

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

log = logging.getLogger("alembic.runtime.migration")

#: Copied from ``fleetcron.store.schema.SEARCH_TEXT_SQL`` (the query must use this very
#: expression for PostgreSQL to use the index).
SEARCH_EXPRESSION = (
    "(stdout_head || ' ' || stdout_tail || ' ' || stderr_head || ' ' || stderr_tail"
    " || ' ' || coalesce(error, ''))"
)


def upgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.create_index("ix_runs_job_name_slot", ["job_name", "scheduled_for", "id"])
        batch_op.create_index("ix_runs_target_name_slot", ["target_name", "scheduled_for", "id"])
        batch_op.create_index("ix_runs_status_slot", ["status", "scheduled_for", "id"])
    if op.get_bind().dialect.name != "postgresql":
        return
    bind = op.get_bind()
    available = bind.execute(
        sa.text("SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm'")
    ).scalar()
    if not available:
        log.warning("pg_trgm is not available: output search on PostgreSQL will scan")
        return
    savepoint = bind.begin_nested()
    try:
        bind.execute(sa.text("CREATE EXTENSION IF NOT EXISTS pg_trgm"))
    except sa.exc.DBAPIError as exc:
        savepoint.rollback()
        log.warning("cannot create pg_trgm (%s): output search on PostgreSQL will scan", exc)
        return
    savepoint.commit()
    op.execute(
        f"CREATE INDEX ix_runs_search_trgm ON runs USING gin ({SEARCH_EXPRESSION} gin_trgm_ops)"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP INDEX IF EXISTS ix_runs_search_trgm")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_index("ix_runs_status_slot")
        batch_op.drop_index("ix_runs_target_name_slot")
        batch_op.drop_index("ix_runs_job_name_slot")
