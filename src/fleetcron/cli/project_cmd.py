"""`fleetcron project ...`: projects, roles in them, targets shared between them."""

from __future__ import annotations

import click

from fleetcron.cli.context import acting, as_user_option, opened_app
from fleetcron.cli.output import print_json, print_table
from fleetcron.core.permissions import ROLE_RANK
from fleetcron.services.projects import admin as svc
from fleetcron.services.targets import shares

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")


@click.group()
def project() -> None:
    """Projects: what each team owns; roles in them (global admins manage them)."""


@project.command("add")
@click.argument("name")
@click.option("--description", default="", help="What the project holds.")
@as_user_option
def add(name: str, description: str, as_user: str | None) -> None:
    """Add an empty project."""
    with opened_app() as app:
        svc.add_project(app, acting(app, as_user), name, description)
    click.echo(f"project {name} added")


@project.command("list")
@json_option
@as_user_option
def list_(as_json: bool, as_user: str | None) -> None:
    """The projects you see, with your role in each."""
    with opened_app() as app:
        rows = svc.list_projects(app, acting(app, as_user))
    if as_json:
        print_json([vars(r) for r in rows])
        return
    print_table(
        None,
        ["name", "jobs", "targets", "your role", "description"],
        [(r.name, r.jobs, r.targets, r.your_role, r.description) for r in rows],
    )


@project.command("members")
@click.argument("name")
@json_option
@as_user_option
def members(name: str, as_json: bool, as_user: str | None) -> None:
    """Who has a role in project NAME (beside the global roles)."""
    with opened_app() as app:
        rows = svc.members(app, acting(app, as_user), name)
    if as_json:
        print_json([vars(r) for r in rows])
        return
    print_table(None, ["user", "role", "source"], [(r.user, r.role, r.source) for r in rows])


@project.command("grant")
@click.argument("name")
@click.argument("user")
@click.argument("role", type=click.Choice(tuple(ROLE_RANK)))
@as_user_option
def grant(name: str, user: str, role: str, as_user: str | None) -> None:
    """Give USER the ROLE in project NAME."""
    with opened_app() as app:
        svc.grant(app, acting(app, as_user), name, user, role)
    click.echo(f"{user} is {role} in project {name}")


@project.command("revoke")
@click.argument("name")
@click.argument("user")
@as_user_option
def revoke(name: str, user: str, as_user: str | None) -> None:
    """Take USER's role in project NAME away (its global role stays)."""
    with opened_app() as app:
        svc.revoke(app, acting(app, as_user), name, user)
    click.echo(f"{user} has no role in project {name} any more")


@project.command("share")
@click.argument("target")
@click.option("--into", required=True, metavar="PROJECT", help="The project to share it into.")
@as_user_option
def share(target: str, into: str, as_user: str | None) -> None:
    """Share TARGET (of the project --project names) into another project."""
    with opened_app() as app:
        extended = shares.share_target(app, acting(app, as_user), target, into)
    click.echo(f"target {target} shared into project {into}; jobs extended: {len(extended)}")


@project.command("unshare")
@click.argument("target")
@click.option("--from", "out_of", required=True, metavar="PROJECT", help="The project.")
@as_user_option
def unshare(target: str, out_of: str, as_user: str | None) -> None:
    """Stop sharing TARGET into a project (its jobs there leave it)."""
    with opened_app() as app:
        gone = shares.unshare_target(app, acting(app, as_user), target, out_of)
    click.echo(f"target {target} no longer shared into {out_of}; assignments removed: {gone}")


@project.command("shares")
@click.argument("target")
@as_user_option
def shared(target: str, as_user: str | None) -> None:
    """The projects TARGET is shared into."""
    with opened_app() as app:
        names = shares.shared_into(app, acting(app, as_user), target)
    click.echo("\n".join(names) if names else f"target {target} is not shared")
