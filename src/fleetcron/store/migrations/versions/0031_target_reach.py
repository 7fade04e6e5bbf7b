"""host probe states on targets; host incidents

Revision ID: 0031
Revises: 0030
Create Date: 2026-12-06

The host probe (``core/reach.py``) records on each SSH target what a fresh connection
found (``reach``), when (``reach_at``), since when (``reach_since``) and the error text
(bounded). A target that cannot be reached opens one incident of cause ``unreachable``,
which names the target (``incidents.target_id``/``target_name``; its ``job_id`` is 0): at
most one open per host, as at most one is open per job and cause.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0031"
down_revision = "0030"
branch_labels = None
depends_on = None

_JOB_WHERE = "status = 'open' AND target_id IS NULL"
_HOST_WHERE = "status = 'open' AND target_id IS NOT NULL"
# The states of core/reach.py a new connection fails in, frozen here.
_DOWN_WHERE = "reach IN ('refused', 'timeout', 'auth_failed', 'host_key_changed', 'error')"


def upgrade() -> None:
    with op.batch_alter_table("targets", table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.add_column(sa.Column("reach", sa.String(length=16), nullable=True))
        batch.add_column(sa.Column("reach_at", sa.DateTime(), nullable=True))
        batch.add_column(sa.Column("reach_since", sa.DateTime(), nullable=True))
        batch.add_column(sa.Column("reach_error", sa.String(length=300), nullable=True))
    op.create_index(
        "ix_targets_down",
        "targets",
        ["reach_since"],
        unique=False,
        sqlite_where=sa.text(_DOWN_WHERE),
        postgresql_where=sa.text(_DOWN_WHERE),
    )
    with op.batch_alter_table("incidents") as batch:
        batch.add_column(sa.Column("target_id", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("target_name", sa.String(length=64), nullable=True))
    op.drop_index("uq_incidents_open", table_name="incidents")
    op.create_index(
        "uq_incidents_open",
        "incidents",
        ["job_id", "cause"],
        unique=True,
        sqlite_where=sa.text(_JOB_WHERE),
        postgresql_where=sa.text(_JOB_WHERE),
    )
    op.create_index(
        "uq_incidents_open_host",
        "incidents",
        ["target_id"],
        unique=True,
        sqlite_where=sa.text(_HOST_WHERE),
        postgresql_where=sa.text(_HOST_WHERE),
    )


def downgrade() -> None:
    op.execute("DELETE FROM incidents WHERE target_id IS NOT NULL")
    op.drop_index("uq_incidents_open_host", table_name="incidents")
    op.drop_index("uq_incidents_open", table_name="incidents")
    op.create_index(
        "uq_incidents_open",
        "incidents",
        ["job_id", "cause"],
        unique=True,
        sqlite_where=sa.text("status = 'open'"),
        postgresql_where=sa.text("status = 'open'"),
    )
    with op.batch_alter_table("incidents") as batch:
        batch.drop_column("target_name")
        batch.drop_column("target_id")
    op.drop_index("ix_targets_down", table_name="targets")
    with op.batch_alter_table("targets", table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.drop_column("reach_error")
        batch.drop_column("reach_since")
        batch.drop_column("reach_at")
        batch.drop_column("reach")
