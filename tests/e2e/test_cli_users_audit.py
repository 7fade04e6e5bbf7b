"""`fleetcron user ...`, roles acting through `--as`, and `fleetcron audit list`.

The tests share one initialized data dir (see :func:`fleet`); a test that changes users
works on users of its own. There is one admin, the one `init` created.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

import pytest
from argon2 import PasswordHasher
from argon2.exceptions import VerifyMismatchError

from e2e.conftest import ADMIN_PASSWORD, USER_PASSWORD, Fleet, Zygote, assert_refused, succeeded

NIGHTLY = (
    "job add nightly --target web1 --schedule '0 1 * * *' --command 'echo nightly' --as olivia"
)
VIEWER_ADDS_JOB = "job add sneaky --bulk --schedule @daily --command true --as victor"
ALL_EVENTS = "audit list --json --limit 10000"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory, zygote: Zygote) -> Fleet:
    """The admin of init, the operator olivia, the viewer victor and the local target web1;
    olivia added the job nightly on web1 and victor tried to add a job."""
    the_fleet = Fleet(tmp_path_factory.mktemp("fleet"), zygote)
    for command in (
        "init",
        "user add olivia --role operator",
        "user add victor --role viewer",
        "target add web1 --local",
        NIGHTLY,
    ):
        the_fleet.ok(command)
    the_fleet.run(VIEWER_ADDS_JOB)
    return the_fleet


def roles(fleet: Fleet) -> dict[str, str]:
    return {user["name"]: user["role"] for user in fleet.json("user list --json")}


def events(fleet: Fleet, command: str = ALL_EVENTS) -> list[dict[str, object]]:
    found: list[dict[str, object]] = fleet.json(command)
    assert found, f"`{command}` found no events"
    return found


# users and roles


def test_init_makes_its_admin_the_first_user(fleet: Fleet) -> None:
    assert roles(fleet)["admin"] == "admin"


def test_user_add_creates_a_user_with_the_given_role(fleet: Fleet) -> None:
    assert fleet.ok("user add ada --role operator") == "user ada added (operator)\n"
    assert roles(fleet)["ada"] == "operator"


def test_user_add_makes_a_viewer_by_default(fleet: Fleet) -> None:
    fleet.ok("user add vera")
    assert roles(fleet)["vera"] == "viewer"


def test_user_add_refuses_a_name_that_exists(fleet: Fleet) -> None:
    assert_refused(fleet.run("user add olivia --role viewer"), "user olivia already exists")


def test_user_add_refuses_a_short_password(fleet: Fleet) -> None:
    result = fleet.run("user add shorty --password-file -")  # stdin: empty
    short = fleet.run("user add shorty", FLEETCRON_PASSWORD="seven77")
    assert_refused(result, "password: - is empty")
    assert_refused(short, "password: must be at least 8 characters long")
    assert "seven77" not in result.stderr
    assert "shorty" not in roles(fleet)


def test_user_passwd_sets_a_password_that_verifies(fleet: Fleet) -> None:
    fleet.ok("user add forgetful")
    out = fleet.ok("user passwd forgetful --password a-new-password")
    assert out == "password of forgetful changed\n"
    with sqlite3.connect(fleet.data_dir / "fleetcron.db") as conn:
        (stored,) = conn.execute(
            "SELECT password_hash FROM users WHERE name = 'forgetful'"
        ).fetchone()
    assert PasswordHasher().verify(stored, "a-new-password")
    with pytest.raises(VerifyMismatchError):
        PasswordHasher().verify(stored, USER_PASSWORD)


def test_user_role_changes_the_role(fleet: Fleet) -> None:
    fleet.ok("user add rory --role viewer")
    assert fleet.ok("user role rory operator") == "user rory is now operator\n"
    assert roles(fleet)["rory"] == "operator"


def test_user_rm_removes_the_user(fleet: Fleet) -> None:
    fleet.ok("user add rex")
    assert fleet.ok("user rm rex") == "user rex removed\n"
    assert "rex" not in roles(fleet)


def test_the_last_admin_cannot_be_demoted(fleet: Fleet) -> None:
    assert_refused(fleet.run("user role admin viewer"), "admin is the last admin")
    assert roles(fleet)["admin"] == "admin"


def test_the_last_admin_cannot_be_removed(fleet: Fleet) -> None:
    assert_refused(fleet.run("user rm admin"), "admin is the last admin")
    assert "admin" in roles(fleet)


def test_an_operator_can_add_a_job(fleet: Fleet) -> None:
    assert "job nightly added (individual, on web1)" in succeeded(fleet.ran(NIGHTLY))
    assert fleet.json("job show nightly --json")["created_by"] == "olivia"


def test_a_viewer_cannot_add_a_job_and_is_told_the_role_it_needs(fleet: Fleet) -> None:
    assert_refused(fleet.ran(VIEWER_ADDS_JOB), "victor (viewer)", "needs the operator role")
    assert_refused(fleet.run("job show sneaky"), "job sneaky does not exist")


def test_a_viewer_can_list_jobs(fleet: Fleet) -> None:
    assert "nightly" in {job["name"] for job in fleet.json("job list --json --as victor")}


def test_an_operator_cannot_add_users(fleet: Fleet) -> None:
    result = fleet.run("user add ursula --as olivia")
    assert_refused(result, "olivia (operator)", "needs the admin role")
    assert "ursula" not in roles(fleet)


def test_acting_as_an_unknown_user_is_refused(fleet: Fleet) -> None:
    assert_refused(fleet.run("job list --as nobody"), "user nobody does not exist")


# audit


def test_audit_list_shows_successful_actions(fleet: Fleet) -> None:
    added = [e for e in events(fleet) if e["action"] == "target.add"]
    assert [(e["actor"], e["target"], e["success"]) for e in added] == [("admin", "web1", True)]


def test_audit_list_shows_failed_attempts_with_the_reason(fleet: Fleet) -> None:
    (denied,) = [e for e in events(fleet) if e["job"] == "sneaky"]
    assert (denied["actor"], denied["action"], denied["success"]) == ("victor", "job.add", False)
    assert "needs the operator role" in denied["detail"]["error"]  # type: ignore[index]


def test_audit_list_filters_by_actor(fleet: Fleet) -> None:
    found = events(fleet, "audit list --json --actor olivia")
    assert {e["actor"] for e in found} == {"olivia"}
    assert ("job.add", "nightly", True) in {(e["action"], e["job"], e["success"]) for e in found}


def test_audit_list_filters_by_action_prefix(fleet: Fleet) -> None:
    found = events(fleet, "audit list --json --action job.")
    assert all(str(e["action"]).startswith("job.") for e in found)
    assert {("nightly", True), ("sneaky", False)} <= {(e["job"], e["success"]) for e in found}


def test_audit_list_filters_by_target(fleet: Fleet) -> None:
    found = events(fleet, "audit list --json --target web1")
    assert {e["target"] for e in found} == {"web1"}
    assert {"target.add", "job.add"} <= {e["action"] for e in found}


def test_audit_list_since_shows_only_later_events(fleet: Fleet) -> None:
    since = datetime.now(UTC)
    fleet.ok("job disable nightly --as olivia")
    found = events(fleet, f"audit list --json --since {since.isoformat()}")
    assert all(datetime.fromisoformat(str(e["at"])) >= since for e in found)
    assert ("olivia", "job.disable") in {(e["actor"], e["action"]) for e in found}


def test_audit_list_refuses_a_since_that_is_not_a_time(fleet: Fleet) -> None:
    assert_refused(
        fleet.run("audit list --since notatime"), "since: 'notatime' is not an ISO-8601 time"
    )


def test_the_audit_log_never_records_a_password(fleet: Fleet) -> None:
    fleet.ok("user add careful --password careful-secret-1")
    out = fleet.ok(ALL_EVENTS)
    assert "careful" in out
    for password in (ADMIN_PASSWORD, USER_PASSWORD, "careful-secret-1"):
        assert password not in out


# API tokens


def test_token_create_shows_a_token_that_the_list_knows_only_by_its_prefix(fleet: Fleet) -> None:
    created = fleet.json("token create deploy-script --json --as olivia")
    listed = fleet.json("token list --json --as olivia")

    assert created["token"].startswith("fct_")
    [row] = [t for t in listed if t["id"] == created["id"]]
    assert row["prefix"] == created["token"][:10]
    assert created["token"] not in str(listed)


def test_token_revoke_marks_the_token_revoked(fleet: Fleet) -> None:
    created = fleet.json("token create short-lived --json --as olivia")

    fleet.ok(f"token revoke {created['id']} --as olivia")

    [row] = [t for t in fleet.json("token list --json --as olivia") if t["id"] == created["id"]]
    assert row["revoked_at"] is not None


def test_a_viewer_cannot_create_a_token_for_someone_else(fleet: Fleet) -> None:
    assert_refused(
        fleet.run("token create sneaky --user olivia --as victor"), "needs the admin role"
    )
