"""`fleetcron target detect-zone`: read targets' time zones again and, with --apply, record
what changed."""

from __future__ import annotations

from dataclasses import asdict

import click

from fleetcron.cli.context import acting, as_user_option, opened_app
from fleetcron.cli.output import echo, print_json, print_table
from fleetcron.services.targets.zones import CHANGED, WOULD_CHANGE, ZoneCheck, detect_zones


def _row(check: ZoneCheck, default_zone: str) -> tuple[str, ...]:
    now = check.zone or f"- (default {default_zone})"
    source = check.source or "default"
    result = check.result + (f": {check.note}" if check.note else "")
    if check.detected is None:
        result = f"{check.result}: {check.how}"
    return (check.target, now, source, check.detected or "-", check.how, result)


@click.command("detect-zone")
@click.argument("names", nargs=-1, metavar="[NAME]...")
@click.option("--all", "every", is_flag=True, help="Every paired target.")
@click.option(
    "--apply", is_flag=True, help="Record the zones that differ (without it, nothing changes)."
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
@as_user_option
def detect_zone(
    names: tuple[str, ...], every: bool, apply: bool, as_json: bool, as_user: str | None
) -> None:
    """Read the time zone of the named targets (or of every paired one, --all) from the
    targets themselves — timedatectl, else /etc/timezone, else the /etc/localtime link —
    and show what would change. Only --apply records it (audited); jobs in the target zone
    then fire at the new zone's local time.

    With --all, a zone an operator set is kept (name the target to replace it)."""
    with opened_app() as app:
        actor = acting(app, as_user)
        checks = detect_zones(app, actor, names, every=every, apply=apply)
        default_zone = app.settings.timezone
    if as_json:
        print_json([{**asdict(c), "differs": c.differs} for c in checks])
        return
    if not checks:
        echo("no paired targets; pair one with `fleetcron target pair NAME`")
        return
    print_table(
        None,
        ["target", "zone now", "source", "detected", "by", "result"],
        [_row(c, default_zone) for c in checks],
    )
    pending = sum(c.result == WOULD_CHANGE for c in checks)
    if pending:
        echo(f"{pending} zone(s) would change; run again with --apply to record them")
    changed = sum(c.result == CHANGED for c in checks)
    if changed:
        echo(f"{changed} zone(s) changed")
