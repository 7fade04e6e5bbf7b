"""The target lifecycle through the installed console script, against real sshd servers:
`target edit`, `target repin` after a server got a new host key, `target pause`/`resume`,
`target rm --with-jobs`, the same-host check and the local-target trust boundary.

The tests share one data dir; each works on targets of its own. A "reinstalled" server is
simulated by pointing a target at the second sshd, which presents another host key.
"""

from __future__ import annotations

import os
import pty
import sqlite3
import subprocess
from pathlib import Path

import pytest

from e2e.conftest import (
    FLEETCRON,
    Fleet,
    Result,
    Zygote,
    assert_refused,
    describe,
    environment,
    succeeded,
)
from fixtures.sshd import SshServer
from fleetcron.cli.output import exit_code_for
from fleetcron.errors import PermissionDenied

pytestmark = pytest.mark.sshd


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory, zygote: Zygote, sshd: SshServer) -> Fleet:
    """An initialized data dir with the operator olivia, the local target box and the
    client key at keys/client."""
    the_fleet = Fleet(tmp_path_factory.mktemp("lifecycle"), zygote)
    keys = the_fleet.workdir / "keys"
    keys.mkdir()
    (keys / "client").write_text(sshd.client_private_key)
    (keys / "client").chmod(0o600)
    the_fleet.ok("init")
    the_fleet.ok("user add olivia --role operator")
    the_fleet.ok("target add box --local")
    return the_fleet


def ssh_add(server: SshServer, name: str, *extra: str) -> str:
    return (
        f"target add {name} --host {server.host} --port {server.port} --user {server.user} "
        f"--key keys/client {' '.join(extra)}"
    )


def point_at(fleet: Fleet, name: str, server: SshServer) -> None:
    """The target's address now answers with this server (a reinstall: another host key)."""
    with sqlite3.connect(fleet.data_dir / "fleetcron.db") as conn:
        conn.execute("UPDATE targets SET port = ? WHERE name = ?", (server.port, name))


def failed(result: Result, exit_code: int, *fragments: str) -> None:
    assert result.returncode == exit_code, describe(result)
    assert "Traceback" not in result.stderr, describe(result)
    for fragment in fragments:
        assert fragment in result.stderr, describe(result)


# -- repin --------------------------------------------------------------------------------


def test_a_reinstalled_server_is_re_pinned_after_showing_both_fingerprints(
    fleet: Fleet, sshd: SshServer, sshd_other_host_key: SshServer
) -> None:
    fleet.ok(ssh_add(sshd, "pbx4", "--trust-on-first-use"))
    point_at(fleet, "pbx4", sshd_other_host_key)

    # Every way of pairing refuses the new key, and says what works instead.
    for command in ("target pair pbx4", "target pair pbx4 --trust-on-first-use"):
        failed(fleet.run(command), 1, "host key mismatch", "`fleetcron target repin pbx4")
    failed(
        fleet.run(f"target pair pbx4 --host-key '{sshd_other_host_key.host_key_line}'"),
        2,
        "Pairing never replaces a pinned key",
        "`fleetcron target repin pbx4",
    )

    unconfirmed = fleet.run("target repin pbx4 --trust-on-first-use")
    failed(unconfirmed, 2, "error: yes:", "give --yes")
    assert sshd.host_key_fingerprint in unconfirmed.stdout
    assert sshd_other_host_key.host_key_fingerprint in unconfirmed.stdout
    assert (
        fleet.json("target show pbx4 --json")["host_key_fingerprint"] == sshd.host_key_fingerprint
    )

    pinned = fleet.ok("target repin pbx4 --trust-on-first-use --yes")

    assert f"host key {sshd_other_host_key.host_key_fingerprint} pinned" in pinned
    assert "paired" in fleet.ok("target pair pbx4")
    [event] = fleet.json("audit list --action target.repin --json")
    assert event["detail"]["old_host_key"] == sshd.host_key_fingerprint
    assert event["detail"]["new_host_key"] == sshd_other_host_key.host_key_fingerprint


