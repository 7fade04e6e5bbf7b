"""Entry point of the `fleetcron` command.

Exit codes: 0 success, 2 bad input (the message names the field and what is allowed),
1 any other failure. User errors never print a traceback.

Subcommands are imported only when used, so `fleetcron cron next` or `--help` does not
pay for the database and SSH libraries.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys

import click

from fleetcron import __version__
from fleetcron.cli.output import run_cli

#: name -> (module, attribute, one-line help shown by `fleetcron --help`)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "init": ("setup_cmd", "init", "Create the data dir, database, master key and first admin."),
    "db": ("setup_cmd", "db", "Database maintenance (upgrade)."),
    "serve": ("serve_cmd", "serve", "Run the scheduler, the web UI and the REST API."),
    "scheduler": ("serve_cmd", "scheduler", "Run the scheduler alone (no web UI)."),
    "target": ("target_cmd", "target", "Servers jobs run on."),
    "job": ("job_cmd", "job", "Scheduled commands: bulk (many targets) and individual."),
    "runs": ("runs_cmd", "runs", "What ran, failed, was skipped or missed, and why."),
    "apply": ("apply_cmd", "apply", "Apply a schedule file (schedules as code)."),
    "export": ("apply_cmd", "export", "Write the jobs as a schedule file."),
    "schedule": ("apply_cmd", "schedule", "Every (job, target, schedule, next fire) once."),
    "health": ("health_cmd", "health", "Failing, late or stuck: exit 0 when all is well."),
    "prune": ("health_cmd", "prune", "Apply the retention settings once."),
    "notify": ("notify_cmd", "notify", "Notification channels, rules and deliveries."),
    "alert": ("alert_cmd", "alert", "Incidents: list, show, acknowledge."),
    "silence": ("alert_cmd", "silence", "Mute incident messages for a while."),
    "blackout": ("blackout_cmd", "blackout", "Windows during which slots are skipped or deferred."),
    "calendar": ("calendar_cmd", "calendar", "Named dates jobs run only on, or never on."),
    "project": ("project_cmd", "project", "Projects: who sees and changes which jobs."),
    "user": ("user_cmd", "user", "Accounts of the web UI, API and CLI."),
    "audit": ("user_cmd", "audit", "The audit log of every operator action."),
    "token": ("user_cmd", "token", "API tokens for scripts: create, list, revoke."),
    "cluster": ("cluster_cmd", "cluster", "High availability: nodes, owner, handoff."),
    "config": ("ops_cmd", "config", "Show the effective configuration."),
    "backup": ("ops_cmd", "backup", "Write a consistent snapshot of the whole state."),
    "restore": ("ops_cmd", "restore", "Restore a snapshot into an empty data dir or database."),
    "cron": ("cron_cmd", "cron", "Check cron expressions and preview fire times."),
}


#: the commands that act in one project: each (and each of its subcommands) takes
#: ``--project`` (env ``FLEETCRON_PROJECT``)
SCOPED = frozenset(
    {
        "target",
        "job",
        "runs",
        "apply",
        "export",
        "schedule",
        "project",
        "alert",
        "silence",
        "blackout",
        "audit",
    }
)
#: groups of which only some subgroups act in one project (the channels of ``notify`` are
#: install-wide; its rules belong to a project)
SCOPED_PARTS: dict[str, tuple[str, ...]] = {"notify": ("rule",)}


def _scope(name: str, command: click.Command) -> None:
    """Give the command ``name`` (or its scoped subgroups) ``--project``."""
    if name not in SCOPED and name not in SCOPED_PARTS:
        return  # unscoped: no need to import the context (the database layer)
    from fleetcron.cli.context import with_project_option

    if name in SCOPED:
        with_project_option(command)
    for part in SCOPED_PARTS.get(name, ()):
        assert isinstance(command, click.Group)
        with_project_option(command.commands[part])


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for name in COMMANDS if self._available(name)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, attribute, _ = COMMANDS[cmd_name]
        try:
            command: click.Command = getattr(
                importlib.import_module(f"fleetcron.cli.{module}"), attribute
            )
        except ModuleNotFoundError:
            return None
        if cmd_name == "job":
            from fleetcron.cli.job_plan_cmd import plan_job
            from fleetcron.cli.job_run_cmd import run_job
            from fleetcron.cli.job_status_cmd import job_slots, job_status

            assert isinstance(command, click.Group)
            command.add_command(run_job)
            command.add_command(plan_job)
            command.add_command(job_status)
            command.add_command(job_slots)
            from fleetcron.cli.job_history_cmd import COMMANDS as HISTORY_COMMANDS

            for history_command in HISTORY_COMMANDS:
                command.add_command(history_command)
        if cmd_name == "target":
            from fleetcron.cli.target_trust_cmd import trust
            from fleetcron.cli.target_zone_cmd import detect_zone

            assert isinstance(command, click.Group)
            command.add_command(detect_zone)
            command.add_command(trust)
        if cmd_name == "schedule":
            from fleetcron.cli.schedule_cmd import upcoming

            assert isinstance(command, click.Group)
            command.add_command(upcoming)
        _scope(cmd_name, command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    @staticmethod
    def _available(name: str) -> bool:
        return importlib.util.find_spec(f"fleetcron.cli.{COMMANDS[name][0]}") is not None


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="fleetcron")
def cli() -> None:
    """Cron for fleets of servers: every run recorded, never twice."""


def main() -> None:
    sys.exit(run_cli(cli))
