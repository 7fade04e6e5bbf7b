"""single sign-on: accounts from an identity provider, log-ins under way

Revision ID: 0034
Revises: 0033
Create Date: 2026-12-06

A user may come from an identity provider (``users.identity_provider``, ``users.subject``:
an OIDC issuer and its ``sub``, or an LDAP server and the entry's DN), unique together;
existing users are local (both NULL). ``sso_logins`` holds each OIDC log-in sent to the
provider and not yet back (state hash, nonce, PKCE verifier), deleted when it returns.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0034"
down_revision = "0033"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("users") as batch:
        batch.add_column(sa.Column("identity_provider", sa.String(length=255), nullable=True))
        batch.add_column(sa.Column("subject", sa.String(length=255), nullable=True))
        batch.create_unique_constraint("uq_users_identity", ["identity_provider", "subject"])
    op.create_table(
        "sso_logins",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("state_hash", sa.String(length=64), nullable=False),
        sa.Column("nonce", sa.String(length=64), nullable=False),
        sa.Column("code_verifier", sa.String(length=128), nullable=False),
        sa.Column("next_path", sa.String(length=2000), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sso_logins")),
        sa.UniqueConstraint("state_hash", name=op.f("uq_sso_logins_state_hash")),
    )
    op.create_index(op.f("ix_sso_logins_expires_at"), "sso_logins", ["expires_at"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_sso_logins_expires_at"), table_name="sso_logins")
    op.drop_table("sso_logins")
    with op.batch_alter_table("users") as batch:
        batch.drop_constraint("uq_users_identity", type_="unique")
        batch.drop_column("subject")
        batch.drop_column("identity_provider")
