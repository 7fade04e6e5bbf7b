"""targets: jump hosts (kind ``jump``) and the jump host a target is reached through

Revision ID: 0030
Revises: 0029
Create Date: 2026-12-06

A target of kind ``jump`` is a bastion other targets are reached through; ``via_id`` names
the jump host of a target (empty: reached directly). ``host_ca`` trusts a target's host by
a host certificate from a CA instead of a pinned key; ``client_cert_enc`` is a user
certificate for the target's key (encrypted like it) and ``client_cert_expires_at`` its
expiry. Existing targets keep being reached
directly, with their pinned keys.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0030"
down_revision = "0029"
branch_labels = None
depends_on = None

OLD = "kind IN ('ssh', 'local')"
NEW = "kind IN ('ssh', 'local', 'jump')"


@contextmanager
def _sequence_kept(table: str) -> Iterator[None]:
    """On SQLite a batch rebuild copies the rows into a new table, whose id sequence
    starts from the largest id left: the ids of removed rows would be given again
    (migration 0020 forbids it). The sequence is put back where it was."""
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        yield
        return
    seq = bind.execute(
        sa.text("SELECT seq FROM sqlite_sequence WHERE name = :t"), {"t": table}
    ).scalar()
    yield
    if seq is None:
        return
    now = bind.execute(
        sa.text("SELECT seq FROM sqlite_sequence WHERE name = :t"), {"t": table}
    ).scalar()
    if now is None:
        bind.execute(
            sa.text("INSERT INTO sqlite_sequence (name, seq) VALUES (:t, :n)"),
            {"t": table, "n": seq},
        )
    elif now < seq:
        bind.execute(
            sa.text("UPDATE sqlite_sequence SET seq = :n WHERE name = :t"), {"t": table, "n": seq}
        )


def _targets_batch() -> Any:
    """The targets table altered in batch mode; on SQLite a rebuild, which keeps its
    ``AUTOINCREMENT`` (migration 0020: ids of removed targets are never reused)."""
    return op.batch_alter_table("targets", table_kwargs={"sqlite_autoincrement": True})


def upgrade() -> None:
    with _sequence_kept("targets"), _targets_batch() as batch_op:
        batch_op.add_column(sa.Column("via_id", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("host_ca", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("client_cert_enc", sa.LargeBinary(), nullable=True))
        batch_op.add_column(sa.Column("client_cert_expires_at", sa.DateTime(), nullable=True))
        batch_op.create_foreign_key(
            op.f("fk_targets_via_id_targets"), "targets", ["via_id"], ["id"]
        )
        batch_op.create_index(op.f("ix_targets_via_id"), ["via_id"], unique=False)
        batch_op.drop_constraint(op.f("ck_targets_kind"), type_="check")
        batch_op.create_check_constraint("kind", NEW)


def downgrade() -> None:
    op.execute("UPDATE targets SET via_id = NULL")
    op.execute("DELETE FROM targets WHERE kind = 'jump'")
    with _sequence_kept("targets"), _targets_batch() as batch_op:
        batch_op.drop_constraint(op.f("ck_targets_kind"), type_="check")
        batch_op.create_check_constraint("kind", OLD)
        batch_op.drop_index(op.f("ix_targets_via_id"))
        batch_op.drop_constraint(op.f("fk_targets_via_id_targets"), type_="foreignkey")
        batch_op.drop_column("client_cert_expires_at")
        batch_op.drop_column("client_cert_enc")
        batch_op.drop_column("host_ca")
        batch_op.drop_column("via_id")
