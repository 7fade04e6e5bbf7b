"""Where the whole fleet used to be loaded, row by row with every column: the bulk job
pages read only what they show (names and labels of the paired targets, the paired count,
the labels of the job's own targets), and ``target list`` reads the targets a page at a
time or one page with --limit/--offset; its output is the same as before (SQLite and
PostgreSQL)."""

from __future__ import annotations

import json
import re

import pytest
from fastapi.testclient import TestClient

from cli_env import point_the_cli_at
from fleetcron.app import Actor, App
from fleetcron.cli.main import cli
from fleetcron.cli.output import run_cli
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.services.targets import reads as target_reads
from sql_statements import statements

ADMIN = Actor("admin", "admin")
NAMES = ("alpha", "bravo", "charlie", "delta", "echo")
#: A column only a read of whole target rows selects.
WHOLE_ROW = "targets.host_key"
#: A read of given targets by id (a parameter or a list of them; a subquery, such as the
#: targets shared into a project, is a read of the fleet).
BY_ID = re.compile(r"targets\.id (?:= |IN \((?!SELECT))")


def fleet_reads(seen: list[str]) -> list[str]:
    """The statements that read whole target rows other than by id (one target's row, as
    a job's relationship loads it, is not a read of the fleet)."""
    return [s for s in seen if WHOLE_ROW in s and not BY_ID.search(s)]


@pytest.fixture
def fleet(app: App) -> None:
    for index, name in enumerate(NAMES):
        targets.add_target(app, ADMIN, TargetSpec(name, TargetKind.LOCAL, labels=[f"n={index}"]))
    targets.add_target(
        app, ADMIN, TargetSpec("spare", TargetKind.LOCAL), verify=False
    )  # not paired
    jobs.add_job(app, ADMIN, "reload", JobSpec("0 2 * * *", "true"), bulk=True, selector="n=1")


def test_the_bulk_job_pages_read_names_and_labels_only(
    app: App, browser: TestClient, fleet: None
) -> None:
    with statements(app) as seen:
        form = browser.get("/jobs/new")
        listed = browser.get("/jobs")
        edit = browser.get("/jobs/reload/edit")

    assert form.status_code == listed.status_code == edit.status_code == 200
    for name in NAMES:
        assert f'value="{name}"' in form.text
    assert 'value="spare"' not in form.text  # only paired targets are offered
    assert "n=3" in form.text and "n=1" in edit.text
    assert fleet_reads(seen) == []
    # Negative control: the targets list shows whole rows, and its read says so.
    with statements(app) as whole:
        assert browser.get("/targets").status_code == 200
    assert fleet_reads(whole)


def test_iter_targets_reads_a_page_at_a_time(app: App, fleet: None) -> None:
    with statements(app) as seen:
        pages = [[t.name for t in page] for page in target_reads.iter_targets(app, ADMIN, page=2)]

    assert pages == [["alpha", "bravo"], ["charlie", "delta"], ["echo", "spare"]]
    reads = [s for s in seen if WHOLE_ROW in s]
    assert len(reads) == 4  # three full pages, and the empty one that says it is the end


def cli_env(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    point_the_cli_at(app, monkeypatch)


def table_names(out: str) -> list[str]:
    return [line.split("│")[1].strip() for line in out.splitlines() if line.startswith("│")]


def test_target_list_prints_all_or_one_page(
    app: App, fleet: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cli_env(app, monkeypatch)
    monkeypatch.setattr(target_reads, "TARGETS_READ_PAGE", 2)

    assert run_cli(cli, ["target", "list"]) == 0
    everything = capsys.readouterr()
    assert run_cli(cli, ["target", "list", "--limit", "2", "--offset", "1"]) == 0
    page = capsys.readouterr()
    assert run_cli(cli, ["target", "list", "--limit", "2", "--offset", "4"]) == 0
    last = capsys.readouterr()
    assert run_cli(cli, ["target", "list", "--json"]) == 0
    as_json = json.loads(capsys.readouterr().out)
    assert run_cli(cli, ["target", "list", "--limit", "0"]) == 2
    refused = capsys.readouterr()

    assert table_names(everything.out) == [*NAMES, "spare"]
    assert everything.err == ""
    assert table_names(page.out) == ["bravo", "charlie"]
    assert page.err == "3 more target(s): --offset 3\n"
    assert (table_names(last.out), last.err) == (["echo", "spare"], "")
    assert [t["name"] for t in as_json] == [*NAMES, "spare"]
    assert "private_key" not in json.dumps(as_json)
    assert "--limit" in refused.err
