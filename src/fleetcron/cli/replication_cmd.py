"""`fleetcron cluster replication ...`: the replicated pair's logical replication."""

from __future__ import annotations

from dataclasses import asdict

import click

from fleetcron.cli.context import acting, as_user_option, opened_app
from fleetcron.cli.output import print_json, print_table
from fleetcron.services import replication as svc

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")


@click.group()
def replication() -> None:
    """The replicated pair: each node on its own PostgreSQL, kept in sync both ways."""


@replication.command("setup")
@click.option(
    "--peer-database-url",
    required=True,
    help="The peer's database as this machine reaches it (an admin connection), e.g. "
    "postgresql+psycopg://fleetcron@10.0.0.6/fleetcron.",
)
@click.option(
    "--peer-conninfo",
    help="libpq string for this node's PostgreSQL server to reach the peer's "
    "(default: FLEETCRON_REPLICATION_PEER_DSN, else from --peer-database-url).",
)
@click.option(
    "--this-conninfo",
    help="libpq string for the peer's PostgreSQL server to reach this one "
    "(default: from this node's FLEETCRON_DATABASE_URL).",
)
@json_option
@as_user_option
def setup(
    peer_database_url: str,
    peer_conninfo: str | None,
    this_conninfo: str | None,
    as_json: bool,
    as_user: str | None,
) -> None:
    """Publish, node-scope the ids and subscribe both ways (run once, on the node whose
    database holds the data; the peer's database must be migrated and empty)."""
    with opened_app() as app:
        result = svc.setup(
            app,
            acting(app, as_user),
            peer_database_url,
            peer_conninfo=peer_conninfo,
            this_conninfo=this_conninfo,
        )
    if as_json:
        print_json({**asdict(result), "changed": result.changed})
        return
    for side in (result.this, result.peer):
        made = "created" if side.subscription_created else "already there"
        click.echo(
            f"{side.side} (cluster {side.system_identifier}): publication "
            f"{'created' if side.publication_created else 'already there'}; subscription "
            f"{side.subscription} {made}{' (copies the data)' if side.copy_data else ''}"
        )
        if side.tables_added:
            click.echo(f"  tables added to its publication: {', '.join(side.tables_added)}")
    click.echo(f"{len(result.tables)} tables replicated both ways; ids odd here, even there")
    if not result.changed:
        click.echo("nothing to change: replication was already set up")


@replication.command("status")
@json_option
@as_user_option
def status(as_json: bool, as_user: str | None) -> None:
    """Subscriptions, slots, lag and errors on this node (exit 1 when unhealthy)."""
    with opened_app() as app:
        result = svc.status(app, acting(app, as_user))
    if as_json:
        print_json({**asdict(result), "healthy": result.healthy})
    else:
        if result.topology != "replicated-pair":
            click.echo(f"topology {result.topology}: no replication to report")
            return
        print_table(
            "subscriptions (from the peer)",
            ["name", "enabled", "worker", "last message", "apply errors", "conflicts"],
            [
                (
                    s["name"],
                    "yes" if s["enabled"] else "no",
                    "running" if s["worker_running"] else "not running",
                    "never"
                    if s["last_message_age_s"] is None
                    else f"{s['last_message_age_s']:.1f} s ago",
                    s["apply_errors"] + s["sync_errors"],
                    sum(s["conflicts"].values()),
                )
                for s in result.subscriptions
            ],
        )
        print_table(
            "slots (the peer reads them)",
            ["slot", "active", "lag bytes", "replay lag"],
            [
                (
                    s["name"],
                    "yes" if s["active"] else "no",
                    "?" if s["lag_bytes"] is None else s["lag_bytes"],
                    "?" if s["replay_lag_s"] is None else f"{s['replay_lag_s']:.2f} s",
                )
                for s in result.slots
            ],
        )
        click.echo("healthy" if result.healthy else "UNHEALTHY:")
        for problem in result.problems:
            click.echo(f"- {problem}")
    if not result.healthy:
        raise SystemExit(1)
