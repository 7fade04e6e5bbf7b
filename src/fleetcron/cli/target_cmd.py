"""`fleetcron target ...`: add, pair, list, show, label, unpair, remove targets."""

from __future__ import annotations

from pathlib import Path

import click

from fleetcron.cli.context import acting, as_user_option, opened_app
from fleetcron.cli.output import print_json, print_table
from fleetcron.errors import InvalidInput
from fleetcron.executors.hostkeys import fingerprint
from fleetcron.services import targets as svc
from fleetcron.services.targets import PairResult
from fleetcron.store.schema import Target

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")


def target_dict(target: Target) -> dict[str, object]:
    """A target as shown to users: never its private key."""
    return {
        "id": target.id,
        "name": target.name,
        "kind": target.kind,
        "host": target.host,
        "port": target.port,
        "user": target.user,
        "host_key": target.host_key,
        "host_key_fingerprint": fingerprint(target.host_key) if target.host_key else None,
        "labels": target.labels,
        "notes": target.notes,
        "paired": target.paired,
        "paired_at": target.paired_at,
        "unpaired_at": target.unpaired_at,
        "created_at": target.created_at,
    }


@click.group()
def target() -> None:
    """Servers jobs run on."""


def _read_key(path: str | None) -> bytes | None:
    if path is None:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise InvalidInput(
            f"key: cannot read {path}: {exc.strerror}",
            field="key",
            value=path,
            allowed="a readable OpenSSH private key file",
        ) from None


def _say_paired(result: PairResult) -> None:
    t = result.target
    if result.host_key_fingerprint:
        how = "trusted on first use" if result.trusted_on_first_use else "pinned"
        click.echo(f"host key {result.host_key_fingerprint} ({how})")
    click.echo(f"target {t.name} paired; {len(result.extended_jobs)} bulk job(s) extended to it")


@target.command("add")
@click.argument("name")
@click.option("--local", is_flag=True, help="The scheduler's own host.")
@click.option("--host", help="SSH host name or address.")
@click.option("--port", type=int, default=22, show_default=True)
@click.option("--user", help="SSH user.")
@click.option(
    "--key",
    "key_file",
    type=click.Path(dir_okay=False),
    help="Private key file (encrypted at rest).",
)
@click.option("--host-key", help='Pinned host key, e.g. "ssh-ed25519 AAAA...".')
@click.option("--trust-on-first-use", is_flag=True, help="Pin the host key the server offers now.")
@click.option("--label", "labels", multiple=True, metavar="K=V", help="Label (repeatable).")
@click.option("--notes", default="")
@click.option(
    "--no-verify", is_flag=True, help="Store without connecting; the target stays unpaired."
)
@as_user_option
def add(
    name: str,
    local: bool,
    host: str | None,
    port: int,
    user: str | None,
    key_file: str | None,
    host_key: str | None,
    trust_on_first_use: bool,
    labels: tuple[str, ...],
    notes: str,
    no_verify: bool,
    as_user: str | None,
) -> None:
    """Add a target and pair it (unless --no-verify)."""
    with opened_app() as app:
        result = svc.add_target(
            app,
            acting(app, as_user),
            name,
            local=local,
            host=host,
            port=port,
            user=user,
            private_key=_read_key(key_file),
            host_key=host_key,
            trust_on_first_use=trust_on_first_use,
            labels=labels,
            notes=notes,
            verify=not no_verify,
        )
    if no_verify:
        click.echo(f"target {name} added, not paired (run `fleetcron target pair {name}`)")
    else:
        _say_paired(result)


@target.command("pair")
@click.argument("name")
@click.option("--host-key", help="Pin this host key.")
@click.option("--trust-on-first-use", is_flag=True, help="Pin the host key the server offers now.")
@as_user_option
def pair(name: str, host_key: str | None, trust_on_first_use: bool, as_user: str | None) -> None:
    """Verify a target over SSH and mark it paired; bulk jobs extend to it."""
    with opened_app() as app:
        result = svc.pair_target(
            app,
            acting(app, as_user),
            name,
            host_key=host_key,
            trust_on_first_use=trust_on_first_use,
        )
    _say_paired(result)


@target.command("list")
@json_option
@as_user_option
def list_(as_json: bool, as_user: str | None) -> None:
    """List targets."""
    with opened_app() as app:
        rows = svc.list_targets(app, acting(app, as_user))
    if as_json:
        print_json([target_dict(t) for t in rows])
        return
    if not rows:
        click.echo(
            "no targets yet; add one with `fleetcron target add NAME --host H --user U --key FILE`"
        )
        return
    print_table(
        None,
        ["name", "kind", "address", "paired", "labels"],
        [
            (
                t.name,
                t.kind,
                f"{t.user}@{t.host}:{t.port}" if t.kind == "ssh" else "-",
                "yes" if t.paired else "no",
                ",".join(f"{k}={v}" for k, v in sorted(t.labels.items())),
            )
            for t in rows
        ],
    )


@target.command("show")
@click.argument("name")
@json_option
@as_user_option
def show(name: str, as_json: bool, as_user: str | None) -> None:
    """Show one target and the jobs assigned to it."""
    with opened_app() as app:
        the_target, assignments = svc.show_target(app, acting(app, as_user), name)
    jobs = [
        {
            "job": a.job.name,
            "origin": a.job.origin,
            "enabled": a.enabled,
            "next_fire_at": a.next_fire_at,
            "last_fire_at": a.last_fire_at,
        }
        for a in assignments
    ]
    data = {**target_dict(the_target), "assignments": jobs}
    if as_json:
        print_json(data)
        return
    for key in (
        "name",
        "kind",
        "host",
        "port",
        "user",
        "host_key_fingerprint",
        "paired",
        "paired_at",
        "notes",
    ):
        click.echo(f"{key + ':':22}{'' if data[key] is None else data[key]}")
    click.echo(
        f"{'labels:':22}{','.join(f'{k}={v}' for k, v in sorted(the_target.labels.items()))}"
    )
    print_table(
        "jobs",
        ["job", "origin", "enabled", "next fire"],
        [(j["job"], j["origin"], "yes" if j["enabled"] else "no", j["next_fire_at"]) for j in jobs],
    )


@target.command("label")
@click.argument("name")
@click.argument("labels", nargs=-1, required=True, metavar="K=V...")
@as_user_option
def label(name: str, labels: tuple[str, ...], as_user: str | None) -> None:
    """Set labels (K=V) or remove them (K=)."""
    with opened_app() as app:
        result = svc.label_target(app, acting(app, as_user), name, labels)
    shown = ",".join(f"{k}={v}" for k, v in sorted(result.labels.items())) or "(none)"
    click.echo(f"target {name} labels: {shown}")


@target.command("unpair")
@click.argument("name")
@as_user_option
def unpair(name: str, as_user: str | None) -> None:
    """Stop all work on a target (its run history stays)."""
    with opened_app() as app:
        removed = svc.unpair_target(app, acting(app, as_user), name)
    click.echo(f"target {name} unpaired; {removed} assignment(s) removed")


@target.command("rm")
@click.argument("name")
@as_user_option
def rm(name: str, as_user: str | None) -> None:
    """Remove a target (its run history stays)."""
    with opened_app() as app:
        svc.remove_target(app, acting(app, as_user), name)
    click.echo(f"target {name} removed")
