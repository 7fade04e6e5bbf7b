"""A job's DST choices and the history kept by outcome through the console script: the
flags, the refusals (exit 2, naming the field, nothing saved), the DST preview of
`schedule upcoming`, `cron next` under a choice, and `runs retention`."""

from __future__ import annotations

from pathlib import Path

import pytest

from e2e.conftest import Fleet, Zygote, assert_refused


@pytest.fixture
def fleet(tmp_path: Path, zygote: Zygote) -> Fleet:
    the_fleet = Fleet(tmp_path, zygote)
    the_fleet.ok("init")
    the_fleet.ok("target add box1 --local")
    return the_fleet


def test_dst_choices_are_set_shown_and_previewed(fleet: Fleet) -> None:
    fleet.ok(
        "job add nightly --target box1 --schedule '30 2 * * *' --command 'echo n' "
        "--tz Europe/Warsaw --dst-gap skip --dst-fold last --keep-failures-days 365"
    )
    shown = fleet.json("job show nightly --json")
    assert (shown["dst_gap"], shown["dst_fold"], shown["keep_failures_days"]) == (
        "skip",
        "last",
        365,
    )

    notes = fleet.json("schedule upcoming --job nightly --json")["dst"]
    texts = [n["text"] for n in notes]
    assert any("02:30 does not exist → skipped" in t for t in texts), texts
    assert any("runs once, on the second pass (+01:00)" in t for t in texts), texts
    assert "DST transitions ahead:" in fleet.ok("schedule upcoming --job nightly")


def test_a_dst_choice_without_dst_is_refused_and_nothing_saved(fleet: Fleet) -> None:
    refused = fleet.run(
        "job add utc --target box1 --schedule '30 2 * * *' --command 'echo n' --tz UTC "
        "--dst-gap skip"
    )
    assert_refused(refused, "dst_gap", "UTC has no DST transition")
    # An unknown choice: click's refusal of a choice flag, naming it and the choices.
    odd = fleet.run(
        "job add odd --target box1 --schedule '30 2 * * *' --command 'echo n' --dst-fold twice"
    )
    assert odd.returncode == 2 and "--dst-fold" in odd.stderr, odd.stderr
    assert "'first', 'both', 'last'" in odd.stderr
    assert fleet.json("job list --json") == []


def test_cron_next_under_a_choice(fleet: Fleet) -> None:
    command = "cron next '30 2 * * *' --from 2027-03-27T12:00 --tz Europe/Warsaw -n 1"
    assert fleet.ok(command).split() == ["2027-03-28T03:00:00+02:00"]
    assert fleet.ok(command + " --dst-gap skip").split() == ["2027-03-29T02:30:00+02:00"]
    assert_refused(fleet.run(command + " --dst-gap later"), "--dst-gap", "run_at_gap_end")


def test_runs_retention_shows_the_policy_in_force(fleet: Fleet) -> None:
    out = fleet.json(
        "runs retention --json",
        FLEETCRON_RETENTION_SUCCESS_DAYS="14",
        FLEETCRON_RETENTION_KEEP_LAST="5",
    )
    assert out["policy"]["success_days"] == 14
    assert out["policy"]["failure_days"] == 90  # unset: retention_days
    assert out["policy"]["keep_last"] == 5
    assert out["recent"] == []
    assert "successes kept 14 days" in fleet.ok(
        "runs retention", FLEETCRON_RETENTION_SUCCESS_DAYS="14"
    )
