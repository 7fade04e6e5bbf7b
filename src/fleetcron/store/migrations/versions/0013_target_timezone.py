"""each target's own time zone, and who set it (detected at pairing, or an operator)

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01

``timezone``: the target's IANA zone (empty when unknown: jobs in the ``target`` zone then
use the default zone of new jobs there). ``timezone_source``: ``detected`` (read over SSH at
pairing, or the scheduler host's for a local target) or ``operator`` (given with
``--timezone``; a later detection does not overwrite it).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("targets", schema=None) as batch_op:
        batch_op.add_column(sa.Column("timezone", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("timezone_source", sa.String(length=16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("targets", schema=None) as batch_op:
        batch_op.drop_column("timezone_source")
        batch_op.drop_column("timezone")
