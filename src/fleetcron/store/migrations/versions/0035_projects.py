"""projects: what each team owns, roles per project, targets shared between projects

Revision ID: 0035
Revises: 0034
Create Date: 2026-12-06

``projects`` holds the projects, starting with ``default``. Jobs, targets, notification
rules, silences and blackout windows belong to exactly one project (``project_id``); every
existing row lands in ``default``, so a single team sees nothing change. Job and target
names are unique per project instead of over the whole install. ``target_shares`` lists
the projects a target is shared into (by an admin); ``project_roles`` gives a user a role
in one project. ``users.role`` stays the global role (``none``: roles in projects only), so
every existing user keeps exactly the rights it had. An API token may be narrowed to one
project (``api_tokens.project_id``) and to a role below its owner's (``api_tokens.role``).
Calendars, notification channels and host trust rules stay install-wide.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0035"
down_revision = "0034"
branch_labels = None
depends_on = None

#: the tables whose rows belong to a project, and whether names are unique per project
OWNED = {
    "jobs": True,
    "targets": True,
    "notification_rules": False,
    "silences": False,
    "blackouts": False,
}
OLD_ROLES = "role IN ('viewer', 'operator', 'admin')"
NEW_ROLES = "role IN ('none', 'viewer', 'operator', 'admin')"


@contextmanager
def _sequence_kept(table: str) -> Iterator[None]:
    """On SQLite a batch rebuild copies the rows into a new table, whose id sequence
    starts from the largest id left: the ids of removed rows would be given again
    (migration 0020 forbids it). The sequence is put back where it was."""
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        yield
        return
    query = sa.text("SELECT seq FROM sqlite_sequence WHERE name = :t")
    seq = bind.execute(query, {"t": table}).scalar()
    yield
    if seq is None:
        return
    now = bind.execute(query, {"t": table}).scalar()
    if now is None:
        bind.execute(
            sa.text("INSERT INTO sqlite_sequence (name, seq) VALUES (:t, :n)"),
            {"t": table, "n": seq},
        )
    elif now < seq:
        bind.execute(
            sa.text("UPDATE sqlite_sequence SET seq = :n WHERE name = :t"), {"t": table, "n": seq}
        )


def _rebuilt(table: str) -> Any:
    """The table altered in batch mode; on SQLite a rebuild that keeps ``AUTOINCREMENT``
    (migration 0020: ids of removed rows are never reused)."""
    return op.batch_alter_table(table, table_kwargs={"sqlite_autoincrement": True})


def _create_tables() -> None:
    op.create_table(
        "projects",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("created_by", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_projects")),
        sa.UniqueConstraint("name", name=op.f("uq_projects_name")),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "project_roles",
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("project_id", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.CheckConstraint(OLD_ROLES, name=op.f("ck_project_roles_role")),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_project_roles_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_project_roles_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("user_id", "project_id", name=op.f("pk_project_roles")),
    )
    op.create_table(
        "target_shares",
        sa.Column("target_id", sa.Integer(), nullable=False),
        sa.Column("project_id", sa.Integer(), nullable=False),
        sa.Column("shared_by", sa.String(length=64), nullable=False),
        sa.Column("shared_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["target_id"],
            ["targets.id"],
            name=op.f("fk_target_shares_target_id_targets"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_target_shares_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("target_id", "project_id", name=op.f("pk_target_shares")),
    )
    op.create_index(
        op.f("ix_target_shares_project_id"), "target_shares", ["project_id"], unique=False
    )


def _default_project() -> int:
    bind = op.get_bind()
    bind.execute(
        sa.text(
            "INSERT INTO projects (name, description, created_by, created_at) "
            "VALUES ('default', 'The project every object of an install starts in.', "
            "'system', CURRENT_TIMESTAMP)"
        )
    )
    found = bind.execute(sa.text("SELECT id FROM projects WHERE name = 'default'")).scalar()
    assert isinstance(found, int)
    return found


def _own(table: str, *, unique_names: bool, default_id: int) -> None:
    """Give every row of ``table`` to the default project, then make the column required."""
    op.add_column(table, sa.Column("project_id", sa.Integer(), nullable=True))
    op.execute(sa.text(f"UPDATE {table} SET project_id = {int(default_id)}"))
    with _sequence_kept(table), _rebuilt(table) as batch:
        batch.alter_column("project_id", existing_type=sa.Integer(), nullable=False)
        batch.create_foreign_key(
            op.f(f"fk_{table}_project_id_projects"), "projects", ["project_id"], ["id"]
        )
        batch.create_index(op.f(f"ix_{table}_project_id"), ["project_id"], unique=False)
        if unique_names:
            batch.drop_constraint(op.f(f"uq_{table}_name"), type_="unique")
            batch.create_unique_constraint(f"uq_{table}_project_name", ["project_id", "name"])


def _disown(table: str, *, unique_names: bool) -> None:
    with _sequence_kept(table), _rebuilt(table) as batch:
        if unique_names:
            batch.drop_constraint(f"uq_{table}_project_name", type_="unique")
            batch.create_unique_constraint(op.f(f"uq_{table}_name"), ["name"])
        batch.drop_index(op.f(f"ix_{table}_project_id"))
        batch.drop_constraint(op.f(f"fk_{table}_project_id_projects"), type_="foreignkey")
        batch.drop_column("project_id")


def upgrade() -> None:
    _create_tables()
    default_id = _default_project()
    for table, unique_names in OWNED.items():
        _own(table, unique_names=unique_names, default_id=default_id)
    with _sequence_kept("api_tokens"), _rebuilt("api_tokens") as batch:
        batch.add_column(sa.Column("project_id", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("role", sa.String(length=16), nullable=True))
        batch.create_foreign_key(
            op.f("fk_api_tokens_project_id_projects"),
            "projects",
            ["project_id"],
            ["id"],
            ondelete="CASCADE",
        )
    with op.batch_alter_table("users") as batch:
        batch.drop_constraint(op.f("ck_users_role"), type_="check")
        batch.create_check_constraint("role", NEW_ROLES)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.execute(sa.text("SELECT count(*) FROM projects")).scalar() != 1:
        raise RuntimeError(
            "cannot downgrade below 0035 while projects other than 'default' exist: "
            "move their objects into 'default' and remove them first"
        )
    if bind.execute(sa.text("SELECT count(*) FROM users WHERE role = 'none'")).scalar():
        raise RuntimeError(
            "cannot downgrade below 0035 while users without a global role exist: "
            "give them one (fleetcron user edit NAME --role ROLE) or remove them first"
        )
    with op.batch_alter_table("users") as batch:
        batch.drop_constraint(op.f("ck_users_role"), type_="check")
        batch.create_check_constraint("role", OLD_ROLES)
    with _sequence_kept("api_tokens"), _rebuilt("api_tokens") as batch:
        batch.drop_constraint(op.f("fk_api_tokens_project_id_projects"), type_="foreignkey")
        batch.drop_column("role")
        batch.drop_column("project_id")
    for table, unique_names in OWNED.items():
        _disown(table, unique_names=unique_names)
    op.drop_index(op.f("ix_target_shares_project_id"), table_name="target_shares")
    op.drop_table("target_shares")
    op.drop_table("project_roles")
    op.drop_table("projects")
