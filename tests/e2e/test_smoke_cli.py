"""Smoke test of the CLI on SQLite, for ``make quick``: the installed console script
initializes a data dir, adds a target and a job, lists them as JSON and refuses bad input
with exit 2, naming the field, the value and the range. The full CLI tests are the other
files here."""

from __future__ import annotations

from pathlib import Path

from e2e.conftest import Fleet, Zygote, assert_refused, run_fleetcron, succeeded


def by_name(items: list[dict[str, object]]) -> dict[object, dict[str, object]]:
    return {item["name"]: item for item in items}


def test_init_a_target_and_a_job_then_list_them_and_refuse_a_bad_schedule(
    tmp_path: Path, zygote: Zygote
) -> None:
    fleet = Fleet(tmp_path, zygote)
    succeeded(run_fleetcron("init", workdir=tmp_path))
    fleet.ok("target add web1 --local --label site=ams")
    fleet.ok("job add rotate --target web1 --schedule '0 3 * * *' --command 'echo rotate'")

    assert by_name(fleet.json("target list --json"))["web1"]["labels"] == {"site": "ams"}
    job = by_name(fleet.json("job list --json"))["rotate"]
    assert job["schedule"] == "0 3 * * *"

    assert_refused(
        fleet.run("job add bad --target web1 --schedule '61 * * * *' --command true"),
        "minute",
        "61",
        "0-59",
    )
    assert "bad" not in by_name(fleet.json("job list --json"))
