"""`fleetcron user ...` and `fleetcron audit list`."""

from __future__ import annotations

import click

from fleetcron.cli.context import (
    acting,
    as_user_option,
    current_project,
    opened_app,
    with_project_option,
)
from fleetcron.cli.output import ID, parse_time, print_json, print_table
from fleetcron.cli.passwords import get_password, password_file_option
from fleetcron.core.permissions import FULL_SCOPE, GLOBAL_ROLES, ROLE_RANK, SCOPES
from fleetcron.services import audit as audit_svc
from fleetcron.services.accounts import users as svc
from fleetcron.services.audit import AuditFilter, AuditView

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")


def _password(given: str | None, file: str | None = None) -> str:
    password = get_password(file=file, given=given, env="FLEETCRON_PASSWORD", field="password")
    assert password is not None
    return password


#: Kept for scripts; a password on the command line shows in `ps` to every user of the host.
legacy_password_option = click.option(
    "--password", hidden=True, help="Deprecated: the password shows in `ps`."
)


@click.group()
def user() -> None:
    """Accounts of the web UI, API and CLI."""


@user.command("add")
@click.argument("name")
@click.option(
    "--role",
    type=click.Choice(GLOBAL_ROLES),
    default="viewer",
    show_default=True,
    help="The global role; none: roles in projects only (fleetcron project grant).",
)
@password_file_option()
@legacy_password_option
@as_user_option
def add(
    name: str, role: str, password_file: str | None, password: str | None, as_user: str | None
) -> None:
    """Add a user. The password comes from --password-file, FLEETCRON_PASSWORD, or a
    prompt when run in a terminal."""
    with opened_app() as app:
        svc.add_user(app, acting(app, as_user), name, _password(password, password_file), role)
    click.echo(f"user {name} added ({role})")


@user.command("list")
@json_option
@as_user_option
def list_(as_json: bool, as_user: str | None) -> None:
    """List users."""
    with opened_app() as app:
        users = svc.list_users(app, acting(app, as_user))
    if as_json:
        print_json([{"name": u.name, "role": u.role, "created_at": u.created_at} for u in users])
        return
    print_table(None, ["name", "role", "created"], [(u.name, u.role, u.created_at) for u in users])


@user.command("passwd")
@click.argument("name")
@password_file_option()
@legacy_password_option
@click.option("--revoke-tokens", is_flag=True, help="Also revoke the user's API tokens.")
@as_user_option
def passwd(
    name: str,
    password_file: str | None,
    password: str | None,
    revoke_tokens: bool,
    as_user: str | None,
) -> None:
    """Set a user's password (from --password-file, FLEETCRON_PASSWORD, or a prompt).
    The user's browser sessions end."""
    with opened_app() as app:
        done = svc.set_password(
            app,
            acting(app, as_user),
            name,
            _password(password, password_file),
            revoke_tokens=revoke_tokens,
        )
    click.echo(f"password of {name} changed")
    if done.sessions_ended or done.tokens_revoked:
        click.echo(
            f"ended {done.sessions_ended} web session(s), revoked {done.tokens_revoked} token(s)"
        )


@user.command("recover-admin")
@click.argument("name")
@password_file_option()
@click.option(
    "--set-password", is_flag=True, help="Also set a new password (asked, or --password-file)."
)
def recover_admin(name: str, password_file: str | None, set_password: bool) -> None:
    """Make NAME an admin again, or create it as one: for the local root when no admin
    can log in. Works on the database directly and is audited as local-root."""
    with opened_app() as app:
        password = None
        exists = name in {u.name for u in svc.list_users(app, svc.LOCAL_ROOT)}
        if set_password or password_file is not None or not exists:
            password = get_password(
                file=password_file, given=None, env="FLEETCRON_PASSWORD", field="password"
            )
        view = svc.recover_admin(app, name, password)
    click.echo(f"user {view.name} is an admin" + (" (created)" if not exists else ""))


@user.command("role")
@click.argument("name")
@click.argument("role", type=click.Choice(GLOBAL_ROLES))
@as_user_option
def role(name: str, role: str, as_user: str | None) -> None:
    """Change a user's role."""
    with opened_app() as app:
        svc.set_role(app, acting(app, as_user), name, role)
    click.echo(f"user {name} is now {role}")


@user.command("rm")
@click.argument("name")
@as_user_option
def rm(name: str, as_user: str | None) -> None:
    """Remove a user and their API tokens."""
    with opened_app() as app:
        svc.remove_user(app, acting(app, as_user), name)
    click.echo(f"user {name} removed")


@click.group()
def audit() -> None:
    """The audit log of every operator action."""


