"""`fleetcron init`, `db upgrade`, `target ...` and `job ...` through the installed console script.

The tests share one initialized data dir holding a small fleet (see :func:`fleet`); a test
that changes something works on targets and jobs of its own, named after it.
"""

from __future__ import annotations

import base64
import json
import re
import sqlite3
from pathlib import Path

import pytest

from e2e.conftest import Fleet, Zygote, assert_refused, run_fleetcron, succeeded
from fixtures.sshd import ClientKey, generate_client_key, ssh_keygen_fingerprint
from fleetcron.crypto import MasterKey, Secret

BACKUP = (
    "job add backup --bulk --selector site=ams --disabled-on web2 "
    "--schedule '0 2 * * 0' --command 'tar czf /var/backups/etc.tgz /etc'"
)
ROTATE = "job add rotate --target web2 --schedule '0 3 * * *' --command 'logrotate /etc/lr.conf'"


def site_job(name: str) -> str:
    """A bulk job on the ams site; each job its own command (no duplicate registrations)."""
    return f"--bulk --selector site=ams --schedule '0 1 * * *' --command 'echo old {name}'"


@pytest.fixture(scope="module")
def client_key(tmp_path_factory: pytest.TempPathFactory) -> ClientKey:
    return generate_client_key(tmp_path_factory.mktemp("keys"))


@pytest.fixture(scope="module")
def host_key(tmp_path_factory: pytest.TempPathFactory) -> ClientKey:
    return generate_client_key(tmp_path_factory.mktemp("keys"), "host_ed25519")


@pytest.fixture(scope="module")
def fleet(
    tmp_path_factory: pytest.TempPathFactory,
    zygote: Zygote,
    client_key: ClientKey,
    host_key: ClientKey,
) -> Fleet:
    """web1 and web2 (both site=ams), an unverified SSH target s1 with a pinned host key,
    the bulk job backup (site=ams, paused on web2) and the individual job rotate on web2.
    The key file is at keys/client_ed25519 relative to the working directory."""
    the_fleet = Fleet(tmp_path_factory.mktemp("fleet"), zygote)
    keys = the_fleet.workdir / "keys"
    keys.mkdir()
    (keys / "client_ed25519").write_bytes(client_key.private_key_path.read_bytes())
    # init starts cold, the way an operator runs it first
    the_fleet.results["init"] = run_fleetcron("init", workdir=the_fleet.workdir)
    succeeded(the_fleet.ran("init"))
    for command in (
        "target add web1 --local --label env=prod --label site=ams",
        "target add web2 --local --label env=dev --label site=ams",
        "target add s1 --host 127.0.0.1 --user deploy --key keys/client_ed25519 "
        f"--host-key '{host_key.public_key_line}' --no-verify",
        BACKUP,
        ROTATE,
    ):
        the_fleet.ok(command)
    return the_fleet


def by_name(items: list[dict[str, object]], key: str = "name") -> dict[object, dict[str, object]]:
    return {item[key]: item for item in items}


def targets_of(job: dict[str, object]) -> dict[object, object]:
    """target -> enabled, from `job show --json`."""
    return {a["target"]: a["enabled"] for a in job["assignments"]}  # type: ignore[attr-defined]


def private_key_lines(key: ClientKey) -> list[str]:
    """The base64 lines of a private key file: any of them in an output is a leak."""
    return [line for line in key.private_key.splitlines() if line and "PRIVATE KEY" not in line]


def stored_private_key(fleet: Fleet, target: str) -> Secret:
    """A target's private key read from the database file, decrypted with the key file."""
    with sqlite3.connect(fleet.data_dir / "fleetcron.db") as conn:
        (token,) = conn.execute(
            "SELECT private_key_enc FROM targets WHERE name = ?", (target,)
        ).fetchone()
    return MasterKey((fleet.data_dir / "master.key").read_bytes().strip()).decrypt(token)


# init and db upgrade


def test_init_creates_the_database_and_the_first_admin(fleet: Fleet) -> None:
    out = succeeded(fleet.ran("init"))
    assert "(schema up to date)" in out
    assert "admin user:  admin (created)" in out
    assert (fleet.data_dir / "fleetcron.db").is_file()


def test_init_writes_a_master_key_file_readable_only_by_its_owner(fleet: Fleet) -> None:
    key_file = fleet.data_dir / "master.key"
    assert f"master key:  {key_file} (created, mode 0600" in succeeded(fleet.ran("init"))
    assert key_file.stat().st_mode & 0o777 == 0o600


