"""runs: partial indexes for a target's newest reaching run and its connection errors

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-04

Health asks, per target with connection errors, when a run last reached it and how its
outage has gone since. Read through ``ix_runs_target_started``, the newest run that reached
a target was a backward walk over every connection error of the outage: 72,000 index
entries (each checked in the table) for a target of 50 minute-jobs down for a day, 2.5 s for
ten such targets. A partial index per question makes each a seek. The predicates are
written out as this release has them (a migration does not follow later changes of the
code); ``store/schema.py`` holds the same text and the queries repeat it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

REACHED_SQL = "status IN ('succeeded', 'failed', 'timed_out')"
CONNECT_ERROR_SQL = "status = 'connect_error'"


def upgrade() -> None:
    for name, predicate in (
        ("ix_runs_target_reached", REACHED_SQL),
        ("ix_runs_target_connect_error", CONNECT_ERROR_SQL),
    ):
        op.create_index(
            name,
            "runs",
            ["target_id", "started_at"],
            sqlite_where=sa.text(predicate),
            postgresql_where=sa.text(predicate),
        )


def downgrade() -> None:
    op.drop_index("ix_runs_target_connect_error", table_name="runs")
    op.drop_index("ix_runs_target_reached", table_name="runs")
