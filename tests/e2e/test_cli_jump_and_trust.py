"""`target add --jump`, `--via`, `target trust import` and `target trust list` through the
installed console script, against a forwarding-only bastion sshd and the session's sshd."""

from __future__ import annotations

import subprocess

import pytest

from e2e.conftest import Fleet, Zygote, assert_refused
from fixtures.sshd import SshServer, forwarded_to

pytestmark = pytest.mark.sshd


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory, zygote: Zygote, sshd: SshServer) -> Fleet:
    the_fleet = Fleet(tmp_path_factory.mktemp("jump-cli"), zygote)
    keys = the_fleet.workdir / "keys"
    keys.mkdir()
    (keys / "client").write_text(sshd.client_private_key)
    (keys / "client").chmod(0o600)
    the_fleet.ok("init")
    return the_fleet


def ssh_add(server: SshServer, name: str, *extra: str) -> str:
    return (
        f"target add {name} --host {server.host} --port {server.port} --user {server.user} "
        f"--key keys/client {' '.join(extra)}"
    )


def test_a_target_is_added_through_a_jump_host_and_listed_with_its_path(
    fleet: Fleet, sshd: SshServer, bastion: SshServer
) -> None:
    fleet.ok(ssh_add(bastion, "b1", "--jump", "--trust-on-first-use"))
    before = forwarded_to(bastion, sshd.port)
    out = fleet.ok(ssh_add(sshd, "t42", "--via b1", "--trust-on-first-use"))

    assert "target t42 paired" in out
    assert forwarded_to(bastion, sshd.port) > before
    listed = {t["name"]: t for t in fleet.json("target list --json")}
    assert (listed["t42"]["via"], listed["b1"]["kind"]) == ("b1", "jump")
    assert f"{sshd.host}:{sshd.port} via b1" in fleet.ok("target list")
    assert_refused(fleet.run("target unpair b1"), "jump host b1 is still used by 1 target(s): t42")


def test_a_via_that_does_not_exist_is_refused_with_exit_2(fleet: Fleet, sshd: SshServer) -> None:
    assert_refused(
        fleet.run(ssh_add(sshd, "t9", "--via nowhere", "--no-verify", "--allow-same-host")),
        "via: there is no target named nowhere",
    )
    assert "t9" not in fleet.ok("target list")


def test_trust_import_pins_from_keyscan_output_and_trust_list_shows_it(
    fleet: Fleet, sshd: SshServer
) -> None:
    fleet.ok(ssh_add(sshd, "scanned", "--no-verify", "--allow-same-host"))
    scan = subprocess.run(
        ["ssh-keyscan", "-p", str(sshd.port), "-t", "ed25519", sshd.host],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    (fleet.workdir / "scan.txt").write_text(scan)

    dry = fleet.ok("target trust import scan.txt --dry-run")
    assert "would pin" in dry
    out = fleet.ok("target trust import scan.txt")
    assert "pinned 1" in out
    states = {s["name"]: s for s in fleet.json("target trust list --json")}
    assert states["scanned"]["state"] == "pinned"
    assert states["scanned"]["fingerprint"] == sshd.host_key_fingerprint


def test_a_host_ca_by_label_is_added_listed_and_refused_when_malformed(
    fleet: Fleet, sshd: SshServer
) -> None:
    fleet.ok(ssh_add(sshd, "lyon1", "--no-verify", "--allow-same-host", "--label site=lyon"))
    (fleet.workdir / "ca.pub").write_text(sshd.host_key_line + " some-ca\n")
    (fleet.workdir / "bad.pub").write_text("not a key\n")
    assert_refused(fleet.run("target trust ca add --label site=lyon --ca-file bad.pub"), "ca: ")
    assert_refused(fleet.run("target trust ca add --label lyon --ca-file ca.pub"), "label: ")
    assert fleet.json("target trust ca list --json") == []  # nothing half-saved

    out = fleet.ok("target trust ca add --label site=lyon --ca-file ca.pub")

    assert "attached to site=lyon: 1 target(s) now CA-trusted" in out
    states = {s["name"]: s for s in fleet.json("target trust list --json")}
    assert (states["lyon1"]["state"], states["lyon1"]["ca_from"]) == (
        "CA-trusted",
        "label site=lyon",
    )
    assert "CA-trusted (label site=lyon)" in fleet.ok("target trust list")
    fleet.ok("target trust ca remove --label site=lyon")
    after = {s["name"]: s for s in fleet.json("target trust list --json")}
    assert (after["lyon1"]["state"], after["lyon1"]["ca_from"]) == ("not yet trusted", None)
