"""The dashboard's targets x bulk jobs grid shows target and job names as they are typed
(they are the identifiers operators give the CLI), not in capitals; the grid's own column
heading ("Target") stays a capitalised label, which shows the check sees the rendering."""

from __future__ import annotations

from live_web import ADMIN, LiveServer, OpenPage

from fleetcron.services.jobs.edit import JobSpec, add_job, remove_job


def test_the_grid_prints_names_as_typed(open_page: OpenPage, server: LiveServer) -> None:
    # Its own command (the server is shared: another test's job may run `true` on a target,
    # and a second registration of one command on one target is refused), removed after.
    spec = JobSpec("0 3 * * *", "echo grid-names")
    add_job(server.app, ADMIN, "grid-names", spec, bulk=True)
    try:
        page = open_page("olivia")
        page.goto(server.at("/"))

        grid = page.locator("#fleet-grid")
        job_heading = grid.locator("thead th.job a", has_text="grid-names")
        # innerText is the text as rendered, text-transform applied.
        assert job_heading.inner_text() == "grid-names"
        target_names = grid.locator('tbody th[scope="row"] a').all_inner_texts()
        assert target_names and all(name == name.lower() for name in target_names), target_names
        assert grid.locator("thead th").first.inner_text() == "TARGET"
    finally:
        remove_job(server.app, ADMIN, "grid-names")
