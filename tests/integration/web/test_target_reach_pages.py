"""What the host probe found, on the pages and in the API (SQLite and PostgreSQL): the
targets list, the target page and the dashboard show a host a new connection cannot reach;
a local target says it is not probed; a reachable host is not listed as down (the control).
"""

from __future__ import annotations

import re

from fastapi.testclient import TestClient
from sqlalchemy import update

from fleetcron.app import SYSTEM, App
from fleetcron.core.reach import Reach
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.executors.ssh_probe import ProbeResult
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.services.targets.reach import record_probes
from fleetcron.store.schema import Target
from integration.test_backup import ssh_private_key

HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHkCY9H2yZ1aBeq1Gx7pCD3uNcD9S7i2nV3Cz7pZr5xJ"


def add_ssh(app: App, name: str, reach: Reach, error: str | None) -> None:
    spec = TargetSpec(
        name, host="192.0.2.10", user="ops", private_key=ssh_private_key(), host_key=HOST_KEY
    )
    added = targets.add_target(app, SYSTEM, spec, verify=False, allow_same_host=True)
    record_probes(app, [ProbeResult(added.target.id, reach, error, 0.01)], app.now())


def reach_badges(html: str) -> list[str]:
    return re.findall(r'data-reach="([a-z_]+)"', html)


def test_a_host_found_down_is_shown_on_each_page_and_in_the_api(
    app: App, client: TestClient, as_viewer: dict[str, str]
) -> None:
    add_ssh(app, "db1", Reach.HOST_KEY_CHANGED, "host key mismatch: expected A, got B")
    add_ssh(app, "db2", Reach.REACHABLE, None)
    targets.add_target(app, SYSTEM, TargetSpec("box", TargetKind.LOCAL))

    listing = client.get("/targets", headers=as_viewer)
    assert listing.status_code == 200, listing.text
    assert reach_badges(listing.text) == ["host_key_changed", "reachable"]

    page = client.get("/targets/db1", headers=as_viewer).text
    assert reach_badges(page) == ["host_key_changed"]
    assert "host key mismatch: expected A, got B" in page
    assert "this machine: not probed" in client.get("/targets/box", headers=as_viewer).text

    dashboard = client.get("/", headers=as_viewer).text
    section = dashboard.split('id="hosts-down"')[1].split("</section>")[0]
    assert re.findall(r'data-host="([^"]+)"', section) == ["db1"]

    api = client.get("/api/v1/targets/db1", headers=as_viewer).json()
    assert (api["reach"], api["reach_error"]) == (
        "host_key_changed",
        "host key mismatch: expected A, got B",
    )
    assert api["reach_at"] is not None and api["reach_since"] is not None
    assert client.get("/api/v1/targets/box", headers=as_viewer).json()["reach"] is None


def test_with_every_host_reachable_the_dashboard_lists_none(
    app: App, client: TestClient, as_viewer: dict[str, str]
) -> None:
    """Negative control: the same pages with the host reachable list no host down."""
    add_ssh(app, "db1", Reach.REACHABLE, None)
    assert 'id="hosts-down"' not in client.get("/", headers=as_viewer).text
    assert reach_badges(client.get("/targets", headers=as_viewer).text) == ["reachable"]


def test_a_target_behind_a_down_jump_host_shows_its_state_with_the_hop_named(
    app: App, client: TestClient, as_viewer: dict[str, str]
) -> None:
    jump = TargetSpec(
        "b1",
        TargetKind.JUMP,
        host="192.0.2.1",
        user="ops",
        private_key=ssh_private_key(),
        host_key=HOST_KEY,
    )
    targets.add_target(app, SYSTEM, jump, verify=False, allow_same_host=True)
    spec = TargetSpec(
        "t42",
        host="10.0.0.42",
        user="ops",
        private_key=ssh_private_key(),
        host_key=HOST_KEY,
        via="b1",
    )
    added = targets.add_target(app, SYSTEM, spec, verify=False, allow_same_host=True)
    error = "jump host b1: connection refused: 192.0.2.1:22"
    record_probes(
        app, [ProbeResult(added.target.id, Reach.REFUSED, error, 0.01, hop="b1")], app.now()
    )

    page = client.get("/targets/t42", headers=as_viewer).text
    assert reach_badges(page) == ["refused"]
    assert "through jump host b1" in page and error in page
    assert "not probed" not in page
    # The jump host records the failure as its own, without the hop prefix.
    bastion = client.get("/targets/b1", headers=as_viewer).text
    assert reach_badges(bastion) == ["refused"]
    assert "connection refused: 192.0.2.1:22" in bastion
    assert "jump host b1:" not in bastion


def grid_rows(html: str) -> dict[str, list[str]]:
    """Target row -> the reach badges in its row header, from the dashboard's grid."""
    grid = html.split('id="fleet-grid"', 1)[1].split("</table>", 1)[0]
    rows = re.findall(r'<tr data-target="([^"]+)"[^>]*>\s*<th scope="row">(.*?)</th>', grid, re.S)
    return {name: reach_badges(header) for name, header in rows}


def test_the_fleet_grid_marks_the_rows_of_hosts_found_down(
    app: App, client: TestClient, as_viewer: dict[str, str]
) -> None:
    """The grid's cells show each target's newest run, which may predate the outage: the
    row of a host the probe cannot reach says so; a reachable one's row does not (control)."""
    add_ssh(app, "db1", Reach.REFUSED, "connection refused")
    add_ssh(app, "db2", Reach.REACHABLE, None)
    with app.db.session() as session:  # as a verified pairing would (tests/integration/store)
        session.execute(update(Target).values(paired=True))
    jobs.add_job(app, SYSTEM, "backup", JobSpec("0 3 * * *", "echo grid"), bulk=True)

    dashboard = client.get("/", headers=as_viewer)
    assert dashboard.status_code == 200, dashboard.text
    assert grid_rows(dashboard.text) == {"db1": ["down"], "db2": []}
    assert 'class="row-unreachable"' in dashboard.text
    assert "connection refused" in dashboard.text.split('id="fleet-grid"', 1)[1]
