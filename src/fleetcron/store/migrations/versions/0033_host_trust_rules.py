"""host trust by label: a host CA attached to a label selector

Revision ID: 0033
Revises: 0032
Create Date: 2026-12-06

``host_trust_rules`` holds a host CA (its CA key lines and ``@revoked`` lines, as
``targets.host_ca``) for the SSH targets and jump hosts whose labels match a selector.
``targets.host_ca_rule_id`` names the rule a target's ``host_ca`` came from (empty: the
target's own CA, which wins over a label's, or none). Which trust applies is decided in
``core/host_trust.py`` and written by ``services/targets/trust_rules.py``; the connection
paths read ``targets.host_ca`` as before. Columns are added without a table rebuild, so
the ids' sequences are untouched.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0033"
down_revision = "0032"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "host_trust_rules",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("selector", sa.String(length=512), nullable=False),
        sa.Column("host_ca", sa.Text(), nullable=False),
        sa.Column("created_by", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_host_trust_rules")),
        sa.UniqueConstraint("selector", name=op.f("uq_host_trust_rules_selector")),
        sqlite_autoincrement=True,
    )
    op.add_column("targets", sa.Column("host_ca_rule_id", sa.Integer(), nullable=True))


def downgrade() -> None:
    op.drop_column("targets", "host_ca_rule_id")
    op.drop_table("host_trust_rules")
