"""The scheduler host's zone, detected for each local target added, on a real database
(SQLite and PostgreSQL): the detection's shell and commands run again only when a zone
file changed since the last detection that found a zone."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.targets import edit as targets
from fleetcron.services.targets import pairing

Detection = tuple[str | None, str]


@pytest.fixture
def detections(monkeypatch: pytest.MonkeyPatch) -> list[Detection]:
    """Every detection run from now on (a real one), the cache emptied first."""
    runs: list[Detection] = []
    real: Callable[[], Detection] = pairing._detect_local_zone

    def counting() -> Detection:
        runs.append(real())
        return runs[-1]

    monkeypatch.setattr(pairing, "_detect_local_zone", counting)
    monkeypatch.setattr(pairing, "_last_local_zone", None)
    return runs


@pytest.fixture
def zone_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """Zone files of the test's own in place of the host's: /etc/timezone, /etc/localtime."""
    timezone = tmp_path / "timezone"
    timezone.write_text("Europe/Warsaw\n")
    localtime = tmp_path / "localtime"
    localtime.symlink_to("/usr/share/zoneinfo/Europe/Warsaw")
    monkeypatch.setattr(pairing, "LOCAL_ZONE_FILES", (timezone, localtime))
    return timezone, localtime


def test_local_targets_added_together_run_the_detection_once(
    app: App, admin: Actor, detections: list[Detection]
) -> None:
    added = [
        targets.add_target(app, admin, TargetSpec(name, TargetKind.LOCAL))
        for name in ("box1", "box2", "box3")
    ]

    [(zone, how)] = detections
    assert zone is not None
    assert [(r.timezone, r.timezone_note) for r in added] == [(zone, f"detected by {how}")] * 3


def test_a_changed_zone_file_runs_the_detection_again(
    detections: list[Detection], zone_files: tuple[Path, Path]
) -> None:
    timezone, localtime = zone_files
    first = pairing.local_zone()
    assert pairing.local_zone() == first
    assert len(detections) == 1

    # Negative controls of the cache: each file's change is seen.
    timezone.write_text("Europe/Paris\n")
    pairing.local_zone()
    assert len(detections) == 2
    localtime.unlink()
    localtime.symlink_to("/usr/share/zoneinfo/Asia/Tokyo")
    pairing.local_zone()
    assert len(detections) == 3
    timezone.unlink()
    pairing.local_zone()
    assert len(detections) == 4
    pairing.local_zone()
    assert len(detections) == 4


def test_a_detection_that_found_no_zone_is_not_kept(
    monkeypatch: pytest.MonkeyPatch, zone_files: tuple[Path, Path]
) -> None:
    runs: list[int] = []

    def failing() -> Detection:
        runs.append(1)
        return None, "could not run the detection on this host (timed out)"

    monkeypatch.setattr(pairing, "_detect_local_zone", failing)
    monkeypatch.setattr(pairing, "_last_local_zone", None)
    assert pairing.local_zone()[0] is None
    assert pairing.local_zone()[0] is None
    assert len(runs) == 2
