"""api tokens: a scope (read, run, write)

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-04

A token's scope narrows what it may do within its owner's role (core/permissions.py).
Tokens made before scopes existed could do everything their owner could: they become
``write``, which keeps them working as before.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("scope", sa.String(length=8), nullable=False, server_default="write")
        )


def downgrade() -> None:
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.drop_column("scope")
