"""the audit log per project; roles in projects given by a directory's groups

Revision ID: 0037
Revises: 0036
Create Date: 2026-12-06

``audit_events.project_id``: the project of the object an event is about (a job, a target,
a run, a notification rule, a silence, a blackout window, a role in a project), so that a
project's admin reads that project's events; NULL for an event about the whole install.
Existing events are filled from their object where it still exists (``job_id``,
``target_id``, the run, rule, silence or blackout named in the detail, the project named by
a ``project.*`` event); the others stay NULL (install-wide: only global roles read them).
A plain column, as ``job_id``: the audit log outlives its objects. Indexed with ``at`` for
a project's newest events first.

``project_roles.source``: ``manual`` (``fleetcron project grant``) or ``sso`` (set at each
single sign-on log-in from the groups). Every existing role was granted by hand.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0037"
down_revision = "0036"
branch_labels = None
depends_on = None

SOURCES = "source IN ('manual', 'sso')"
#: (actions, detail key, the statement giving the project of the object it names by id)
BY_DETAIL = (
    (
        "%",
        "run_id",
        "SELECT j.project_id FROM runs r JOIN jobs j ON j.id = r.job_id WHERE r.id = {}",
    ),
    ("notify.rule.%", "rule", "SELECT o.project_id FROM notification_rules o WHERE o.id = {}"),
    ("silence.%", "silence", "SELECT o.project_id FROM silences o WHERE o.id = {}"),
    ("blackout.%", "blackout", "SELECT o.project_id FROM blackouts o WHERE o.id = {}"),
)


def _detail(key: str) -> str:
    """The SQL of ``detail``'s text value at ``key`` on this database."""
    if op.get_bind().dialect.name == "postgresql":
        return f"(audit_events.detail::json ->> '{key}')"
    return f"json_extract(audit_events.detail, '$.{key}')"


def _numeric(value: str) -> str:
    """Whether ``value`` (a detail's text) is a whole number, the id of a row."""
    if op.get_bind().dialect.name == "postgresql":
        return f"{value} ~ '^[0-9]+$'"
    return f"typeof({value}) = 'integer'"


def _fill(source: str, where: str) -> None:
    op.execute(
        sa.text(
            f"UPDATE audit_events SET project_id = ({source}) WHERE project_id IS NULL AND {where}"
        )
    )


def _fill_events() -> None:
    _fill("SELECT j.project_id FROM jobs j WHERE j.id = audit_events.job_id", "job_id IS NOT NULL")
    _fill(
        "SELECT t.project_id FROM targets t WHERE t.id = audit_events.target_id",
        "target_id IS NOT NULL",
    )
    for actions, key, statement in BY_DETAIL:
        value = _detail(key)
        _fill(
            statement.format(f"CAST({value} AS INTEGER)"),
            f"action LIKE '{actions}' AND {_numeric(value)}",
        )
    project = _detail("project")
    _fill(
        f"SELECT p.id FROM projects p WHERE p.name = {project}",
        "action LIKE 'project.%'",
    )


def upgrade() -> None:
    op.add_column("audit_events", sa.Column("project_id", sa.Integer(), nullable=True))
    _fill_events()
    op.create_index(
        "ix_audit_events_project_id_at", "audit_events", ["project_id", "at"], unique=False
    )
    op.add_column("project_roles", sa.Column("source", sa.String(length=8), nullable=True))
    op.execute(sa.text("UPDATE project_roles SET source = 'manual'"))
    with op.batch_alter_table("project_roles") as batch:
        batch.alter_column("source", existing_type=sa.String(length=8), nullable=False)
        batch.create_check_constraint("source", SOURCES)


def downgrade() -> None:
    with op.batch_alter_table("project_roles") as batch:
        batch.drop_constraint(op.f("ck_project_roles_source"), type_="check")
        batch.drop_column("source")
    op.drop_index("ix_audit_events_project_id_at", table_name="audit_events")
    with op.batch_alter_table("audit_events") as batch:
        batch.drop_column("project_id")
