"""`fleetcron target ...`: add, edit, pair, re-pin, pause, list, show, label, unpair and
remove targets."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import click

from fleetcron.cli.context import acting, as_user_option, opened_app
from fleetcron.cli.output import echo, print_json, print_table, read_bounded
from fleetcron.core.targets import DEFAULT_SSH_PORT, TargetKind, TargetSpec
from fleetcron.errors import Conflict, FleetcronError, HostKeyMismatch, InvalidInput
from fleetcron.executors.hostkeys import fingerprint
from fleetcron.services.targets import edit as svc
from fleetcron.services.targets import reads as target_reads
from fleetcron.services.targets.edit import TargetChanges
from fleetcron.services.targets.pairing import PairResult
from fleetcron.services.targets.views import TargetView

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
#: The largest private key file read, as the API takes (a 16384-bit RSA key is ~13 KB).
PRIVATE_KEY_MAX_BYTES = 20_000
yes_option = click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
same_host_option = click.option(
    "--allow-same-host",
    is_flag=True,
    help="Accept a second target on the same user@host:port (bulk jobs then run twice there).",
)


def target_dict(target: TargetView) -> dict[str, object]:
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
        "timezone": target.timezone,
        "timezone_source": target.timezone_source,
        "paired": target.paired,
        "paired_at": target.paired_at,
        "unpaired_at": target.unpaired_at,
        "paused": target.paused,
        "paused_reason": target.paused_reason,
        "paused_at": target.paused_at,
        "paused_by": target.paused_by,
        "created_at": target.created_at,
        "reach": target.reach.state,
        "reach_at": target.reach.at,
        "reach_since": target.reach.since,
        "reach_error": target.reach.error,
        "via": target.via,
        "host_ca": target.host_ca,
        "client_cert_expires_at": target.client_cert_expires_at,
    }


def reach_text(target: TargetView) -> str:
    """What the newest host probe found, and since when (local targets: not probed)."""
    reach = target.reach
    text = reach.words
    if reach.state is not None and reach.since is not None:
        text += f" since {reach.since:%Y-%m-%d %H:%M:%S}"
    if reach.down and reach.error:
        text += f" ({reach.error})"
    return text


def zone_text(target: TargetView, default_zone: str) -> str:
    """The target's zone and who set it, or what jobs in the ``target`` zone use there."""
    if target.timezone:
        return f"{target.timezone} ({target.timezone_source or 'operator'})"
    return f"unknown (jobs in the target zone use the default, {default_zone})"


def local_time(when: datetime | None, zone: str) -> str:
    """An instant as wall time in ``zone``, with its offset (what a target's clock shows)."""
    if when is None:
        return ""
    return when.astimezone(ZoneInfo(zone)).isoformat(sep=" ", timespec="seconds")


timezone_option = click.option(
    "--timezone",
    "timezone",
    metavar="ZONE",
    help="The server's IANA time zone, e.g. Europe/Berlin (kept over the zone detected at "
    "pairing); jobs with --timezone target fire at its local time.",
)


def state_of(target: TargetView) -> str:
    state = "paired" if target.paired else "not paired"
    if target.paused:
        state += ", paused" + (f" ({target.paused_reason})" if target.paused_reason else "")
    return state


@click.group()
def target() -> None:
    """Servers jobs run on."""


def _read_key(path: str | None) -> bytes | None:
    if path is None:
        return None
    return read_bounded(
        path,
        limit=PRIVATE_KEY_MAX_BYTES,
        field="key",
        allowed="a readable OpenSSH private key file",
    )


def _read_host_ca(path: str | None) -> str | None:
    """The host CA file's text; ``""`` (given as the path) clears the CA."""
    if path is None or path == "":
        return path
    return read_bounded(
        path,
        limit=PRIVATE_KEY_MAX_BYTES * 10,
        field="host_ca",
        allowed="a readable file of CA public key lines",
    ).decode(errors="replace")


def _read_cert(path: str | None) -> bytes | None:
    """The user certificate file's bytes; ``""`` (given as the path) removes it."""
    if path is None or path == "":
        return None if path is None else b""
    return read_bounded(
        path,
        limit=PRIVATE_KEY_MAX_BYTES,
        field="client_cert",
        allowed="a readable OpenSSH user certificate (-cert.pub) file",
    )