def test_init_makes_the_data_dir_private_to_its_owner(fleet: Fleet) -> None:
    assert fleet.data_dir.stat().st_mode & 0o777 == 0o700


def test_running_init_again_creates_nothing(fleet: Fleet) -> None:
    out = fleet.ok("init --admin admin")
    assert "data dir:" in out
    assert "created" not in out


def test_running_init_again_keeps_the_master_key_of_the_stored_secrets(
    fleet: Fleet, client_key: ClientKey
) -> None:
    fleet.ok("init --admin admin")
    assert stored_private_key(fleet, "s1").reveal() == client_key.private_key.encode()


def test_commands_before_init_fail_and_say_to_run_init(tmp_path: Path) -> None:
    result = run_fleetcron("target", "list", workdir=tmp_path)
    assert_refused(result, "run `fleetcron init`", exit_code=1)


def _empty_database(fleet: Fleet) -> Fleet:
    """An empty database file: `db upgrade` migrates it (on a data dir with no database
    at all it refuses, as every command but `init` does: see test_cli_conventions.py)."""
    fleet.data_dir.mkdir()
    (fleet.data_dir / "fleetcron.db").touch()
    return fleet


def test_db_upgrade_creates_the_schema_of_an_empty_database(tmp_path: Path, zygote: Zygote) -> None:
    out = _empty_database(Fleet(tmp_path, zygote)).ok("db upgrade")
    assert re.fullmatch(r"database schema: empty -> \w+\n", out), out


def test_commands_after_only_db_upgrade_say_to_run_init(tmp_path: Path, zygote: Zygote) -> None:
    upgraded = _empty_database(Fleet(tmp_path, zygote))
    upgraded.ok("db upgrade")
    assert_refused(upgraded.run("target list"), "fleetcron init", exit_code=1)


# targets


def test_target_add_local_pairs_the_target_at_once(fleet: Fleet) -> None:
    assert fleet.ok("target add pairs-at-once --local").startswith("target pairs-at-once paired")
    assert by_name(fleet.json("target list --json"))["pairs-at-once"]["paired"] is True


def test_target_add_no_verify_stores_an_unpaired_ssh_target(fleet: Fleet) -> None:
    s1 = by_name(fleet.json("target list --json"))["s1"]
    assert (s1["kind"], s1["host"], s1["port"], s1["user"], s1["paired"]) == (
        "ssh",
        "127.0.0.1",
        22,
        "deploy",
        False,
    )


def test_target_list_shows_each_target_with_its_address_and_labels(fleet: Fleet) -> None:
    table = fleet.ok("target list").splitlines()
    rows = {line.split()[1]: line for line in table if line.startswith("│")}
    assert "env=prod,site=ams" in rows["web1"]
    assert "deploy@127.0.0.1:22" in rows["s1"]


def test_target_list_json_gives_each_targets_labels(fleet: Fleet) -> None:
    targets = by_name(fleet.json("target list --json"))
    assert targets["web1"]["labels"] == {"env": "prod", "site": "ams"}
    assert targets["web2"]["labels"] == {"env": "dev", "site": "ams"}


@pytest.mark.parametrize("command", ["target list --json", "target show s1 --json"])
def test_json_output_never_contains_a_private_key(
    fleet: Fleet, client_key: ClientKey, command: str
) -> None:
    out = fleet.ok(command)
    assert json.loads(out)
    assert "PRIVATE KEY" not in out
    assert [line for line in private_key_lines(client_key) if line in out] == []


def test_target_show_json_gives_the_fingerprint_of_the_pinned_host_key(
    fleet: Fleet, host_key: ClientKey
) -> None:
    s1 = fleet.json("target show s1 --json")
    expected = ssh_keygen_fingerprint(host_key.private_key_path.with_suffix(".pub"))
    assert (s1["host_key"], s1["host_key_fingerprint"]) == (host_key.public_key_line, expected)


def test_target_show_json_lists_the_jobs_on_the_target(fleet: Fleet) -> None:
    jobs = by_name(fleet.json("target show web2 --json")["assignments"], "job")
    assert (jobs["backup"]["origin"], jobs["backup"]["enabled"]) == ("bulk", False)
    assert (jobs["rotate"]["origin"], jobs["rotate"]["enabled"]) == ("individual", True)


