"""`fleetcron target trust ...`: which targets' hosts are trusted, and pinning many from a
known_hosts file or ssh-keyscan output."""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime, timedelta

import click

from fleetcron.cli.context import acting, as_user_option, opened_app
from fleetcron.cli.output import echo, print_json, print_table, read_bounded
from fleetcron.core.targets import CLIENT_CERT_EXPIRY_WARNING
from fleetcron.services.targets.trust import (
    ABSENT,
    ALREADY,
    CONFLICT,
    PINNED,
    ImportReport,
    import_trust,
    trust_states,
)
from fleetcron.services.targets.trust_rules import (
    TrustRuleView,
    add_trust_rule,
    remove_trust_rule,
    trust_rules,
)

#: The largest file read (a known_hosts line is under 1 KB; 20,000 hosts fit).
TRUST_FILE_MAX_BYTES = 20_000_000


@click.group("trust")
def trust() -> None:
    """Host trust: pinned host keys, imported from known_hosts files; host CAs by label."""


@trust.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
@as_user_option
def trust_list(as_json: bool, as_user: str | None) -> None:
    """Each target and whether its host key is pinned or not yet trusted."""
    with opened_app() as app:
        states = trust_states(app, acting(app, as_user))
    if as_json:
        print_json([asdict(s) for s in states])
        return
    rows = [
        (
            s.name,
            s.kind,
            s.address + (f" via {s.via}" if s.via else ""),
            s.state + (f" ({s.ca_from})" if s.ca_from else ""),
            s.fingerprint or "",
            _cert_text(s.client_cert_expires_at),
        )
        for s in states
    ]
    print_table(None, ["name", "kind", "address", "trust", "fingerprint", "user cert"], rows)


def _cert_text(expires: datetime | None) -> str:
    """When the user certificate expires, flagged within a week or once expired."""
    if expires is None:
        return ""
    shown = expires.isoformat(sep=" ", timespec="minutes")
    left = expires - datetime.now(UTC)
    if left <= timedelta(0):
        return f"EXPIRED {shown}"
    return f"expires {shown}" + (" (soon)" if left <= CLIENT_CERT_EXPIRY_WARNING else "")


@trust.command("import")
@click.argument("path", metavar="FILE")
@click.option("--dry-run", is_flag=True, help="Show what would be pinned; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
@as_user_option
def trust_import(path: str, dry_run: bool, as_json: bool, as_user: str | None) -> None:
    """Pin host keys from a known_hosts file (hashed or not) or ssh-keyscan output (FILE,
    or - for standard input) for the targets that have none. A target with a different
    key pinned is reported as a conflict and left as it is (re-pin it to change it); the
    command then exits 1."""
    text = read_bounded(
        path,
        limit=TRUST_FILE_MAX_BYTES,
        field="file",
        allowed="a readable known_hosts file or ssh-keyscan output",
    ).decode(errors="replace")
    with opened_app() as app:
        report = import_trust(app, acting(app, as_user), text, dry_run=dry_run)
    if as_json:
        print_json(asdict(report))
    else:
        _say(report)
    if report.count(CONFLICT):
        raise SystemExit(1)


def _say(report: ImportReport) -> None:
    shown = [o for o in report.outcomes if o.outcome in (PINNED, CONFLICT)]
    if shown:
        print_table(
            None,
            ["target", "result", "file's key", "pinned key"],
            [(o.name, o.outcome, o.fingerprint or "", o.pinned or "") for o in shown],
        )
    verb = "would pin" if report.dry_run else "pinned"
    echo(
        f"{verb} {report.count(PINNED)}, already pinned {report.count(ALREADY)}, "
        f"conflicts {report.count(CONFLICT)}, not in the file {report.count(ABSENT)} "
        f"({report.entries} key line(s) read)"
    )
    if report.markers:
        echo(f"{report.markers} @cert-authority/@revoked line(s) skipped: not pins", err=True)
    if report.bad_lines:
        lines = ", ".join(str(n) for n in report.bad_lines[:20])
        echo(f"unreadable line(s), skipped: {lines}", err=True)
    if report.count(CONFLICT):
        echo(
            "a conflict keeps the pinned key: check the server, then "
            "`fleetcron target repin NAME --host-key KEY` to change it",
            err=True,
        )


@trust.group("ca")
def trust_ca() -> None:
    """Host CAs attached to label selectors: a target whose labels match is trusted by the
    CA (its own --host-ca wins, then the oldest matching label, then its pinned key)."""


@trust_ca.command("add")
@click.option("--label", "selector", required=True, help="Label selector, e.g. site=paris.")
@click.option(
    "--ca-file",
    required=True,
    help="The CA public key(s), @cert-authority and @revoked lines accepted (- for stdin).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
@as_user_option
def trust_ca_add(selector: str, ca_file: str, as_json: bool, as_user: str | None) -> None:
    """Trust the hosts of the targets matching --label by a host CA."""
    text = read_bounded(
        ca_file, limit=1_000_000, field="ca_file", allowed="a readable CA public key file"
    ).decode(errors="replace")
    with opened_app() as app:
        view = add_trust_rule(app, acting(app, as_user), selector, text)
    if as_json:
        print_json(asdict(view))
        return
    cas = ", ".join(view.ca_fingerprints)
    echo(f"host CA {cas} attached to {view.selector}: {len(view.targets)} target(s) now CA-trusted")


@trust_ca.command("remove")
@click.option("--label", "selector", required=True, help="The label selector it is attached to.")
@as_user_option
def trust_ca_remove(selector: str, as_user: str | None) -> None:
    """Remove the host CA attached to --label; its targets go back to their pinned keys."""
    with opened_app() as app:
        changed = remove_trust_rule(app, acting(app, as_user), selector)
    echo(f"host CA of {selector} removed: {len(changed)} target(s) changed trust")


@trust_ca.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
@as_user_option
def trust_ca_list(as_json: bool, as_user: str | None) -> None:
    """The host CAs attached to labels, with the targets each applies to."""
    with opened_app() as app:
        views: list[TrustRuleView] = trust_rules(app, acting(app, as_user))
    if as_json:
        print_json([asdict(v) for v in views])
        return
    rows = [
        (v.selector, ", ".join(v.ca_fingerprints), str(v.revoked), str(len(v.targets)))
        for v in views
    ]
    print_table(None, ["label", "CA", "revoked keys", "targets"], rows)
