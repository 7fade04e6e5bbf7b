"""jobs: who wrote the command and selector, and with which role

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-04

A job may be assigned to a local target whose commands run with the scheduler's privileges
only when the author of its command and selector held the role ``local_job_role`` names
(``services/fleet/local_gate.py``). Jobs written before this release have no author recorded:
they keep their assignments, and extend to no further such target until an admin saves
them again.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("command_by", sa.String(64), nullable=True))
        batch.add_column(sa.Column("command_role", sa.String(16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("command_role")
        batch.drop_column("command_by")
