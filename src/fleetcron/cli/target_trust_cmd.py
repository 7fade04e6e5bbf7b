"""`fleetcron target trust ...`: which targets' hosts are trusted, and pinning many from a
known_hosts file or ssh-keyscan output."""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime, timedelta

import click

from fleetcron.cli.context import acting, as_user_option, opened_app
from fleetcron.cli.output import echo, print_json, print_table, read_bounded
from fleetcron.executors.user_certs import EXPIRY_WARNING
from fleetcron.services.targets.trust import (
    ABSENT,
    ALREADY,
    CONFLICT,
    PINNED,
    ImportReport,
    import_trust,
    trust_states,
)

#: The largest file read (a known_hosts line is under 1 KB; 20,000 hosts fit).
TRUST_FILE_MAX_BYTES = 20_000_000


@click.group("trust")
def trust() -> None:
    """Host trust: pinned host keys, imported from known_hosts files."""


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
            s.state,
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
    return f"expires {shown}" + (" (soon)" if left <= EXPIRY_WARNING else "")


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
