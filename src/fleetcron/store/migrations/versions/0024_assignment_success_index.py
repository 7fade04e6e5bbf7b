"""runs: a partial index for an assignment's newest success

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-04

A failure streak is the failures since the assignment's newest success. Read through the
runs' slot index (``uq_runs_slot``), finding that success was a backward walk over every
run of the streak: 1,440 index entries, each checked in the table, for a minute job failing
for a day, on every health call, job page and ``health --job`` that shows the streak. A
partial index of the successes makes it a seek. The predicate is written out as this
release has it; ``store/schema.py`` holds the same text and the query repeats it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

SUCCEEDED_SQL = "status = 'succeeded'"


def upgrade() -> None:
    op.create_index(
        "ix_runs_assignment_succeeded",
        "runs",
        ["assignment_id", "scheduled_for", "attempt"],
        sqlite_where=sa.text(SUCCEEDED_SQL),
        postgresql_where=sa.text(SUCCEEDED_SQL),
    )


def downgrade() -> None:
    op.drop_index("ix_runs_assignment_succeeded", table_name="runs")
