"""Entry point of the `fleetcron` command.

Exit codes: 0 success, 2 bad input (the message names the field and what is allowed),
1 any other failure. User errors never print a traceback.
"""

from __future__ import annotations

import sys

import click

from fleetcron import __version__
from fleetcron.cli.cron_cmd import cron
from fleetcron.cli.output import run_cli


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="fleetcron")
def cli() -> None:
    """Cron for fleets of servers: every run recorded, never twice."""


cli.add_command(cron)


def main() -> None:
    sys.exit(run_cli(cli))
