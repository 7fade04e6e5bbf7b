"""execution claims may be cleared (targets verified clean, or cleaned up actively)

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

OLD = "state IN ('live', 'done', 'expired', 'revoked')"
NEW = "state IN ('live', 'done', 'expired', 'revoked', 'cleared')"


def upgrade() -> None:
    with op.batch_alter_table("execution_claims", schema=None) as batch_op:
        batch_op.drop_constraint(op.f("ck_execution_claims_state"), type_="check")
        batch_op.create_check_constraint("state", NEW)


def downgrade() -> None:
    op.execute("UPDATE execution_claims SET state = 'revoked' WHERE state = 'cleared'")
    with op.batch_alter_table("execution_claims", schema=None) as batch_op:
        batch_op.drop_constraint(op.f("ck_execution_claims_state"), type_="check")
        batch_op.create_check_constraint("state", OLD)
