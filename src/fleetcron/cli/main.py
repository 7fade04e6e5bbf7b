"""Entry point of the `fleetcron` command.

Exit codes: 0 success, 2 bad input (the message names the field and what is allowed),
1 any other failure. User errors never print a traceback.
"""

from __future__ import annotations

import sys

import click

from fleetcron import __version__
from fleetcron.cli.apply_cmd import apply, export, schedule
from fleetcron.cli.cluster_cmd import cluster
from fleetcron.cli.cron_cmd import cron
from fleetcron.cli.health_cmd import health, prune
from fleetcron.cli.job_cmd import job
from fleetcron.cli.notify_cmd import notify
from fleetcron.cli.output import run_cli
from fleetcron.cli.runs_cmd import run_job, runs
from fleetcron.cli.serve_cmd import scheduler, serve
from fleetcron.cli.setup_cmd import db, init
from fleetcron.cli.target_cmd import target
from fleetcron.cli.user_cmd import audit, user


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="fleetcron")
def cli() -> None:
    """Cron for fleets of servers: every run recorded, never twice."""


for command in (
    init,
    db,
    serve,
    scheduler,
    target,
    job,
    runs,
    apply,
    export,
    schedule,
    user,

    audit,
    notify,
    health,
    prune,
    cluster,
    cron,
):
    cli.add_command(command)
job.add_command(run_job)


def main() -> None:
    sys.exit(run_cli(cli))
