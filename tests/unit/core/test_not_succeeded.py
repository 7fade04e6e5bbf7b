"""The words of a re-run of what did not succeed (``core/statuses.py``: NOT_SUCCEEDED), and
the job page's label of a halted slot."""

from __future__ import annotations

import pytest

from fleetcron.core import statuses
from fleetcron.core.statuses import RunStatus, SkipKind, not_succeeded
from fleetcron.services.jobs.slots import halt_label


@pytest.mark.parametrize(
    ("status", "kind", "word"),
    [
        (RunStatus.FAILED, None, "failed"),
        (RunStatus.CONNECT_ERROR, None, "failed"),
        (RunStatus.INTERRUPTED, None, "failed"),
        (RunStatus.LOST, None, "failed"),
        (RunStatus.FENCED, None, "failed"),
        (RunStatus.TIMED_OUT, None, "timed_out"),
        (RunStatus.SKIPPED, SkipKind.ROLLOUT_HALTED, "halted"),
        (RunStatus.MISSED, None, "missed"),
    ],
)
def test_each_way_of_not_succeeding_has_its_word(
    status: RunStatus, kind: SkipKind | None, word: str
) -> None:
    assert not_succeeded(status, kind) == word


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (RunStatus.SUCCEEDED, None),
        (RunStatus.CANCELLED, None),
        (RunStatus.QUEUED, None),
        (RunStatus.PENDING, None),
        (RunStatus.RUNNING, None),
        (RunStatus.SKIPPED, SkipKind.TARGET_PAUSED),
        (RunStatus.SKIPPED, SkipKind.OVERLAP),
        (RunStatus.SKIPPED, None),
        (None, None),
    ],
)
def test_a_success_a_stop_an_active_run_and_other_skips_are_not_taken(
    status: RunStatus | None, kind: SkipKind | None
) -> None:
    assert not_succeeded(status, kind) is None


def test_every_failure_is_taken_by_exactly_one_word() -> None:
    words = [w for s in statuses.FAILED if (w := not_succeeded(s, None)) is not None]
    assert len(words) == len(statuses.FAILED)
    assert set(statuses.NOT_SUCCEEDED) == {"failed", "timed_out", "halted", "missed"}


def test_a_threshold_halt_is_labelled_with_its_counts_and_threshold() -> None:
    reason = "rollout halted: max_failures 20% (2 of 10 targets) reached after failures on a, b"
    assert halt_label(reason, 3, 10) == "halted: 3 of 10 failed, threshold 20%"


def test_a_canary_halt_is_labelled_with_the_canary() -> None:
    reason = "rollout halted: canary web1 ended failed; the other targets do not start"
    assert halt_label(reason, 1, 10) == "halted: canary web1 ended failed"