def cli_hint(exc: FleetcronError, name: str, command: str) -> str | None:
    """What to type next, for the target errors that have a way out."""
    if isinstance(exc, HostKeyMismatch) or svc.REPIN_ADVICE in exc.message:
        if command == "edit":
            return (
                f"give the new key with `fleetcron target edit {name} ... --host-key KEY` "
                "(or --trust-on-first-use), or re-pin it afterwards"
            )
        return (
            f"compare and pin the new key with `fleetcron target repin {name} "
            "--trust-on-first-use` (or --host-key KEY)"
        )
    if isinstance(exc, Conflict) and exc.field == "host":
        return "to add it anyway, give --allow-same-host"
    if isinstance(exc, Conflict) and exc.field == "with_jobs":
        return f"remove them with it: `fleetcron target rm {name} --with-jobs`"
    if isinstance(exc, InvalidInput) and exc.field == "host_key" and command != "repin":
        return "give --host-key KEY or --trust-on-first-use"
    if "was added but not paired" in exc.message:
        return (
            f"correct it with `fleetcron target edit {name} --host H --port P --user U "
            f"--key FILE`, then run `fleetcron target pair {name}`"
        )
    if "was not changed" in exc.message:
        return "correct the values, or save them unchecked with --no-verify (unpairs the target)"
    return None


@contextmanager
def hints(name: str, command: str) -> Iterator[None]:
    """Add the CLI's advice to a target error on its way out."""
    try:
        yield
    except FleetcronError as exc:
        hint = cli_hint(exc, name, command)
        if hint:
            exc.args = (f"{exc.message.rstrip('.')}; {hint}",)
        raise


