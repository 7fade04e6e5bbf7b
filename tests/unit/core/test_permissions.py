"""The permission matrix: viewer < operator < admin."""

from __future__ import annotations

import pytest

from fleetcron.core.permissions import MATRIX, action_phrase, allowed, authorize
from fleetcron.errors import PermissionDenied

READS = ["target.read", "job.read", "run.read", "audit.read", "cluster.read"]
JOB_AND_TARGET_WRITES = [
    "target.add",
    "target.pair",
    "target.unpair",
    "target.label",
    "target.remove",
    "target.edit",
    "target.repin",
    "target.pause",
    "job.add",
    "job.edit",
    "job.enable",
    "job.disable",
    "job.remove",
    "job.revert",
    "job.run",
]
USER_MANAGEMENT = ["user.read", "user.add", "user.edit", "user.remove", "token.manage_any"]
ADMIN_ONLY = [*USER_MANAGEMENT, "cluster.manage", "settings.manage", "target.local"]


@pytest.mark.parametrize("action", READS)
def test_a_viewer_may_read(action: str) -> None:
    assert allowed("viewer", action)


@pytest.mark.parametrize("action", JOB_AND_TARGET_WRITES + ADMIN_ONLY)
def test_a_viewer_may_not_write(action: str) -> None:
    assert not allowed("viewer", action)


@pytest.mark.parametrize("action", READS + JOB_AND_TARGET_WRITES)
def test_an_operator_may_read_and_manage_jobs_and_targets(action: str) -> None:
    assert allowed("operator", action)


@pytest.mark.parametrize("action", ADMIN_ONLY)
def test_an_operator_may_not_manage_users_or_settings(action: str) -> None:
    assert not allowed("operator", action)


@pytest.mark.parametrize("action", sorted(MATRIX))
def test_an_admin_may_do_everything(action: str) -> None:
    assert allowed("admin", action)


def test_every_role_may_manage_its_own_tokens() -> None:
    assert all(allowed(role, "token.manage_own") for role in ("viewer", "operator", "admin"))


def test_an_unknown_role_may_do_nothing() -> None:
    assert not any(allowed("superuser", action) for action in MATRIX)


def test_an_unknown_action_raises_key_error() -> None:
    with pytest.raises(KeyError):
        allowed("admin", "job.explode")


def test_authorize_of_an_unknown_action_raises_key_error() -> None:
    with pytest.raises(KeyError):
        authorize("alice", "admin", "job.explode")


def test_authorize_lets_an_allowed_action_pass() -> None:
    try:
        authorize("olivia", "operator", "job.add")
    except PermissionDenied as exc:
        pytest.fail(f"an operator was refused job.add: {exc}")


def test_authorize_names_the_actor_the_action_and_the_role_needed() -> None:
    with pytest.raises(PermissionDenied) as info:
        authorize("victor", "viewer", "job.add")
    assert str(info.value) == "victor (viewer) may not add jobs; it needs the operator role"


@pytest.mark.parametrize(
    ("action", "phrase"),
    [
        ("user.add", "add users"),
        ("target.pause", "pause targets"),
        ("cluster.manage", "manage the cluster"),
        ("token.manage_any", "manage other users' API tokens"),
    ],
)
def test_a_refusal_names_the_action_in_words(action: str, phrase: str) -> None:
    with pytest.raises(PermissionDenied) as info:
        authorize("victor", "viewer", action)
    assert f"victor (viewer) may not {phrase}; it needs the " in str(info.value)


def test_every_action_reads_as_words_without_its_dotted_id() -> None:
    for action in MATRIX:
        phrase = action_phrase(action)
        assert "." not in phrase and "_" not in phrase, (action, phrase)
        assert phrase.split()[0].islower(), (action, phrase)