def test_repin_needs_a_new_key_or_trust_on_first_use(fleet: Fleet, sshd: SshServer) -> None:
    fleet.ok(ssh_add(sshd, "pbx6", f"--host-key '{sshd.host_key_line}' --no-verify"))

    assert_refused(fleet.run("target repin pbx6 --yes"), "host key: give the server's new host key")
    assert_refused(fleet.run("target repin pbx6 --trust-on-first-use --yes"), "nothing to re-pin")


# -- edit ---------------------------------------------------------------------------------


def test_an_edit_of_a_paired_target_that_fails_its_check_changes_nothing(
    fleet: Fleet, sshd: SshServer
) -> None:
    fleet.ok(ssh_add(sshd, "pbx1", "--trust-on-first-use --allow-same-host"))

    failed(fleet.run("target edit pbx1 --port 1"), 1, "was not changed", "--no-verify")

    shown = fleet.json("target show pbx1 --json")
    assert (shown["port"], shown["paired"]) == (sshd.port, True)


def test_an_unchecked_edit_unpairs_and_labels_and_notes_are_replaced(
    fleet: Fleet, sshd: SshServer
) -> None:
    fleet.ok(ssh_add(sshd, "pbx2", "--trust-on-first-use --allow-same-host --label a=1"))

    out = fleet.ok("target edit pbx2 --label role=pbx --notes 'rack 4'")
    unchecked = fleet.ok("target edit pbx2 --port 2 --no-verify --allow-same-host")

    assert out.startswith("target pbx2 changed: labels, notes")
    assert "run `fleetcron target pair pbx2`" in unchecked
    shown = fleet.json("target show pbx2 --json")
    assert (shown["labels"], shown["notes"], shown["port"], shown["paired"]) == (
        {"role": "pbx"},
        "rack 4",
        2,
        False,
    )


def test_an_edit_that_changes_nothing_exits_2(fleet: Fleet) -> None:
    assert_refused(fleet.run("target edit box --notes ''"), "nothing to change on target box")


# -- pause and resume ---------------------------------------------------------------------


def test_pause_and_resume_show_in_list_and_show(fleet: Fleet) -> None:
    fleet.ok("target add to-pause --local")

    paused = fleet.ok("target pause to-pause --reason 'new disk'")
    listed = fleet.ok("target list")
    shown = fleet.json("target show to-pause --json")
    resumed = fleet.ok("target resume to-pause")

    assert "paused" in paused
    assert "paused (new disk)" in listed
    assert (shown["paused"], shown["paused_reason"], shown["paused_by"]) == (
        True,
        "new disk",
        "admin",
    )
    assert "jobs continue from their next slot" in resumed
    assert fleet.json("target show to-pause --json")["paused"] is False
    assert [e["action"] for e in fleet.json("audit list --target to-pause --json")][:2] == [
        "target.resume",
        "target.pause",
    ]


def test_a_pause_reason_over_one_line_exits_2_naming_the_field(fleet: Fleet) -> None:
    assert_refused(fleet.run("target pause box --reason 'a\nb'"), "reason: must be one line")


# -- rm --with-jobs -----------------------------------------------------------------------


def test_rm_with_jobs_lists_them_asks_and_removes_them(fleet: Fleet) -> None:
    fleet.ok("target add to-remove --local")
    fleet.ok("job add rm-backup --target to-remove --schedule @daily --command 'echo b'")

    plain = fleet.run("target rm to-remove")
    unconfirmed = fleet.run("target rm to-remove --with-jobs")
    removed = fleet.ok("target rm to-remove --with-jobs --yes")

    failed(
        plain, 2, "1 individual job(s): rm-backup", "`fleetcron target rm to-remove --with-jobs`"
    )
    failed(unconfirmed, 2, "give --yes")
    assert "rm-backup" in unconfirmed.stdout
    assert removed.endswith("target to-remove removed with 1 individual job(s)\n")
    assert_refused(fleet.run("job show rm-backup"), "job rm-backup does not exist")


