"""`fleetcron health` and `fleetcron prune`."""

from __future__ import annotations

from dataclasses import asdict

import click

from fleetcron.cli.context import acting, as_user_option, opened_app
from fleetcron.cli.output import print_json, print_table
from fleetcron.core.permissions import DEFAULT_PROJECT
from fleetcron.core.validation import validate_int
from fleetcron.services.health import report as svc
from fleetcron.services.runs import retention

#: The command line's way to every line of a cause (the web UI's is ``Group.see_all``).
SEE_ALL_CLI = {
    "unreachable": "fleetcron runs list --status connect_error",
    "failing": "fleetcron job status JOB --status failed",
    "stuck": "fleetcron runs list --status running",
    "late": "fleetcron job status JOB --sort next",
}
WHAT = {
    "unreachable": "unreachable target(s)",
    "failing": "failing job × target",
    "stuck": "stuck run(s)",
    "late": "late job × target",
}


@click.command()
@click.option(
    "--job",
    help="Per target of this job: last run, last success, failures in a row and since when.",
)
@click.option(
    "--limit",
    type=int,
    default=svc.DEFAULT_LIMIT,
    show_default=True,
    help=f"Lines of each cause to list (and jobs), at most {svc.LIMIT_MAX}; 0 lists all. "
    "The counts are always complete.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON for monitoring systems.")
@as_user_option
def health(job: str | None, limit: int, as_json: bool, as_user: str | None) -> None:
    """Failing, late or missing, stuck runs, and hosts a new connection cannot reach (the
    host probe). Exit 0 when all is well, 1 otherwise.

    An unreachable target is one line, whatever number of its jobs cannot connect; other
    failures are one line per job and target. At most --limit lines of each cause are
    listed, with how many more there are and where to see them; the counts and the exit
    status cover them all. A problem under a silence (fleetcron alert silence) is listed
    as the others, marked "silenced", and still counts in the exit status: a silence mutes
    messages, not health. --json has the lines in "grouped" (each with "silenced"), their
    job × target detail in "problems", the counts per cause in "groups", per job in
    "jobs", and those under a silence in "silenced"."""
    if job is not None:
        _job_health(job, as_json, as_user)
        return
    validate_int(limit, field="--limit", low=0, high=svc.LIMIT_MAX)
    with opened_app() as app:
        result = svc.summary(app, acting(app, as_user), limit=limit or None)
    if as_json:
        print_json(result.as_dict())
    elif result.ok:
        click.echo(
            f"ok: nothing failing, late or stuck, no host unreachable "
            f"({result.failures_24h} failure(s) in 24 h)"
        )
    else:
        _print_problems(result)
    if not result.ok:
        raise SystemExit(1)


def _print_hosts(result: svc.HealthSummary) -> None:
    print_table(
        f"{result.hosts_down} host(s) a new connection cannot reach (host probe)",
        ["target", "state", "since", "probed", "error"],
        [(h.target, h.reach, h.since, h.at, h.error or "") for h in result.hosts],
    )
    if result.hosts_down > len(result.hosts):
        click.echo(
            f"{result.hosts_down - len(result.hosts)} more host(s) not listed: "
            "fleetcron target list, or --limit 0 to list all"
        )


def _named(project: str, job: str) -> str:
    """A job as health lines name it: ``project/job`` outside ``default`` (names are
    unique per project only)."""
    return job if project == DEFAULT_PROJECT else f"{project}/{job}"


def _print_problems(result: svc.HealthSummary) -> None:
    if result.hosts_down:
        _print_hosts(result)
    if result.line_count:
        silenced = f"; {result.silenced} silenced" if result.silenced else ""
        print_table(
            f"{result.line_count} problem(s) ({result.problem_count} job × target{silenced})",
            ["kind", "target", "job", "since", "detail"],
            [
                (
                    g.kind + (" (silenced)" if g.silenced else ""),
                    g.target,
                    _named(g.project, g.job) if g.job else f"{len(g.jobs)} job(s)",
                    g.since,
                    g.detail,
                )
                for g in result.grouped
            ],
        )
        for group in result.groups:
            if group.more:
                click.echo(
                    f"{group.more} more {WHAT[group.kind]} not listed: "
                    f"{SEE_ALL_CLI[group.kind]}, or --limit 0 to list all"
                )
        if result.jobs_total > len(result.jobs) or any(g.more for g in result.groups):
            shown = ", ".join(f"{_named(j.project, j.job)} ({j.total})" for j in result.jobs)
            more = result.jobs_total - len(result.jobs)
            click.echo(
                f"{result.jobs_total} job(s) with problems: {shown}"
                + (f" and {more} more" if more else "")
            )


@click.command()
@click.option("--dry-run", is_flag=True, help="Only count what would be removed.")
@as_user_option
def prune(dry_run: bool, as_user: str | None) -> None:
    """Apply the retention settings once: old runs, runs beyond the per-assignment cap,
    (when configured) old audit events, and incidents resolved before
    incident_retention_days."""
    with opened_app() as app:
        result = retention.prune(app, acting(app, as_user), dry_run=dry_run)
    verb = "would remove" if dry_run else "removed"
    outcome = result.by_outcome
    click.echo(
        f"{verb} {result.runs_by_age} run(s) past the age limit ({outcome.get('succeeded', 0)} "
        f"succeeded, {outcome.get('failed', 0)} failed, {outcome.get('other', 0)} other), "
        f"{result.runs_by_count} run(s) beyond the per-assignment cap, "
        f"{result.audit_events} audit event(s), {result.incidents} resolved incident(s)"
    )


def _job_health(job: str, as_json: bool, as_user: str | None) -> None:
    with opened_app() as app:
        rows = svc.assignment_health(app, acting(app, as_user), job)
    if as_json:
        print_json([asdict(r) for r in rows])
    else:
        print_table(
            f"{job}",
            [
                "target",
                "enabled",
                "last run",
                "status",
                "last success",
                "failures",
                "failing since",
                "late",
            ],
            [
                (
                    r.target,
                    "yes" if r.enabled else "no",
                    r.last_run_at,
                    r.last_status,
                    r.last_success_at,
                    r.failures_text,
                    r.failing_since,
                    "LATE" if r.late else "",
                )
                for r in rows
            ],
        )
    if any(r.late or r.consecutive_failures for r in rows):
        raise SystemExit(1)
