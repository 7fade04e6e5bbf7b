"""incident projects: the project an incident belongs to

Revision ID: 0038
Revises: 0037
Create Date: 2026-12-06

An incident of a job belongs to the job's project, a host incident (``unreachable``) to
its target's; the rules and silences of that project alone are asked about it. A plain
column with an index (no foreign key: an incident is history, with plain copies of its
job's and target's ids and names), filled from the jobs and targets still present; an
incident of one removed stays in ``default`` (1).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0038"
down_revision = "0037"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "incidents",
        sa.Column("project_id", sa.Integer(), nullable=False, server_default=sa.text("1")),
    )
    op.create_index(op.f("ix_incidents_project_id"), "incidents", ["project_id"], unique=False)
    bind = op.get_bind()
    bind.execute(
        sa.text(
            "UPDATE incidents SET project_id = (SELECT jobs.project_id FROM jobs "
            "WHERE jobs.id = incidents.job_id) WHERE target_id IS NULL "
            "AND EXISTS (SELECT 1 FROM jobs WHERE jobs.id = incidents.job_id)"
        )
    )
    bind.execute(
        sa.text(
            "UPDATE incidents SET project_id = (SELECT targets.project_id FROM targets "
            "WHERE targets.id = incidents.target_id) WHERE target_id IS NOT NULL "
            "AND EXISTS (SELECT 1 FROM targets WHERE targets.id = incidents.target_id)"
        )
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_incidents_project_id"), table_name="incidents")
    with op.batch_alter_table("incidents") as batch:
        batch.drop_column("project_id")
