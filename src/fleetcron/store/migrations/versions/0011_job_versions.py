"""job_versions: every version of a job's definition; jobs.version, runs.job_version

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01

Each existing job gets version 1 with its current definition (source ``migration``), so
the history of a job starts at the state it had when this version was installed. The
definition is built here from the columns as they are at this revision, so later changes
to the code do not change what this migration did.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

#: Job columns that are not part of its definition (identity, bookkeeping).
NOT_DEFINITION = {
    "id",
    "target_id",
    "version",
    "created_by",
    "updated_by",
    "created_at",
    "updated_at",
}


def upgrade() -> None:
    op.create_table(
        "job_versions",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("job_name", sa.String(length=64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("definition", sa.JSON(), nullable=False),
        sa.Column("changed", sa.JSON(), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("actor", sa.String(length=64), nullable=False),
        sa.Column("at", sa.DateTime(), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_versions")),
        sa.UniqueConstraint("job_id", "version", name="uq_job_versions_job_version"),
    )
    with op.batch_alter_table("job_versions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_job_versions_job_name"), ["job_name"], unique=False)
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("version", sa.Integer(), server_default="0", nullable=False))
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("job_version", sa.Integer(), nullable=True))
    _first_versions()


def _first_versions() -> None:
    bind = op.get_bind()
    meta = sa.MetaData()
    jobs = sa.Table("jobs", meta, autoload_with=bind)
    targets = sa.Table("targets", meta, autoload_with=bind)
    versions = sa.Table("job_versions", meta, autoload_with=bind)
    names = dict(bind.execute(sa.select(targets.c.id, targets.c.name)).all())
    rows: list[dict[str, Any]] = []
    for job in bind.execute(sa.select(jobs)).mappings():
        definition = {k: v for k, v in job.items() if k not in NOT_DEFINITION}
        definition["target"] = names.get(job["target_id"]) if job["target_id"] else None
        rows.append(
            {
                "job_id": job["id"],
                "job_name": job["name"],
                "version": 1,
                "definition": definition,
                "changed": sorted(definition),
                "source": "migration",
                "actor": job["updated_by"],
                "at": job["updated_at"],
                "summary": "the definition when version history began",
            }
        )
    if rows:
        bind.execute(versions.insert(), rows)
        bind.execute(sa.update(jobs).values(version=1))


def downgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("job_version")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("version")
    with op.batch_alter_table("job_versions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_job_versions_job_name"))
    op.drop_table("job_versions")
