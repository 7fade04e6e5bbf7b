"""Why a target's slots must not run: a maintenance pause, or local targets switched off."""

from __future__ import annotations

from fleetcron.core.planning import SlotPolicy, target_hold
from fleetcron.core.statuses import Skip, SkipKind


def test_a_paused_target_holds_with_its_reason() -> None:
    assert target_hold("ssh", True, "new disk", True) == Skip(
        SkipKind.TARGET_PAUSED, "target paused: new disk"
    )


def test_a_paused_target_without_a_reason_says_target_paused() -> None:
    assert target_hold("ssh", True, None, True) == Skip(SkipKind.TARGET_PAUSED, "target paused")


def test_a_local_target_holds_while_local_targets_are_disabled() -> None:
    assert target_hold("local", False, None, False) == Skip(
        SkipKind.LOCAL_DISABLED, "local targets are disabled"
    )


def test_the_pause_is_named_first_when_both_apply() -> None:
    assert target_hold("local", True, None, False) == Skip(SkipKind.TARGET_PAUSED, "target paused")


def test_nothing_holds_an_unpaused_ssh_target_whatever_the_local_setting() -> None:
    assert target_hold("ssh", False, None, False) is None
    assert target_hold("local", False, None, True) is None


def test_a_hand_built_policy_keeps_local_targets_running() -> None:
    """The scheduler passes the setting (default off); tools building a store by hand get
    the old behaviour."""
    assert SlotPolicy().allow_local_targets is True
