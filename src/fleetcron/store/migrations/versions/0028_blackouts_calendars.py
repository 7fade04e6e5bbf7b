"""blackout windows; calendars; a job's on_blackout, run_only_on and never_on; a deferred
run's not_before

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-06

``blackouts``: windows during which slots are skipped or deferred (``core/blackouts.py``).
``jobs.on_blackout``: ``skip`` (existing jobs keep running as before: no window exists yet)
or ``defer``, checked by the job options declaration. ``runs.not_before``: when a run
deferred by a window may start. ``calendars`` and ``calendar_dates``: named sets of dates
a job names in ``run_only_on``/``never_on`` (empty on existing jobs: no filter).

Columns are only added to ``jobs`` and ``runs``, never by a batch rebuild: on SQLite that
would drop the triggers of ``runs`` (migrations 0019, 0022) and the ``AUTOINCREMENT`` of
both (0020); so ``on_blackout`` has no check constraint.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ADD COLUMN: a batch rebuild of these tables on SQLite would drop the triggers
    # of ``runs`` (migrations 0019, 0022) and the AUTOINCREMENT of both (0020).
    op.add_column(
        "jobs", sa.Column("on_blackout", sa.String(length=8), server_default="skip", nullable=False)
    )
    op.add_column(
        "jobs", sa.Column("run_only_on", sa.String(length=80), server_default="", nullable=False)
    )
    op.add_column(
        "jobs", sa.Column("never_on", sa.String(length=80), server_default="", nullable=False)
    )
    op.add_column("runs", sa.Column("not_before", sa.DateTime(), nullable=True))
    op.create_table(
        "blackouts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("job_name", sa.String(length=64), nullable=True),
        sa.Column("target_name", sa.String(length=64), nullable=True),
        sa.Column("selector", sa.String(length=512), nullable=True),
        sa.Column("zone", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=8), nullable=False),
        sa.Column("start_wall", sa.String(length=19), nullable=True),
        sa.Column("end_wall", sa.String(length=19), nullable=True),
        sa.Column("cron", sa.String(length=255), nullable=True),
        sa.Column("duration_s", sa.Integer(), nullable=True),
        sa.Column("until", sa.DateTime(), nullable=True),
        sa.Column("expires_at", sa.DateTime(), nullable=True),
        sa.Column("created_by", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_by", sa.String(length=64), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.Column("lifted_by", sa.String(length=64), nullable=True),
        sa.Column("lifted_at", sa.DateTime(), nullable=True),
        sa.CheckConstraint("kind IN ('once', 'cron')", name=op.f("ck_blackouts_kind")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_blackouts")),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_blackouts_expires_at", "blackouts", ["expires_at"], unique=False)
    op.create_table(
        "calendars",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("weekdays", sa.String(length=32), nullable=False),
        sa.Column("except_name", sa.String(length=64), nullable=True),
        sa.Column("source", sa.String(length=8), nullable=False),
        sa.Column("created_by", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_by", sa.String(length=64), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_calendars")),
        sa.UniqueConstraint("name", name=op.f("uq_calendars_name")),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "calendar_dates",
        sa.Column("calendar_id", sa.Integer(), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.ForeignKeyConstraint(
            ["calendar_id"],
            ["calendars.id"],
            name=op.f("fk_calendar_dates_calendar_id_calendars"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("calendar_id", "day", name=op.f("pk_calendar_dates")),
    )


def downgrade() -> None:
    op.drop_table("calendar_dates")
    op.drop_table("calendars")
    op.drop_index("ix_blackouts_expires_at", table_name="blackouts")
    op.drop_table("blackouts")
    # SQLite 3.35+ drops a column in place (no rebuild, triggers kept).
    op.drop_column("runs", "not_before")
    for column in ("never_on", "run_only_on", "on_blackout"):
        op.drop_column("jobs", column)
