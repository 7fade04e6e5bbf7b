"""known_hosts and ssh-keyscan lines read for pinning, hashed ones made by OpenSSH's own
``ssh-keygen -H``."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from fleetcron.executors.known_hosts import keys_for, parse_known_hosts


def keypair(directory: Path, name: str, kind: str) -> str:
    path = directory / name
    subprocess.run(
        ["ssh-keygen", "-q", "-t", kind, "-N", "", "-C", "x", "-f", str(path)], check=True
    )
    return " ".join(path.with_suffix(".pub").read_text().split()[:2])


@pytest.fixture
def keys(tmp_path: Path) -> dict[str, str]:
    return {
        "ed": keypair(tmp_path, "ed", "ed25519"),
        "ec": keypair(tmp_path, "ec", "ecdsa"),
    }


def test_plain_names_ports_and_patterns_match_as_openssh_matches_them(
    keys: dict[str, str],
) -> None:
    text = (
        f"pbx1.example,10.0.0.1 {keys['ed']}\n"
        f"[pbx2.example]:2222 {keys['ec']}\n"
        f"*.lyon.example,!gw.lyon.example {keys['ed']}\n"
    )
    known = parse_known_hosts(text)
    assert keys_for(known, "pbx1.example", 22) == [keys["ed"]]
    assert keys_for(known, "10.0.0.1", 22) == [keys["ed"]]
    assert keys_for(known, "pbx2.example", 2222) == [keys["ec"]]
    assert keys_for(known, "a.lyon.example", 22) == [keys["ed"]]
    # Controls: another port, a negated name, an unknown host.
    assert keys_for(known, "pbx2.example", 22) == []
    assert keys_for(known, "gw.lyon.example", 22) == []
    assert keys_for(known, "pbx3.example", 22) == []


def test_hashed_entries_from_ssh_keygen_match_their_host_only(
    keys: dict[str, str], tmp_path: Path
) -> None:
    path = tmp_path / "known_hosts"
    path.write_text(f"pbx1.example {keys['ed']}\n[pbx2.example]:2222 {keys['ec']}\n")
    subprocess.run(["ssh-keygen", "-H", "-f", str(path)], check=True, capture_output=True)
    hashed = path.read_text()
    assert "pbx1.example" not in hashed and hashed.startswith("|1|")
    known = parse_known_hosts(hashed)
    assert keys_for(known, "pbx1.example", 22) == [keys["ed"]]
    assert keys_for(known, "pbx2.example", 2222) == [keys["ec"]]
    assert keys_for(known, "pbx1.example", 2222) == []
    assert keys_for(known, "pbx9.example", 22) == []


def test_keyscan_output_prefers_ed25519_and_skips_comments_markers_and_bad_lines(
    keys: dict[str, str],
) -> None:
    text = (
        "# pbx1.example:22 SSH-2.0-OpenSSH_9.6\n"
        f"pbx1.example {keys['ec']}\n"
        f"pbx1.example {keys['ed']}\n"
        f"@cert-authority *.example {keys['ed']}\n"
        "pbx1.example ssh-ed25519 not-base64\n"
        "garbage\n"
    )
    known = parse_known_hosts(text)
    assert keys_for(known, "pbx1.example", 22) == [keys["ed"], keys["ec"]]
    assert known.markers == 1
    assert known.bad_lines == (5, 6)
