"""The duplicate-registration check reads only the jobs whose command holds the new one
(SQLite and PostgreSQL): the comparison without surrounding whitespace still decides, and
a command with LIKE's wildcards in it matches only itself."""

from __future__ import annotations

import pytest

from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.errors import Conflict
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets

ADMIN = Actor("admin", "admin")


@pytest.fixture
def pbx(app: App) -> str:
    targets.add_target(app, ADMIN, TargetSpec("pbx1", TargetKind.LOCAL))
    return "pbx1"


def test_the_same_command_with_surrounding_whitespace_is_a_duplicate(
    app: App, operator: Actor, pbx: str
) -> None:
    jobs.add_job(app, operator, "reload", JobSpec("0 2 * * *", "fwconsole reload"), target=pbx)

    with pytest.raises(Conflict, match="duplicate registration"):
        jobs.add_job(
            app, operator, "again", JobSpec("0 5 * * *", "\tfwconsole reload \n"), target=pbx
        )


def test_a_command_holding_another_is_not_a_duplicate_of_it(
    app: App, operator: Actor, pbx: str
) -> None:
    # Negative control of the test above: the lookup's candidates are compared exactly.
    jobs.add_job(app, operator, "reload", JobSpec("0 2 * * *", "fwconsole reload"), target=pbx)

    view = jobs.add_job(
        app, operator, "reload-all", JobSpec("0 5 * * *", "fwconsole reload --all"), target=pbx
    )

    assert view.command == "fwconsole reload --all"


def test_wildcards_in_a_command_match_only_themselves(app: App, operator: Actor, pbx: str) -> None:
    jobs.add_job(app, operator, "pct", JobSpec("0 2 * * *", "df -h | grep 9_%"), target=pbx)
    jobs.add_job(app, operator, "other", JobSpec("0 3 * * *", "df -h | grep 9a%x"), target=pbx)

    with pytest.raises(Conflict, match="jobs again and pct"):
        jobs.add_job(app, operator, "again", JobSpec("0 5 * * *", "df -h | grep 9_%"), target=pbx)
