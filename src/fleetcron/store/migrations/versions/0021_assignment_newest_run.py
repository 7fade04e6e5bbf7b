"""assignments: their newest run and newest finished run, with the statuses

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-01

``newest_run_id``/``newest_status``: the newest run of the assignment (by ``scheduled_for,
attempt``) the scheduler has taken up (any status but ``queued``);
``newest_finished_run_id``/``newest_finished_status``: the newest that ran to an outcome
(succeeded or one of the failed statuses). Kept by ``store/run_newest.py`` with every run
write; read by the dashboard, the fleet grid, the job page and health instead of an index
seek per assignment. Filled here from the runs, with the finished statuses of this release
written out (a migration does not follow later changes of the code).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

FINISHED = ("succeeded", "failed", "timed_out", "connect_error", "interrupted", "lost", "fenced")

NEWEST = (
    "(SELECT id FROM runs WHERE runs.assignment_id = assignments.id{where}"
    " ORDER BY scheduled_for DESC, attempt DESC LIMIT 1)"
)


def upgrade() -> None:
    with op.batch_alter_table("assignments", schema=None) as batch_op:
        batch_op.add_column(sa.Column("newest_run_id", sa.BigInteger(), nullable=True))
        batch_op.add_column(sa.Column("newest_status", sa.String(16), nullable=True))
        batch_op.add_column(sa.Column("newest_finished_run_id", sa.BigInteger(), nullable=True))
        batch_op.add_column(sa.Column("newest_finished_status", sa.String(16), nullable=True))
    # ``status || ''``: no index serves it, so the planners stay on the slot index.
    is_finished = " AND (status || '') IN (" + ", ".join(f"'{s}'" for s in FINISHED) + ")"
    # A queued "run now" is not counted until the scheduler takes it up.
    taken_up = " AND (status || '') <> 'queued'"
    op.execute(
        "UPDATE assignments SET"
        f" newest_run_id = {NEWEST.format(where=taken_up)},"
        f" newest_finished_run_id = {NEWEST.format(where=is_finished)}"
    )
    op.execute(
        "UPDATE assignments SET"
        " newest_status = (SELECT status FROM runs WHERE runs.id = assignments.newest_run_id),"
        " newest_finished_status ="
        " (SELECT status FROM runs WHERE runs.id = assignments.newest_finished_run_id)"
    )
    op.create_index(
        "ix_assignments_newest_finished_status", "assignments", ["newest_finished_status"]
    )


def downgrade() -> None:
    op.drop_index("ix_assignments_newest_finished_status", table_name="assignments")
    with op.batch_alter_table("assignments", schema=None) as batch_op:
        batch_op.drop_column("newest_finished_status")
        batch_op.drop_column("newest_finished_run_id")
        batch_op.drop_column("newest_status")
        batch_op.drop_column("newest_run_id")
