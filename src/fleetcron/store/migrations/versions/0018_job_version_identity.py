"""job_versions.job_created_at: a version belongs to one job, even when a later job gets
the same id

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-01

SQLite gives a new row the largest id plus one, so a job added after the newest job was
removed gets the removed job's id. Versions are therefore keyed by the job's id *and* its
creation time (unique with the version number). Existing versions take the creation time
of the job that has their id now, or, for a removed job, the time of their first version.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("job_versions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("job_created_at", sa.DateTime(), nullable=True))
    op.execute(
        "UPDATE job_versions SET job_created_at = (SELECT jobs.created_at FROM jobs"
        " WHERE jobs.id = job_versions.job_id AND jobs.name = job_versions.job_name)"
    )
    op.execute(
        "UPDATE job_versions SET job_created_at = (SELECT min(v.at) FROM job_versions v"
        " WHERE v.job_id = job_versions.job_id AND v.job_name = job_versions.job_name)"
        " WHERE job_created_at IS NULL"
    )
    with op.batch_alter_table("job_versions", schema=None) as batch_op:
        batch_op.alter_column("job_created_at", existing_type=sa.DateTime(), nullable=False)
        batch_op.drop_constraint("uq_job_versions_job_version", type_="unique")
        batch_op.create_unique_constraint(
            "uq_job_versions_job_id", ["job_id", "job_created_at", "version"]
        )


def downgrade() -> None:
    with op.batch_alter_table("job_versions", schema=None) as batch_op:
        batch_op.drop_constraint("uq_job_versions_job_id", type_="unique")
        batch_op.create_unique_constraint("uq_job_versions_job_version", ["job_id", "version"])
        batch_op.drop_column("job_created_at")
