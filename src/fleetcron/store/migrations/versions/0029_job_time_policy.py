"""jobs: a DST policy and how long runs are kept by outcome

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-06

``dst_gap`` and ``dst_fold`` (``cron/dst.py``) say what a time skipped or repeated by a DST
transition does; existing jobs get ``cronie``, Debian cron's rule, which every job followed
until now. ``keep_successes_days`` and ``keep_failures_days`` override the retention
settings for one job; existing jobs get 0, the settings' (unchanged behaviour).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from alembic import op

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None


@contextmanager
def _sequence_kept(table: str) -> Iterator[None]:
    """On SQLite a batch rebuild copies the rows into a new table, whose id sequence
    starts from the largest id left: the ids of removed rows would be given again
    (migration 0020 forbids it). The sequence is put back where it was."""
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        yield
        return
    seq = bind.execute(
        sa.text("SELECT seq FROM sqlite_sequence WHERE name = :t"), {"t": table}
    ).scalar()
    yield
    if seq is None:
        return
    now = bind.execute(
        sa.text("SELECT seq FROM sqlite_sequence WHERE name = :t"), {"t": table}
    ).scalar()
    if now is None:
        bind.execute(
            sa.text("INSERT INTO sqlite_sequence (name, seq) VALUES (:t, :n)"),
            {"t": table, "n": seq},
        )
    elif now < seq:
        bind.execute(
            sa.text("UPDATE sqlite_sequence SET seq = :n WHERE name = :t"), {"t": table, "n": seq}
        )


def upgrade() -> None:
    with (
        _sequence_kept("jobs"),
        op.batch_alter_table("jobs", table_kwargs={"sqlite_autoincrement": True}) as batch,
    ):
        batch.add_column(
            sa.Column("dst_gap", sa.String(length=16), server_default="cronie", nullable=False)
        )
        batch.add_column(
            sa.Column("dst_fold", sa.String(length=16), server_default="cronie", nullable=False)
        )
        batch.add_column(
            sa.Column("keep_successes_days", sa.Integer(), server_default="0", nullable=False)
        )
        batch.add_column(
            sa.Column("keep_failures_days", sa.Integer(), server_default="0", nullable=False)
        )
        batch.create_check_constraint("dst_gap", "dst_gap IN ('cronie', 'run_at_gap_end', 'skip')")
        batch.create_check_constraint("dst_fold", "dst_fold IN ('cronie', 'first', 'both', 'last')")


def downgrade() -> None:
    with (
        _sequence_kept("jobs"),
        op.batch_alter_table("jobs", table_kwargs={"sqlite_autoincrement": True}) as batch,
    ):
        batch.drop_constraint(op.f("ck_jobs_dst_fold"), type_="check")
        batch.drop_constraint(op.f("ck_jobs_dst_gap"), type_="check")
        batch.drop_column("keep_failures_days")
        batch.drop_column("keep_successes_days")
        batch.drop_column("dst_fold")
        batch.drop_column("dst_gap")
