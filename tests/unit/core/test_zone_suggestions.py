"""An unknown zone is refused with the closest known one: "did you mean Europe/Warsaw?"."""

from __future__ import annotations

import pytest

from fleetcron.core.target_zones import suggest_zone, validate_job_timezone, validate_zone
from fleetcron.errors import InvalidInput


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("europe/warsaw", "Europe/Warsaw"),
        ("Europe/Warsow", "Europe/Warsaw"),
        ("warsaw", "Europe/Warsaw"),
    ],
)
def test_a_near_miss_names_the_zone_it_probably_means(typed: str, meant: str) -> None:
    assert suggest_zone(typed) == meant
    with pytest.raises(InvalidInput) as refused:
        validate_zone(typed)
    assert f"did you mean {meant}?" in refused.value.message
    assert refused.value.field == "timezone" and refused.value.value == typed


def test_nothing_close_gets_no_suggestion() -> None:
    """The control: the checker above can fail, a far-off name gets no "did you mean"."""
    assert suggest_zone("Mars/Olympus") is None
    with pytest.raises(InvalidInput) as refused:
        validate_zone("Mars/Olympus")
    assert "did you mean" not in refused.value.message
    assert "'Mars/Olympus' is not a known time zone" in refused.value.message


def test_a_jobs_zone_suggests_too_and_still_names_target() -> None:
    with pytest.raises(InvalidInput) as refused:
        validate_job_timezone("Europe/Berln")
    assert "did you mean Europe/Berlin?" in refused.value.message
    assert '"target"' in refused.value.message