def test_the_private_key_is_stored_encrypted_with_the_master_key(
    fleet: Fleet, client_key: ClientKey
) -> None:
    assert stored_private_key(fleet, "s1").reveal() == client_key.private_key.encode()
    raw = b"".join(
        path.read_bytes() for path in fleet.data_dir.iterdir() if path.name.startswith("fleetcron")
    )
    body = "".join(private_key_lines(client_key))
    assert b"PRIVATE KEY" not in raw
    assert body.encode() not in raw
    assert base64.b64decode(body) not in raw


def test_target_label_extends_a_bulk_job_that_now_selects_the_target(fleet: Fleet) -> None:
    fleet.ok("target add gets-label --local")
    fleet.ok("job add for-team-blue --bulk --selector team=blue --schedule @daily --command true")
    out = fleet.ok("target label gets-label team=blue")
    assert out == "target gets-label labels: team=blue\n"
    assert targets_of(fleet.json("job show for-team-blue --json")) == {"gets-label": True}


def test_target_label_with_an_empty_value_removes_the_label(fleet: Fleet) -> None:
    fleet.ok("target add loses-label --local --label team=green --label env=dev")
    fleet.ok("job add for-team-green --bulk --selector team=green --schedule @daily --command true")
    assert fleet.ok("target label loses-label team=") == "target loses-label labels: env=dev\n"
    assert targets_of(fleet.json("job show for-team-green --json")) == {}


def test_target_unpair_stops_all_work_on_the_target(fleet: Fleet) -> None:
    fleet.ok("target add to-unpair --local --label team=red")
    fleet.ok("job add for-team-red --bulk --selector team=red --schedule @daily --command true")
    assert re.fullmatch(
        r"target to-unpair unpaired; [1-9]\d* assignment\(s\) removed\n",
        fleet.ok("target unpair to-unpair"),
    )
    shown = fleet.json("target show to-unpair --json")
    assert (shown["paired"], shown["assignments"]) == (False, [])


def test_target_rm_removes_the_target(fleet: Fleet) -> None:
    fleet.ok("target add to-remove --local")
    assert fleet.ok("target rm to-remove") == "target to-remove removed\n"
    assert "to-remove" not in by_name(fleet.json("target list --json"))


# jobs


def test_a_bulk_job_reports_how_many_of_its_targets_are_enabled(fleet: Fleet) -> None:
    assert "(bulk, 1/2 enabled)" in succeeded(fleet.ran(BACKUP))


def test_disabled_on_starts_a_bulk_job_paused_on_those_targets(fleet: Fleet) -> None:
    assert targets_of(fleet.json("job show backup --json")) == {"web1": True, "web2": False}


def test_a_bulk_job_without_a_selector_covers_every_paired_target(fleet: Fleet) -> None:
    paired = {t["name"] for t in fleet.json("target list --json") if t["paired"]}
    assert "s1" not in paired
    fleet.ok("job add everywhere --bulk --schedule @daily --command uptime")
    assert targets_of(fleet.json("job show everywhere --json")) == dict.fromkeys(paired, True)


def test_a_bulk_job_with_a_selector_covers_only_matching_targets(fleet: Fleet) -> None:
    fleet.ok("job add prod-only --bulk --selector env=prod --schedule @daily --command df")
    job = fleet.json("job show prod-only --json")
    assert (job["selector"], targets_of(job)) == ("env=prod", {"web1": True})


def test_an_individual_job_runs_on_its_target_only(fleet: Fleet) -> None:
    assert "(individual, on web2)" in succeeded(fleet.ran(ROTATE))
    job = fleet.json("job show rotate --json")
    assert (job["target"], targets_of(job)) == ("web2", {"web2": True})


def test_job_show_json_gives_the_schedule_time_zone_and_command(fleet: Fleet) -> None:
    job = fleet.json("job show rotate --json")
    assert (job["schedule"], job["timezone"], job["command"]) == (
        "0 3 * * *",
        "UTC",
        "logrotate /etc/lr.conf",
    )


def test_job_list_bulk_lists_only_bulk_jobs(fleet: Fleet) -> None:
    jobs = by_name(fleet.json("job list --bulk --json"))
    assert "backup" in jobs
    assert {job["origin"] for job in jobs.values()} == {"bulk"}


def test_job_list_individual_lists_only_individual_jobs(fleet: Fleet) -> None:
    jobs = by_name(fleet.json("job list --individual --json"))
    assert "rotate" in jobs
    assert {job["origin"] for job in jobs.values()} == {"individual"}


