"""Node identity: a stable id per host, a fingerprint per database cluster, no raw machine id."""

from __future__ import annotations

import hashlib
from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest

from fleetcron.coordination.identity import (
    NodeIdentity,
    machine_hash,
    node_identity,
    normalize_endpoint,
    read_machine_id,
)
from fleetcron.errors import CoordinationError, InvalidInput

# Made-up ids in the format systemd writes; db ids as PostgreSQL's pg_control_system() gives them.
MACHINE_A = "4c1d3e2f9a8b47c6b5d4e3f2a1b0c9d8"
MACHINE_B = "0f9e8d7c6b5a49382716f5e4d3c2b1a0"
DB_1 = "7301234567890123456"
DB_2 = "7309876543210987654"


def identity(machine_id: str = MACHINE_A, db_system_id: str = DB_1) -> NodeIdentity:
    return node_identity(machine_id, db_system_id, "web1", "0.1.0", "http://10.0.0.5:8080")


# machine hash and identity


def test_the_machine_hash_is_an_hmac_under_the_application_key_not_a_plain_hash() -> None:
    digest = machine_hash(MACHINE_A)
    assert len(digest) == 64
    assert digest != hashlib.sha256(MACHINE_A.encode()).hexdigest()
    assert digest != machine_hash(MACHINE_A, app_key=b"another application")


def test_the_machine_hash_ignores_the_trailing_newline_of_the_file() -> None:
    assert machine_hash(MACHINE_A + "\n") == machine_hash(MACHINE_A)


def test_the_same_machine_id_gives_the_same_node_id_and_fingerprint() -> None:
    first, second = identity(), identity()
    assert (first.node_id, first.fingerprint) == (second.node_id, second.fingerprint)
    assert first.node_id == machine_hash(MACHINE_A)[:16]


def test_another_database_cluster_keeps_the_node_id_but_changes_the_fingerprint() -> None:
    on_db_1, on_db_2 = identity(db_system_id=DB_1), identity(db_system_id=DB_2)
    assert on_db_1.node_id == on_db_2.node_id
    assert on_db_1.fingerprint != on_db_2.fingerprint


def test_another_machine_id_changes_the_node_id_and_the_fingerprint() -> None:
    a, b = identity(MACHINE_A), identity(MACHINE_B)
    assert a.node_id != b.node_id
    assert a.fingerprint != b.fingerprint


def test_the_fingerprint_is_the_sha256_of_the_machine_hash_and_the_database_id() -> None:
    expected = hashlib.sha256(f"{machine_hash(MACHINE_A)}:{DB_1}".encode()).hexdigest()
    assert identity().fingerprint == expected


def test_the_raw_machine_id_appears_nowhere_in_the_identity_its_repr_or_its_dict() -> None:
    node = identity()
    assert MACHINE_A not in repr(node)
    assert MACHINE_A not in str(node)
    assert all(MACHINE_A not in value for value in node.as_dict().values())
    assert not hasattr(node, "__dict__")  # slots: no hidden attribute can hold it


def test_an_uppercase_machine_id_names_the_same_node_as_its_lowercase_form() -> None:
    assert identity(MACHINE_A.upper()) == identity(MACHINE_A)


def test_the_identity_dict_holds_exactly_the_public_fields() -> None:
    node = identity()
    assert node.as_dict() == {
        "node_id": node.node_id,
        "fingerprint": node.fingerprint,
        "hostname": "web1",
        "version": "0.1.0",
        "endpoint": "http://10.0.0.5:8080",
        "db_system_id": DB_1,
    }


def test_the_identity_is_frozen() -> None:
    with pytest.raises(FrozenInstanceError):
        identity().node_id = "0" * 16  # type: ignore[misc]


def test_the_identity_keeps_its_endpoint_in_canonical_form() -> None:
    node = node_identity(MACHINE_A, DB_1, "web1", "0.1.0", "HTTPS://Web1.Example.com:443/")
    assert node.endpoint == "https://web1.example.com"


def test_an_identity_survives_the_trip_through_its_dict() -> None:
    node = identity()
    assert NodeIdentity.from_dict(node.as_dict()) == node


@pytest.mark.parametrize(
    "change",
    [
        {"node_id": "not hex"},
        {"fingerprint": "ab" * 31},
        {"endpoint": "HTTP://10.0.0.5:8080/"},
        {"hostname": ""},
        {"version": 3},
        {"extra": "field"},
    ],
)
def test_a_malformed_identity_from_a_peer_is_refused(change: dict[str, object]) -> None:
    with pytest.raises(CoordinationError, match="node identity"):
        NodeIdentity.from_dict({**identity().as_dict(), **change})


@pytest.mark.parametrize(
    "machine_id", ["", "uninitialized", "0" * 32, MACHINE_A[:31], MACHINE_A + "0", "g" * 32]
)
def test_a_malformed_machine_id_is_refused_without_repeating_it(machine_id: str) -> None:
    with pytest.raises(InvalidInput) as info:
        identity(machine_id)
    assert info.value.field == "machine_id"
    assert info.value.value == "**********"
    assert not machine_id or machine_id not in str(info.value)


