"""coordination

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "cluster_nodes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("node_id", sa.String(length=32), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("hostname", sa.String(length=255), nullable=False),
        sa.Column("version", sa.String(length=64), nullable=False),
        sa.Column("endpoint", sa.String(length=255), nullable=False),
        sa.Column("aliases", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("announced_at", sa.DateTime(), nullable=False),
        sa.Column("approved_at", sa.DateTime(), nullable=True),
        sa.Column("approved_by", sa.String(length=64), nullable=True),
        sa.Column("retired_at", sa.DateTime(), nullable=True),
        sa.Column("fenced_at", sa.DateTime(), nullable=True),
        sa.CheckConstraint(
            "state IN ('candidate', 'approved', 'retired')", name=op.f("ck_cluster_nodes_state")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_cluster_nodes")),
        sa.UniqueConstraint("node_id", name=op.f("uq_cluster_nodes_node_id")),
    )
    op.create_table(
        "cluster_nonces",
        sa.Column("nonce", sa.String(length=64), nullable=False),
        sa.Column("seen_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("nonce", name=op.f("pk_cluster_nonces")),
    )
    with op.batch_alter_table("cluster_nonces", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_cluster_nonces_seen_at"), ["seen_at"], unique=False)

    op.create_table(
        "cluster_ownership",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("owner_node_id", sa.String(length=32), nullable=True),
        sa.Column("generation", sa.BigInteger(), nullable=False),
        sa.Column("draining", sa.Boolean(), nullable=False),
        sa.Column("transfer_id", sa.Integer(), nullable=True),
        sa.Column("lease_expires_at", sa.DateTime(), nullable=True),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_cluster_ownership")),
    )
    op.create_table(
        "cluster_secrets",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("secret_enc", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("created_by", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_cluster_secrets")),
    )
    op.create_table(
        "cluster_transfers",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("idempotency_key", sa.String(length=128), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("from_node_id", sa.String(length=32), nullable=True),
        sa.Column("to_node_id", sa.String(length=32), nullable=False),
        sa.Column("requested_by", sa.String(length=64), nullable=False),
        sa.Column("requested_at", sa.DateTime(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("completed_at", sa.DateTime(), nullable=True),
        sa.Column("generation_after", sa.BigInteger(), nullable=True),
        sa.Column("note", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_cluster_transfers")),
        sa.UniqueConstraint("idempotency_key", name=op.f("uq_cluster_transfers_idempotency_key")),
    )
    op.create_table(
        "execution_claims",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("run_id", sa.BigInteger(), nullable=False),
        sa.Column("node_id", sa.String(length=32), nullable=False),
        sa.Column("generation", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("deadline_at", sa.DateTime(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("released_at", sa.DateTime(), nullable=True),
        sa.CheckConstraint(
            "state IN ('live', 'done', 'expired', 'revoked')",
            name=op.f("ck_execution_claims_state"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_execution_claims")),
    )
    with op.batch_alter_table("execution_claims", schema=None) as batch_op:
        batch_op.create_index("ix_execution_claims_live", ["state", "deadline_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_execution_claims_run_id"), ["run_id"], unique=False)

    op.create_table(
        "fenced_writes",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("at", sa.DateTime(), nullable=False),
        sa.Column("node_id", sa.String(length=32), nullable=False),
        sa.Column("run_id", sa.BigInteger(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_fenced_writes")),
    )
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("generation", sa.BigInteger(), nullable=True))
        batch_op.add_column(sa.Column("claim_id", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("claim_id")
        batch_op.drop_column("generation")

    op.drop_table("fenced_writes")
    with op.batch_alter_table("execution_claims", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_execution_claims_run_id"))
        batch_op.drop_index("ix_execution_claims_live")

    op.drop_table("execution_claims")
    op.drop_table("cluster_transfers")
    op.drop_table("cluster_secrets")
    op.drop_table("cluster_ownership")
    with op.batch_alter_table("cluster_nonces", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_cluster_nonces_seen_at"))

    op.drop_table("cluster_nonces")
    op.drop_table("cluster_nodes")
