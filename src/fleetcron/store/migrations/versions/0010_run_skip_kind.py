"""runs.skip_kind: why a skipped run was skipped, instead of a prefix of the reason

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01

Existing skipped runs get their kind from how their reason starts (the prefixes are
copied here, so later changes to the code do not change what this migration did).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

PREFIXES = (
    ("ownership uncertain", "ownership_uncertain"),
    ("overlap:", "overlap"),
    ("waiting for the previous owner:", "old_claim"),
    ("target paused", "target_paused"),
    ("local targets are disabled", "local_disabled"),
    ("the job or its target was removed", "removed"),
)


def upgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("skip_kind", sa.String(length=24), nullable=True))
    # substr, not LIKE: exact and case-sensitive on both databases.
    cases = " ".join(
        f"WHEN substr(reason, 1, {len(prefix)}) = '{prefix}' THEN '{kind}'"
        for prefix, kind in PREFIXES
    )
    op.execute(f"UPDATE runs SET skip_kind = CASE {cases} END WHERE status = 'skipped'")


def downgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("skip_kind")