def test_job_list_target_lists_the_jobs_on_that_target(fleet: Fleet) -> None:
    on_web1 = by_name(fleet.json("job list --target web1 --json"))
    assert "backup" in on_web1
    assert "rotate" not in on_web1


def test_job_edit_changes_the_job_on_every_target_at_once(fleet: Fleet) -> None:
    fleet.ok(f"job add to-edit {site_job('to-edit')}")
    out = fleet.ok("job edit to-edit --schedule '30 4 * * *' --command 'echo new'")
    assert out.startswith("job to-edit updated (command, schedule)")
    job = fleet.json("job show to-edit --json")
    assert (job["schedule"], job["command"]) == ("30 4 * * *", "echo new")
    next_fires = {a["target"]: a["next_fire_at"][11:] for a in job["assignments"]}
    assert next_fires == {"web1": "04:30:00+00:00", "web2": "04:30:00+00:00"}


def test_job_disable_on_one_target_pauses_only_there(fleet: Fleet) -> None:
    fleet.ok(f"job add to-pause {site_job('to-pause')}")
    out = fleet.ok("job disable to-pause --target web1")
    assert out == "job to-pause disabled on web1 (1/2 enabled)\n"
    assert targets_of(fleet.json("job show to-pause --json")) == {"web1": False, "web2": True}


def test_job_disable_pauses_the_job_on_every_target(fleet: Fleet) -> None:
    fleet.ok(f"job add to-pause-all {site_job('to-pause-all')}")
    assert fleet.ok("job disable to-pause-all") == "job to-pause-all disabled (0/2 enabled)\n"


def test_job_enable_resumes_the_job_on_every_target(fleet: Fleet) -> None:
    fleet.ok(f"job add to-resume {site_job('to-resume')} --disabled-on web1 --disabled-on web2")
    assert fleet.ok("job enable to-resume") == "job to-resume enabled (2/2 enabled)\n"


def test_job_rm_deletes_the_job_from_every_target(fleet: Fleet) -> None:
    fleet.ok(f"job add to-delete {site_job('to-delete')}")
    assert fleet.ok("job rm to-delete") == "job to-delete removed (2 assignment(s))\n"
    assert_refused(fleet.run("job show to-delete"), "job to-delete does not exist")


# refused commands: exit 2, one message naming the field, the value and what is allowed


@pytest.mark.parametrize(
    ("command", "fragments"),
    [
        ("target show nope", ["target nope does not exist"]),
        ("job show nope", ["job nope does not exist"]),
        ("target unpair nope", ["target nope does not exist"]),
        ("target add web1 --local", ["target web1 already exists"]),
        ("job add backup --bulk --schedule @daily --command true", ["job backup already exists"]),
        (
            "job add bad-cron --bulk --schedule '60 * * * *' --command true",
            ["minute: 60 is out of range 0-59"],
        ),
        (
            "job add bad-tz --bulk --schedule @daily --command true --tz Mars/Olympus",
            ["timezone: 'Mars/Olympus' is not a known time zone", "IANA"],
        ),
        (
            f"job add too-long --bulk --schedule @daily --command {'x' * 513}",
            ["command: is 513 characters long; at most 512 are allowed"],
        ),
        (
            "job add bad-sel --bulk --selector env --schedule @daily --command true",
            ['selector: "env" is not key=value'],
        ),
        (
            "target add bad-label --local --label Env=prod",
            ['labels: key "Env" is not valid', "allowed: lowercase letters"],
        ),
        (
            "target add 'Bad Name' --local",
            ["name: 'Bad Name' is not a valid name", "allowed: lowercase letters"],
        ),
        (
            "target add no-host --user deploy --key keys/client_ed25519",
            ["host: an ssh target needs a host, a user and a private key (missing: host)"],
        ),
        (
            "target add bad-key --host 127.0.0.1 --user deploy --key keys/missing_ed25519",
            ["key: cannot read keys/missing_ed25519: No such file or directory"],
        ),
    ],
    ids=[
        "unknown-target",
        "unknown-job",
        "unpair-unknown-target",
        "duplicate-target",
        "duplicate-job",
        "bad-schedule",
        "bad-time-zone",
        "command-too-long",
        "bad-selector",
        "bad-label",
        "bad-target-name",
        "ssh-target-without-host",
        "unreadable-key-file",
    ],
)
def test_bad_input_exits_2_with_a_message_naming_the_problem(
    fleet: Fleet, command: str, fragments: list[str]
) -> None:
    assert_refused(fleet.run(command), *fragments)
