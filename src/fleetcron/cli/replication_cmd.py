"""`fleetcron cluster replication ...`: the replicated pair's logical replication."""

from __future__ import annotations

from dataclasses import asdict

import click

from fleetcron.cli.context import acting, as_user_option, opened_app
from fleetcron.cli.output import print_json, print_table
from fleetcron.cli.passwords import get_secret, secret_file_option
from fleetcron.core.topology import Topology
from fleetcron.errors import InvalidInput
from fleetcron.masking import holds_secret
from fleetcron.services.pair import replication as svc

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")


@click.group()
def replication() -> None:
    """The replicated pair: each node on its own PostgreSQL, kept in sync both ways."""


PEER_URL_ENV = "FLEETCRON_REPLICATION_PEER_DATABASE_URL"
THIS_CONNINFO_ENV = "FLEETCRON_REPLICATION_THIS_CONNINFO"


def _connection(
    given: str | None, file: str | None, option: str, *, env: str | None, field: str
) -> str | None:
    """A connection string from its ``*-file`` option, the command line (warned about when
    it holds a password) or ``env``."""
    return get_secret(
        given=given,
        option=option,
        file=file,
        file_option=f"{option}-file",
        env=env,
        field=field,
        is_secret=holds_secret,
    )


@replication.command("setup")
@click.option(
    "--peer-database-url",
    help="The peer's database as this machine reaches it (an admin connection), e.g. "
    "postgresql+psycopg://fleetcron@10.0.0.6/fleetcron (or "
    f"{PEER_URL_ENV}). With a password in it, prefer --peer-database-url-file.",
)
@secret_file_option("--peer-database-url-file", "the peer's database URL")
@click.option(
    "--peer-conninfo",
    help="libpq string for this node's PostgreSQL server to reach the peer's "
    "(default: FLEETCRON_REPLICATION_PEER_DSN or its _FILE, else from the peer's URL).",
)
@secret_file_option("--peer-conninfo-file", "the libpq string to reach the peer")
@click.option(
    "--this-conninfo",
    help="libpq string for the peer's PostgreSQL server to reach this one "
    f"(or {THIS_CONNINFO_ENV}; default: from this node's FLEETCRON_DATABASE_URL).",
)
@secret_file_option("--this-conninfo-file", "the libpq string to reach this node")
@json_option
@as_user_option
def setup(
    peer_database_url: str | None,
    peer_database_url_file: str | None,
    peer_conninfo: str | None,
    peer_conninfo_file: str | None,
    this_conninfo: str | None,
    this_conninfo_file: str | None,
    as_json: bool,
    as_user: str | None,
) -> None:
    """Publish, node-scope the ids and subscribe both ways (run once, on the node whose
    database holds the data; the peer's database must be migrated and empty).

    A password in a connection string belongs in a file (the ``-file`` options, ``-`` for
    stdin), the environment or ~/.pgpass, not on the command line."""
    _check_one_stdin(peer_database_url_file, peer_conninfo_file, this_conninfo_file)
    peer_url = _peer_url(peer_database_url, peer_database_url_file)
    to_peer = _connection(
        peer_conninfo, peer_conninfo_file, "--peer-conninfo", env=None, field="peer_conninfo"
    )
    to_this = _connection(
        this_conninfo,
        this_conninfo_file,
        "--this-conninfo",
        env=THIS_CONNINFO_ENV,
        field="this_conninfo",
    )
    with opened_app() as app:
        result = svc.setup(
            app,
            acting(app, as_user),
            peer_url,
            peer_conninfo=to_peer,
            this_conninfo=to_this,
        )
    if as_json:
        print_json({**asdict(result), "changed": result.changed})
        return
    _print_setup(result)


def _check_one_stdin(*files: str | None) -> None:
    if [f for f in files if f].count("-") > 1:
        raise InvalidInput(
            "stdin: only one of the -file options can read stdin ('-')",
            field="stdin",
            value="-",
            allowed="one '-' and files for the others",
        )


def _peer_url(given: str | None, file: str | None) -> str:
    """The peer's database URL, from its file, the environment or the option (required)."""
    peer_url = _connection(
        given, file, "--peer-database-url", env=PEER_URL_ENV, field="peer_database_url"
    )
    if peer_url is None:
        raise InvalidInput(
            f"peer_database_url: required: use --peer-database-url-file FILE (or - for "
            f"stdin), set {PEER_URL_ENV}, or --peer-database-url without a password",
            field="peer_database_url",
            value=None,
            allowed="postgresql+psycopg://USER[:PASSWORD]@HOST[:PORT]/DATABASE",
        )
    return peer_url


def _print_setup(result: svc.SetupResult) -> None:
    """What setup made on each side, or that nothing needed to change."""
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
        if result.topology is not Topology.REPLICATED_PAIR:
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