@pytest.mark.parametrize(
    ("field", "args"),
    [
        ("db_system_id", (MACHINE_A, "", "web1", "0.1.0", "http://h")),
        ("db_system_id", (MACHINE_A, "has space", "web1", "0.1.0", "http://h")),
        ("hostname", (MACHINE_A, DB_1, " ", "0.1.0", "http://h")),
        ("version", (MACHINE_A, DB_1, "web1", "", "http://h")),
        ("endpoint", (MACHINE_A, DB_1, "web1", "0.1.0", "ftp://h")),
    ],
)
def test_a_bad_identity_field_is_refused_by_name(
    field: str, args: tuple[str, str, str, str, str]
) -> None:
    with pytest.raises(InvalidInput) as info:
        node_identity(*args)
    assert info.value.field == field


# reading /etc/machine-id


def test_it_reads_a_machine_id_as_systemd_writes_it(tmp_path: Path) -> None:
    path = tmp_path / "machine-id"
    path.write_text(MACHINE_A + "\n")
    assert read_machine_id(path) == MACHINE_A


def test_it_reads_a_dbus_machine_id_and_lowercases_it(tmp_path: Path) -> None:
    path = tmp_path / "dbus-machine-id"
    path.write_text(MACHINE_A.upper() + "\n")
    assert read_machine_id(path) == MACHINE_A


def test_a_missing_machine_id_file_is_named_with_the_clone_advice(tmp_path: Path) -> None:
    path = tmp_path / "machine-id"
    with pytest.raises(CoordinationError) as info:
        read_machine_id(path)
    message = str(info.value)
    assert str(path) in message
    assert "does not exist" in message
    assert "disk clone must get a new one" in message
    assert "systemd-machine-id-setup" in message


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"uninitialized\n",
        b"0" * 32 + b"\n",
        b"abc\n",
        MACHINE_A.encode() + b"ff\n",
        b"\xff" * 32,
    ],
)
def test_an_invalid_machine_id_file_is_named_with_the_clone_advice_but_not_quoted(
    tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "machine-id"
    path.write_bytes(content)
    with pytest.raises(CoordinationError) as info:
        read_machine_id(path)
    message = str(info.value)
    assert str(path) in message
    assert "is not valid" in message
    assert "systemd-machine-id-setup" in message
    assert MACHINE_A not in message


def test_an_unreadable_machine_id_path_is_named_with_the_clone_advice(tmp_path: Path) -> None:
    with pytest.raises(CoordinationError) as info:
        read_machine_id(tmp_path)  # a directory
    assert str(tmp_path) in str(info.value)
    assert "systemd-machine-id-setup" in str(info.value)


# endpoints


@pytest.mark.parametrize(
    ("url", "canonical"),
    [
        ("http://10.0.0.5:8080", "http://10.0.0.5:8080"),
        ("http://10.0.0.5:8080/", "http://10.0.0.5:8080"),
        ("HTTP://Node1.Example.COM:8080", "http://node1.example.com:8080"),
        ("http://node1:80/", "http://node1"),
        ("https://node1:443", "https://node1"),
        ("https://node1:80", "https://node1:80"),
        ("http://node1:443", "http://node1:443"),
        ("https://node1.example.com.", "https://node1.example.com"),
        ("  https://node1/  ", "https://node1"),
        ("https://node1/fleetcron//", "https://node1/fleetcron"),
        ("https://node1/Fleetcron", "https://node1/Fleetcron"),
        ("http://[FE80:0:0:0:0:0:0:1]:8080/", "http://[fe80::1]:8080"),
        ("https://[::1]:443", "https://[::1]"),
    ],
)
def test_it_normalizes_an_endpoint(url: str, canonical: str) -> None:
    assert normalize_endpoint(url) == canonical


def test_a_normalized_endpoint_stays_the_same_when_normalized_again() -> None:
    once = normalize_endpoint("HTTPS://Node1:443/base/")
    assert normalize_endpoint(once) == once


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("", "must start with http:// or https://"),
        ("node1:8080", "must start with http:// or https://"),
        ("ftp://node1", "must start with http:// or https://"),
        ("http://", "does not name a valid host"),
        ("http://:8080", "does not name a valid host"),
        ("http://user:pw@node1", "must not contain a user name or password"),
        ("http://node1/?x=1", "must not contain a query or fragment"),
        ("http://node1/#top", "must not contain a query or fragment"),
        ("http://node1?", "must not contain a query or fragment"),
        ("http://node1:99999", "is not a valid URL"),
        ("http://node1:port", "is not a valid URL"),
        ("http://node1:0", "has port 0"),
        ("http://-node1", "does not name a valid host"),
        ("http://no de", "does not name a valid host"),
        ("http://nöde", "does not name a valid host"),
        ("http://[fe80::1", "is not a valid URL"),
        ("http://node1/a b", "not allowed in its path"),
        ("http://999.0.0.5", "does not name a valid host"),
        ("http://10.0.0.05", "does not name a valid host"),
    ],
)
def test_it_refuses_a_bad_endpoint_and_names_the_field(url: str, reason: str) -> None:
    with pytest.raises(InvalidInput, match=r"^endpoint: ") as info:
        normalize_endpoint(url)
    assert reason in str(info.value)
    assert (info.value.field, info.value.value) == ("endpoint", url)


def test_it_refuses_an_endpoint_that_is_not_text() -> None:
    with pytest.raises(InvalidInput) as info:
        normalize_endpoint(8080)  # type: ignore[arg-type]
    assert info.value.field == "endpoint"


def test_every_public_name_is_defined() -> None:
    from fleetcron.coordination import identity

    assert all(hasattr(identity, name) for name in identity.__all__)