@audit.command("list")
@click.option("--actor", help="Only this actor.")
@click.option("--action", help="Only actions starting with this (e.g. job. or job.add).")
@click.option("--target", help="Only events about this target.")
@click.option("--since", help="Only events at or after this ISO-8601 time.")
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True)
@json_option
@as_user_option
def audit_list(
    actor: str | None,
    action: str | None,
    target: str | None,
    since: str | None,
    limit: int,
    as_json: bool,
    as_user: str | None,
) -> None:
    """List audit events, newest first."""
    with opened_app() as app:
        events, _ = audit_svc.list_event_views(
            app,
            acting(app, as_user),
            AuditFilter(
                actor=actor,
                action=action,
                target=target,
                since=parse_time(since, "since"),
                project=current_project(),
            ),
            limit=limit,
        )
    if as_json:
        print_json([_event_dict(e) for e in events])
        return
    print_table(
        None,
        ["at", "actor", "action", "ok", "project", "job", "target", "detail"],
        [
            (
                e.at,
                e.actor,
                e.action,
                "yes" if e.success else "NO",
                e.project or "-",
                e.job_name,
                e.target_name,
                ", ".join(f"{k}={v}" for k, v in e.detail.items()),
            )
            for e in events
        ],
    )


def _event_dict(event: AuditView) -> dict[str, object]:
    return {
        "id": event.id,
        "at": event.at,
        "actor": event.actor,
        "action": event.action,
        "success": event.success,
        "project": event.project,
        "job": event.job_name,
        "target": event.target_name,
        "detail": event.detail,
    }


#: where ``token create --role`` leaves its value
TOKEN_ROLE_META = "fleetcron.token_role"


@click.group()
def token() -> None:
    """API tokens (bearer tokens for scripts)."""


@token.command("create")
@click.argument("name")
@click.option("--user", "owner", help="For this user (admins only; default: yourself).")
@click.option(
    "--expires-in-days",
    type=int,
    default=None,
    help=f"Refuse the token after this many days (1 to {svc.MAX_TOKEN_DAYS}); default: never.",
)
@click.option(
    "--scope",
    type=click.Choice(SCOPES),
    default=FULL_SCOPE,
    show_default=True,
    help="read: read only; run: read, run and stop jobs; write: all the owner's role allows.",
)
@click.option(
    "--role",
    type=click.Choice(tuple(ROLE_RANK)),
    expose_value=False,
    callback=lambda ctx, _p, value: ctx.meta.__setitem__(TOKEN_ROLE_META, value),
    help="Lower the token's role (never above its owner's); with --project: in that "
    "project, the only one the token then acts in.",
)
@json_option
@as_user_option
def token_create(
    name: str,
    owner: str | None,
    expires_in_days: int | None,
    scope: str,
    as_json: bool,
    as_user: str | None,
) -> None:
    """Create a token; it is shown only now. With --project it acts in that project only."""
    with opened_app() as app:
        actor = acting(app, as_user)
        secret, token_id = svc.create_token(
            app,
            actor,
            owner or actor.name,
            name,
            expires_in_days=expires_in_days,
            scope=scope,
            project=current_project(),
            role=click.get_current_context().meta.get(TOKEN_ROLE_META),
        )
    if as_json:
        print_json({"id": token_id, "token": secret})
    else:
        click.echo(f"token {token_id} created; copy it now, it is not shown again:\n{secret}")


@token.command("list")
@click.option("--user", "owner", help="Tokens of this user (admins only; default: yourself).")
@json_option
@as_user_option
def token_list(owner: str | None, as_json: bool, as_user: str | None) -> None:
    """List tokens: name, prefix, created, last used, revoked."""
    with opened_app() as app:
        actor = acting(app, as_user)
        rows = svc.list_tokens(app, actor, owner or actor.name)
    data = [
        {
            "id": t.id,
            "name": t.name,
            "prefix": t.prefix,
            "created_at": t.created_at,
            "last_used_at": t.last_used_at,
            "revoked_at": t.revoked_at,
            "expires_at": t.expires_at,
            "scope": t.scope,
        }
        for t in rows
    ]
    if as_json:
        print_json(data)
        return
    print_table(
        None,
        ["id", "name", "scope", "prefix", "created", "last used", "expires", "revoked"],
        [
            (
                d["id"],
                d["name"],
                d["scope"],
                d["prefix"],
                d["created_at"],
                d["last_used_at"],
                d["expires_at"],
                d["revoked_at"],
            )
            for d in data
        ],
    )


@token.command("revoke")
@click.argument("token_id", type=ID)
@as_user_option
def token_revoke(token_id: int, as_user: str | None) -> None:
    """Revoke a token at once."""
    with opened_app() as app:
        svc.revoke_token(app, acting(app, as_user), token_id)
    click.echo(f"token {token_id} revoked")


with_project_option(token_create)
