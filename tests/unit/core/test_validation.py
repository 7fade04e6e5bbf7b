"""Rules for the fields operators type; every error names the field and what is allowed."""

from __future__ import annotations

import pytest

from fleetcron.core.validation import (
    NAME_RULE,
    validate_choice,
    validate_command,
    validate_host,
    validate_int,
    validate_name,
    validate_password,
    validate_port,
    validate_user,
)
from fleetcron.errors import InvalidInput

# names


@pytest.mark.parametrize("name", ["web1", "db-2.prod_a", "0day", "n" * 64])
def test_it_accepts_a_valid_name(name: str) -> None:
    assert validate_name(name) == name


@pytest.mark.parametrize("name", ["Bad Name", "Web1", "-lead", ".hidden", "", "n" * 65, "a/b"])
def test_it_rejects_a_bad_name_and_says_what_names_may_hold(name: str) -> None:
    with pytest.raises(InvalidInput) as info:
        validate_name(name)
    assert str(info.value) == f"name: {name!r} is not a valid name; allowed: {NAME_RULE}"
    assert (info.value.field, info.value.value, info.value.allowed) == ("name", name, NAME_RULE)


def test_it_names_the_field_it_was_given_for_a_bad_name() -> None:
    with pytest.raises(InvalidInput, match=r"^token name: ") as info:
        validate_name("Bad", field="token name")
    assert info.value.field == "token name"


# commands


def test_it_keeps_a_command_verbatim() -> None:
    command = "  cd /srv && ./run.sh --flag 'a b' | tee log  \n"
    assert validate_command(command, max_length=512) == command


@pytest.mark.parametrize("command", ["", "   ", "\n\t"])
def test_it_rejects_an_empty_command(command: str) -> None:
    with pytest.raises(InvalidInput, match=r"^command: must not be empty$") as info:
        validate_command(command, max_length=512)
    assert info.value.field == "command"


def test_it_rejects_a_command_with_a_nul_character() -> None:
    with pytest.raises(InvalidInput, match=r"^command: contains a NUL character$"):
        validate_command("echo a\x00b", max_length=512)


def test_it_accepts_a_command_of_the_maximum_length() -> None:
    assert len(validate_command("x" * 512, max_length=512)) == 512


def test_it_rejects_a_command_over_the_maximum_length_saying_both_lengths() -> None:
    with pytest.raises(InvalidInput) as info:
        validate_command("x" * 513, max_length=512)
    assert str(info.value) == "command: is 513 characters long; at most 512 are allowed"
    assert info.value.allowed == "at most 512 characters"


# hosts, users, ports


@pytest.mark.parametrize("host", ["db.example.com", "10.0.0.1", "::1", "h" * 255])
def test_it_accepts_a_host_name_or_address(host: str) -> None:
    assert validate_host(host) == host


@pytest.mark.parametrize("host", ["", "two words", "root@db", "h" * 256, "db\n"])
def test_it_rejects_a_bad_host(host: str) -> None:
    with pytest.raises(InvalidInput, match=r"^host: .* is not a host name or address$") as info:
        validate_host(host)
    assert (info.value.field, info.value.allowed) == ("host", "a DNS name or an IP address")


@pytest.mark.parametrize("user", ["deploy", "_svc", "Admin.2", "u" * 32])
def test_it_accepts_a_valid_user_name(user: str) -> None:
    assert validate_user(user) == user


@pytest.mark.parametrize("user", ["", "1root", "two words", "u" * 33, "a@b"])
def test_it_rejects_a_bad_user_name(user: str) -> None:
    with pytest.raises(InvalidInput, match=f"^user: {user!r} is not a valid user name$") as info:
        validate_user(user)
    assert info.value.field == "user"
    assert "at most 32" in str(info.value.allowed)


@pytest.mark.parametrize("port", [1, 22, 65535])
def test_it_accepts_a_port_in_range(port: int) -> None:
    assert validate_port(port) == port


@pytest.mark.parametrize("port", [0, -1, 65536])
def test_it_rejects_a_port_out_of_range(port: int) -> None:
    with pytest.raises(InvalidInput) as info:
        validate_port(port)
    assert str(info.value) == f"port: {port} is out of range 1-65535"
    assert (info.value.field, info.value.allowed) == ("port", "1-65535")


# passwords, choices, numbers


def test_it_accepts_a_password_of_eight_characters() -> None:
    assert validate_password("12345678") == "12345678"


def test_it_rejects_a_short_password_without_repeating_it() -> None:
    with pytest.raises(InvalidInput, match=r"^password: must be at least 8 characters long$") as i:
        validate_password("hunter2")
    assert i.value.field == "password"
    assert "hunter2" not in repr(i.value.value)


def test_it_rejects_a_choice_not_allowed_listing_the_choices() -> None:
    with pytest.raises(InvalidInput) as info:
        validate_choice("sometimes", ("allow", "forbid"), field="overlap")
    assert str(info.value) == "overlap: 'sometimes' is not one of allow, forbid"
    assert info.value.allowed == "allow, forbid"


def test_it_accepts_a_number_at_the_bounds() -> None:
    assert validate_int(0, field="jitter", low=0, high=3600) == 0
    assert validate_int(3600, field="jitter", low=0, high=3600) == 3600


def test_it_rejects_a_number_out_of_range_naming_the_field() -> None:
    with pytest.raises(InvalidInput, match=r"^retries: 11 is out of range 0-10$") as info:
        validate_int(11, field="retries", low=0, high=10)
    assert (info.value.field, info.value.value) == ("retries", 11)