# -- same host ----------------------------------------------------------------------------


def test_a_second_target_on_the_same_server_is_refused_unless_allowed(
    fleet: Fleet, sshd: SshServer
) -> None:
    add = f"--host 192.0.2.9 --user root --key keys/client --host-key '{sshd.host_key_line}'"
    fleet.ok(f"target add same-a {add} --no-verify")

    refused = fleet.run(f"target add same-b {add} --no-verify")
    allowed = fleet.run(f"target add same-b {add} --no-verify --allow-same-host")

    assert_refused(
        refused,
        "host: target same-a already uses root@192.0.2.9:22",
        "to add it anyway, give --allow-same-host",
    )
    succeeded(allowed)


# -- local targets ------------------------------------------------------------------------


def test_an_operator_may_not_add_a_local_target(fleet: Fleet) -> None:
    result = fleet.run("target add op-local --local --as olivia")

    assert_refused(
        result,
        "olivia (operator) may not add a local target",
        exit_code=exit_code_for(PermissionDenied("")),
    )


def test_local_targets_are_refused_when_the_setting_is_off(fleet: Fleet) -> None:
    # An empty variable counts as unset: the default, local targets off.
    result = fleet.run("target add off-local --local", FLEETCRON_ALLOW_LOCAL_TARGETS="")

    assert_refused(result, "kind: local targets are disabled", "FLEETCRON_ALLOW_LOCAL_TARGETS")


def test_a_fresh_install_refuses_local_targets(tmp_path: Path, zygote: Zygote) -> None:
    """Negative control for the fixtures: without the test setting, the product default."""
    off = {"FLEETCRON_ALLOW_LOCAL_TARGETS": ""}
    succeeded(zygote.run("init", workdir=tmp_path, env=off))

    result = zygote.run("target", "add", "here", "--local", workdir=tmp_path, env=off)

    assert_refused(result, "local targets are disabled on this server")


def answer_in_a_terminal(fleet: Fleet, command: list[str], answer: str) -> Result:
    """Run ``fleetcron COMMAND`` with a pseudo-terminal as stdin and type ``answer``."""
    primary, secondary = pty.openpty()
    try:
        process = subprocess.Popen(
            [FLEETCRON, *command],
            cwd=fleet.workdir,
            env=environment(fleet.workdir),
            stdin=secondary,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        os.write(primary, answer.encode() + b"\n")
        stdout, stderr = process.communicate(timeout=120)
    finally:
        os.close(primary)
        os.close(secondary)
    return subprocess.CompletedProcess([FLEETCRON, *command], process.returncode, stdout, stderr)


def test_in_a_terminal_repin_asks_and_a_no_pins_nothing(
    fleet: Fleet, sshd: SshServer, sshd_other_host_key: SshServer
) -> None:
    fleet.ok(ssh_add(sshd, "pbx7", "--trust-on-first-use --allow-same-host"))
    point_at(fleet, "pbx7", sshd_other_host_key)
    repin = ["target", "repin", "pbx7", "--trust-on-first-use"]

    declined = answer_in_a_terminal(fleet, repin, "n")
    kept = fleet.json("target show pbx7 --json")["host_key_fingerprint"]
    accepted = answer_in_a_terminal(fleet, repin, "y")

    assert declined.returncode == 1, describe(declined)
    assert f"Pin {sshd_other_host_key.host_key_fingerprint} for pbx7?" in declined.stderr
    assert kept == sshd.host_key_fingerprint
    assert accepted.returncode == 0, describe(accepted)
    assert fleet.json("target show pbx7 --json")["host_key_fingerprint"] == (
        sshd_other_host_key.host_key_fingerprint
    )
