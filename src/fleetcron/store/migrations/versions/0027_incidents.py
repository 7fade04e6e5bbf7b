"""incidents, their targets and notices; silences; rule timers

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-05

Messages are about incidents (one cause on one job over the targets sharing it,
``core/incidents.py``) instead of one per assignment's change of state. Existing rules get
Alertmanager's default timers (group_wait 30 s, group_interval 5 min, repeat_interval 4 h),
so they keep working. Alert states are kept as they were.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("notification_rules") as batch:
        batch.add_column(sa.Column("group_wait_s", sa.Float(), server_default="30", nullable=False))
        batch.add_column(
            sa.Column("group_interval_s", sa.Float(), server_default="300", nullable=False)
        )
        batch.add_column(
            sa.Column("repeat_interval_s", sa.Float(), server_default="14400", nullable=False)
        )
    with op.batch_alter_table("notification_deliveries") as batch:
        batch.add_column(sa.Column("incident_id", sa.Integer(), nullable=True))
        batch.create_index(
            batch.f("ix_notification_deliveries_incident_id"), ["incident_id"], unique=False
        )
    op.create_table(
        "incidents",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("job_name", sa.String(length=64), nullable=False),
        sa.Column("cause", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("opened_at", sa.DateTime(), nullable=False),
        sa.Column("resolved_at", sa.DateTime(), nullable=True),
        sa.Column("previous_state", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("first_run_id", sa.BigInteger(), nullable=True),
        sa.Column("acked_at", sa.DateTime(), nullable=True),
        sa.Column("acked_by", sa.String(length=64), nullable=True),
        sa.Column("ack_note", sa.Text(), nullable=True),
        sa.Column("flapping_at", sa.DateTime(), nullable=True),
        sa.CheckConstraint("status IN ('open', 'resolved')", name=op.f("ck_incidents_status")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_incidents")),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_incidents_opened_at", "incidents", ["opened_at"], unique=False)
    op.create_index(
        "uq_incidents_open",
        "incidents",
        ["job_id", "cause"],
        unique=True,
        sqlite_where=sa.text("status = 'open'"),
        postgresql_where=sa.text("status = 'open'"),
    )
    op.create_table(
        "incident_targets",
        sa.Column("incident_id", sa.Integer(), nullable=False),
        sa.Column("assignment_id", sa.Integer(), nullable=False),
        sa.Column("target_id", sa.Integer(), nullable=False),
        sa.Column("target_name", sa.String(length=64), nullable=False),
        sa.Column("joined_at", sa.DateTime(), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(), nullable=False),
        sa.Column("recovered_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["incident_id"],
            ["incidents.id"],
            name=op.f("fk_incident_targets_incident_id_incidents"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("incident_id", "assignment_id", name=op.f("pk_incident_targets")),
    )
    op.create_table(
        "incident_notices",
        sa.Column("incident_id", sa.Integer(), nullable=False),
        sa.Column("channel_id", sa.Integer(), nullable=False),
        sa.Column("last_sent_at", sa.DateTime(), nullable=True),
        sa.Column("notified", sa.JSON(), nullable=False),
        sa.Column("messages", sa.Integer(), nullable=False),
        sa.Column("closed", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(
            ["incident_id"],
            ["incidents.id"],
            name=op.f("fk_incident_notices_incident_id_incidents"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["channel_id"],
            ["notification_channels.id"],
            name=op.f("fk_incident_notices_channel_id_notification_channels"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("incident_id", "channel_id", name=op.f("pk_incident_notices")),
    )
    op.create_table(
        "silences",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=True),
        sa.Column("job_name", sa.String(length=64), nullable=True),
        sa.Column("target_id", sa.Integer(), nullable=True),
        sa.Column("target_name", sa.String(length=64), nullable=True),
        sa.Column("selector", sa.String(length=512), nullable=True),
        sa.Column("starts_at", sa.DateTime(), nullable=False),
        sa.Column("ends_at", sa.DateTime(), nullable=False),
        sa.Column("created_by", sa.String(length=64), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("expired_by", sa.String(length=64), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_silences")),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_silences_ends_at", "silences", ["ends_at"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_silences_ends_at", table_name="silences")
    op.drop_table("silences")
    op.drop_table("incident_notices")
    op.drop_table("incident_targets")
    op.drop_index("uq_incidents_open", table_name="incidents")
    op.drop_index("ix_incidents_opened_at", table_name="incidents")
    op.drop_table("incidents")
    with op.batch_alter_table("notification_deliveries") as batch:
        batch.drop_index(batch.f("ix_notification_deliveries_incident_id"))
        batch.drop_column("incident_id")
    with op.batch_alter_table("notification_rules") as batch:
        batch.drop_column("repeat_interval_s")
        batch.drop_column("group_interval_s")
        batch.drop_column("group_wait_s")