def confirm(question: str, yes: bool) -> None:
    """Ask before a change that needs a human's yes; without a terminal, --yes is required."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise InvalidInput(
            "yes: this change needs a confirmation and there is no terminal to ask on; "
            "check the details above and give --yes",
            field="yes",
            value=None,
            allowed="--yes, or run it in a terminal",
        )
    if not click.confirm(question, default=False, err=True):
        raise click.Abort()


def _say_paired(result: PairResult, default_zone: str) -> None:
    t = result.target
    if result.host_key_fingerprint:
        how = "trusted on first use" if result.trusted_on_first_use else "pinned"
        click.echo(f"host key {result.host_key_fingerprint} ({how})")
    click.echo(f"target {t.name} paired; {len(result.extended_jobs)} job(s) extended to it")
    if result.timezone:
        click.echo(f"time zone {result.timezone} ({result.timezone_note})")
    else:
        click.echo(
            f"time zone {result.timezone_note}; jobs in the target zone use the default, "
            f"{default_zone} (set one with `fleetcron target edit {t.name} --timezone ZONE`)"
        )
    if result.kept_disabled:
        click.echo("still disabled here, as before the unpair: " + ", ".join(result.kept_disabled))


@dataclass(frozen=True)
class Connection:
    """The connection flags of ``target add`` and ``target edit``, read together."""

    host: str | None
    port: int | None
    user: str | None
    key_file: str | None
    host_key: str | None
    via: str | None
    host_ca_file: str | None
    cert_file: str | None


def _connection_flags(*, adding: bool) -> list[Callable[[Any], Any]]:
    """The click options :func:`connection_options` adds, worded for add or edit."""
    new = "" if adding else "New "
    return [
        click.option(
            "--host", help="New SSH host name or address." if new else "SSH host name or address."
        ),
        click.option(
            "--port",
            type=int,
            default=DEFAULT_SSH_PORT if adding else None,
            show_default=adding,
            help=None if adding else "New SSH port.",
        ),
        click.option("--user", help="New SSH user." if new else "SSH user."),
        click.option(
            "--key",
            "key_file",
            type=click.Path(dir_okay=False),
            help="Private key file (encrypted at rest)." if adding else "New private key file.",
        ),
        click.option(
            "--host-key",
            help='Pinned host key, e.g. "ssh-ed25519 AAAA...".'
            if adding
            else "Pin this host key instead of the current one.",
        ),
        click.option(
            "--via",
            metavar="JUMP",
            help="Reach the target through this jump host (a target of kind jump); never "
            "directly." + ("" if adding else ' "" reaches it directly again.'),
        ),
        click.option(
            "--host-ca",
            "host_ca_file",
            type=click.Path(dir_okay=False),
            help="Trust the host by a host certificate from this CA instead of pinning its "
            "key: a file with the CA's public key line(s) and optional "
            '"@revoked <key>" lines' + ("." if adding else '; "" pins a key again.'),
        ),
        click.option(
            "--cert",
            "cert_file",
            type=click.Path(dir_okay=False),
            help="OpenSSH user certificate for the key (its -cert.pub file), encrypted at rest"
            + ("." if adding else '; "" logs in with the bare key again.'),
        ),
    ]


def connection_options(*, adding: bool) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """``--host``, ``--port``, ``--user``, ``--key``, ``--host-key`` and ``--via``, handed to
    the command as one :class:`Connection` (``connection``)."""
    options = _connection_flags(adding=adding)

    def wrap(command: Callable[..., None]) -> Callable[..., None]:
        @functools.wraps(command)
        def inner(**kwargs: Any) -> None:
            fields = (
                "host",
                "port",
                "user",
                "key_file",
                "host_key",
                "via",
                "host_ca_file",
                "cert_file",
            )
            connection = Connection(*(kwargs.pop(name) for name in fields))
            command(connection=connection, **kwargs)

        for option in reversed(options):
            inner = option(inner)
        return inner

    return wrap


@target.command("add")
@click.argument("name")
@click.option(
    "--local", is_flag=True, help="The scheduler's own host (admins only; must be enabled)."
)
@click.option(
    "--jump",
    is_flag=True,
    help="A jump host (bastion) other targets are reached through with --via; runs no jobs.",
)
@connection_options(adding=True)
@click.option("--trust-on-first-use", is_flag=True, help="Pin the host key the server offers now.")
@click.option("--label", "labels", multiple=True, metavar="K=V", help="Label (repeatable).")
@click.option("--notes", default="")
@click.option(
    "--no-verify", is_flag=True, help="Store without connecting; the target stays unpaired."
)
@timezone_option
@same_host_option
@as_user_option
def add(
    name: str,
    *,
    local: bool,
    jump: bool,
    connection: Connection,
    trust_on_first_use: bool,
    labels: tuple[str, ...],
    notes: str,
    no_verify: bool,
    timezone: str | None,
    allow_same_host: bool,
    as_user: str | None,
) -> None:
    """Add a target and pair it (unless --no-verify). Pairing detects its time zone
    unless --timezone gives one. A target behind a bastion names it with --via; the
    bastion itself is added with --jump first."""
    with opened_app() as app, hints(name, "add"):
        spec = TargetSpec(
            name,
            _kind_of(local=local, jump=jump),
            host=connection.host,
            port=connection.port or DEFAULT_SSH_PORT,
            user=connection.user,
            private_key=_read_key(connection.key_file),
            host_key=connection.host_key,
            labels=labels,
            notes=notes,
            timezone=timezone,
            via=connection.via,
            host_ca=_read_host_ca(connection.host_ca_file),
            client_cert=_read_cert(connection.cert_file),
        )
        result = svc.add_target(
            app,
            acting(app, as_user),
            spec,
            verify=not no_verify,
            trust_on_first_use=trust_on_first_use,
            allow_same_host=allow_same_host,
        )
        default_zone = app.settings.timezone
    if no_verify:
        click.echo(f"target {name} added, not paired (run `fleetcron target pair {name}`)")
    else:
        _say_paired(result, default_zone)


def _kind_of(*, local: bool, jump: bool) -> TargetKind:
    if local and jump:
        raise InvalidInput(
            "kind: give --local or --jump, not both",
            field="kind",
            value="local, jump",
            allowed="--local, --jump, or neither (ssh)",
        )
    return TargetKind.LOCAL if local else TargetKind.JUMP if jump else TargetKind.SSH


@target.command("edit")
@click.argument("name")
@click.option("--kind", type=click.Choice([k.value for k in TargetKind]), help="Change the kind.")
@connection_options(adding=False)
@click.option(
    "--trust-on-first-use", is_flag=True, help="Pin the host key the (new) address offers now."
)
@click.option(
    "--label", "labels", multiple=True, metavar="K=V", help="Replace all labels (repeatable)."
)
@click.option("--clear-labels", is_flag=True, help="Remove every label.")
@click.option("--notes", help="New notes.")
@click.option(
    "--no-verify",
    is_flag=True,
    help="Save a changed connection without checking it; a paired target is unpaired.",
)
@click.option(
    "--timezone",
    "timezone",
    metavar="ZONE",
    help='The server\'s IANA time zone (kept over detection); "" clears it.',
)
@same_host_option
@as_user_option
def edit(
    name: str,
    *,
    kind: str | None,
    connection: Connection,
    trust_on_first_use: bool,
    labels: tuple[str, ...],
    clear_labels: bool,
    notes: str | None,
    no_verify: bool,
    timezone: str | None,
    allow_same_host: bool,
    as_user: str | None,
) -> None:
    """Change a target's connection, labels, notes or time zone.

    A paired SSH target whose connection changes (host, port, user, key, host key, jump
    host) is checked over SSH first; if the check fails, nothing is saved. With
    --no-verify the change is saved and the target is unpaired until
    `fleetcron target pair NAME`.
    """
    changes = _edit_changes(
        kind,
        connection,
        trust_on_first_use=trust_on_first_use,
        labels=_edited_labels(labels, clear_labels),
        notes=notes,
        timezone=timezone,
    )
    with opened_app() as app, hints(name, "edit"):
        result = svc.edit_target(
            app,
            acting(app, as_user),
            name,
            changes,
            verify=not no_verify,
            allow_same_host=allow_same_host,
        )
    _say_edited(name, result)


def _edited_labels(labels: tuple[str, ...], clear_labels: bool) -> tuple[str, ...] | None:
    """The labels an edit sets: the given ones, none (--clear-labels) or unchanged (None)."""
    if labels and clear_labels:
        raise InvalidInput(
            "labels: give --label or --clear-labels, not both",
            field="labels",
            value=list(labels),
            allowed="--label K=V (repeatable) or --clear-labels",
        )
    return () if clear_labels else (labels or None)


def _edit_changes(
    kind: str | None,
    connection: Connection,
    *,
    trust_on_first_use: bool,
    labels: tuple[str, ...] | None,
    notes: str | None,
    timezone: str | None,
) -> TargetChanges:
    return TargetChanges(
        kind=None if kind is None else TargetKind(kind),
        host=connection.host,
        port=connection.port,
        user=connection.user,
        private_key=_read_key(connection.key_file),
        host_key=connection.host_key,
        trust_on_first_use=trust_on_first_use,
        labels=labels,
        notes=notes,
        timezone=timezone,
        via=connection.via,
        host_ca=_read_host_ca(connection.host_ca_file),
        client_cert=_read_cert(connection.cert_file),
    )


def _say_edited(name: str, result: svc.EditResult) -> None:
    click.echo(f"target {name} changed: {', '.join(result.changed)}")
    if "timezone" in result.changed:
        click.echo(f"time zone: {result.target.timezone or '(none)'}")
    if result.verified:
        click.echo(f"connection checked; host key {result.host_key_fingerprint}")
    if result.timezone_note:
        click.echo(f"time zone {result.target.timezone or '(none)'}: {result.timezone_note}")
    if result.unpaired:
        click.echo(f"target {name} is unpaired until checked: run `fleetcron target pair {name}`")
    if result.extended_jobs:
        click.echo(f"{len(result.extended_jobs)} bulk job(s) now cover it")


@target.command("pair")
@click.argument("name")
@click.option("--host-key", help="Pin this host key (when none is pinned yet).")
@click.option("--trust-on-first-use", is_flag=True, help="Pin the host key the server offers now.")
@as_user_option
def pair(name: str, host_key: str | None, trust_on_first_use: bool, as_user: str | None) -> None:
    """Verify a target over SSH and mark it paired; bulk jobs extend to it.

    A pinned host key is never replaced here: use `fleetcron target repin`."""
    with opened_app() as app, hints(name, "pair"):
        result = svc.pair_target(
            app,
            acting(app, as_user),
            name,
            host_key=host_key,
            trust_on_first_use=trust_on_first_use,
        )
        default_zone = app.settings.timezone
    _say_paired(result, default_zone)


@target.command("repin")
@click.argument("name")
@click.option("--host-key", help='The server\'s new host key, e.g. "ssh-ed25519 AAAA...".')
@click.option("--trust-on-first-use", is_flag=True, help="Pin the host key the server offers now.")
@yes_option
@as_user_option
def repin(
    name: str, host_key: str | None, trust_on_first_use: bool, yes: bool, as_user: str | None
) -> None:
    """Replace the pinned host key (after a server was reinstalled).

    Shows the old and the new fingerprint and asks before pinning (or --yes); the server
    must present the new key and accept the login. Audited with both fingerprints."""
    with opened_app() as app, hints(name, "repin"):
        actor = acting(app, as_user)
        plan = svc.plan_repin(
            app, actor, name, host_key=host_key, trust_on_first_use=trust_on_first_use
        )
        click.echo(f"target {name}")
        click.echo(f"  pinned host key: {plan.old_fingerprint or '(none)'}")
        source = "offered by the server now" if plan.trusted_on_first_use else "given"
        click.echo(f"  new host key:    {plan.new_fingerprint} ({source})")
        confirm(f"Pin {plan.new_fingerprint} for {name}?", yes)
        svc.repin_target(app, actor, plan)
    click.echo(f"target {name}: host key {plan.new_fingerprint} pinned")


@target.command("pause")
@click.argument("name")
@click.option("--reason", help="Why (shown with the skipped slots, one line).")
@as_user_option
def pause(name: str, reason: str | None, as_user: str | None) -> None:
    """Maintenance pause: nothing runs on the target, its slots are recorded as skipped,
    and every job keeps its own enabled flag."""
    with opened_app() as app:
        result = svc.pause_target(app, acting(app, as_user), name, reason)
    if result.changed:
        click.echo(f"target {name} paused; its slots are recorded as skipped until resumed")
    else:
        click.echo(f"target {name} was already paused; reason updated")


@target.command("resume")
@click.argument("name")
@as_user_option
def resume(name: str, as_user: str | None) -> None:
    """End a pause; every job continues from its next slot (no catch-up burst)."""
    with opened_app() as app:
        result = svc.resume_target(app, acting(app, as_user), name)
    if result.changed:
        click.echo(f"target {name} resumed; jobs continue from their next slot")
    else:
        click.echo(f"target {name} was not paused")


#: The most targets one ``target list --limit`` page may ask for (as the API's pages).
LIST_LIMIT_MAX = 1000


def _list_row(t: TargetView, default_zone: str) -> tuple[str, ...]:
    return (
        t.name,
        t.kind,
        (f"{t.user}@{t.host}:{t.port}" + (f" via {t.via}" if t.via else ""))
        if t.kind.over_ssh
        else "-",
        state_of(t),
        t.reach.words,
        t.timezone or f"- (default {default_zone})",
        ",".join(f"{k}={v}" for k, v in sorted(t.labels.items())),
    )


@target.command("list")
@click.option(
    "--limit",
    type=click.IntRange(1, LIST_LIMIT_MAX),
    default=None,
    help=f"Show one page of at most this many targets (1 to {LIST_LIMIT_MAX}); "
    "default: all of them.",
)
@click.option(
    "--offset", type=click.IntRange(0, 10_000_000), default=0, help="Skip this many targets."
)
@click.option(
    "--name", "name", default=None, help="Only targets whose name contains this (any case)."
)
@json_option
@as_user_option
def list_(
    limit: int | None, offset: int, name: str | None, as_json: bool, as_user: str | None
) -> None:
    """List targets by name: all of them, read from the database a few hundred at a time,
    or one page with --limit and --offset (the rest is counted on stderr, with the
    --offset of the next page)."""
    rest = 0
    with opened_app() as app:
        actor = acting(app, as_user)
        default_zone = app.settings.timezone
        if limit is None and not offset and not name:
            pages = target_reads.iter_targets(app, actor, page=target_reads.TARGETS_READ_PAGE)
        else:
            page, total = target_reads.list_targets_page(
                app, actor, limit=limit, offset=offset, name=name or None
            )
            rest = max(total - offset - len(page), 0)
            pages = iter([page])
        shown: list[dict[str, object]] = []
        rows: list[tuple[str, ...]] = []
        for page in pages:
            # Each page becomes plain rows before the next is read.
            if as_json:
                shown.extend(target_dict(t) for t in page)
            else:
                rows.extend(_list_row(t, default_zone) for t in page)
    if as_json:
        print_json(shown)
    elif not rows and not (offset or name):
        click.echo(
            "no targets yet; add one with `fleetcron target add NAME --host H --user U --key FILE`"
        )
    else:
        print_table(None, ["name", "kind", "address", "state", "reach", "zone", "labels"], rows)
    if rest and not as_json:
        echo(f"{rest} more target(s): --offset {offset + len(shown) + len(rows)}", err=True)


@target.command("show")
@click.argument("name")
@json_option
@as_user_option
def show(name: str, as_json: bool, as_user: str | None) -> None:
    """Show one target and the jobs assigned to it."""
    with opened_app() as app:
        the_target, assignments = target_reads.show_target(app, acting(app, as_user), name)
        default_zone = app.settings.timezone
    jobs = [
        {
            "job": a.job.name,
            "origin": a.job.origin,
            "enabled": a.enabled,
            "timezone": a.zone,
            "next_fire_at": a.next_fire_at,
            "last_fire_at": a.last_fire_at,
        }
        for a in assignments
    ]
    data = {**target_dict(the_target), "assignments": jobs}
    if as_json:
        print_json(data)
        return
    keys = ["name", "kind", "host", "port", "user", "via", "host_key_fingerprint"]
    keys += ["client_cert_expires_at", "paired"]
    keys += ["paired_at", "paused", "paused_reason", "paused_at", "paused_by", "notes"]
    for key in keys:
        if key.startswith("paused_") and not the_target.paused:
            continue
        echo(f"{key + ':':22}{'' if data[key] is None else data[key]}")
    echo(f"{'reach:':22}{reach_text(the_target)}")
    echo(f"{'timezone:':22}{zone_text(the_target, default_zone)}")
    echo(f"{'labels:':22}{','.join(f'{k}={v}' for k, v in sorted(the_target.labels.items()))}")
    print_table(
        "jobs",
        ["job", "origin", "enabled", "next fire", "zone"],
        [
            (
                j["job"],
                j["origin"],
                "yes" if j["enabled"] else "no",
                local_time(a.next_fire_at, a.zone),
                j["timezone"],
            )
            for a, j in zip(assignments, jobs, strict=True)
        ],
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
    """Stop all work on a target (its run history stays; jobs disabled here stay disabled
    when it is paired again). For maintenance, `fleetcron target pause` keeps everything."""
    with opened_app() as app:
        removed = svc.unpair_target(app, acting(app, as_user), name)
    click.echo(f"target {name} unpaired; {removed} assignment(s) removed")


@target.command("rm")
@click.argument("name")
@click.option("--with-jobs", is_flag=True, help="Remove the target's individual jobs with it.")
@yes_option
@as_user_option
def rm(name: str, with_jobs: bool, yes: bool, as_user: str | None) -> None:
    """Remove a target (its run history stays).

    With --with-jobs its individual jobs are removed too, after listing them and asking
    (or --yes)."""
    with opened_app() as app, hints(name, "rm"):
        actor = acting(app, as_user)
        if with_jobs:
            jobs = target_reads.individual_jobs(app, actor, name)
            if jobs:
                click.echo(f"individual jobs of {name} that will be removed: {', '.join(jobs)}")
                confirm(f"Remove target {name} and these {len(jobs)} job(s)?", yes)
        result = svc.remove_target(app, actor, name, with_jobs=with_jobs)
    removed = f" with {len(result.removed_jobs)} individual job(s)" if result.removed_jobs else ""
    click.echo(f"target {name} removed{removed}")
