"""Secrets at rest: the master key, its file, and encryption of private keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetcron.crypto import MasterKey, Secret, create_key_file, generate_key, load_master_key
from fleetcron.errors import SecretError

PRIVATE_KEY = b"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n"


def test_a_secret_never_shows_its_value() -> None:
    secret = Secret(b"hunter22")
    assert repr(secret) == str(secret) == "Secret('**********')"
    assert "hunter22" not in f"{secret} {secret!r} {[secret]} { ({'key': secret}) }"


def test_a_secret_reveals_its_value_when_asked() -> None:
    assert Secret(b"hunter22").reveal() == b"hunter22"


def test_a_master_key_never_shows_the_key() -> None:
    key = generate_key()
    shown = f"{MasterKey(key)!r} {MasterKey(key)}"
    assert "**********" in shown
    assert key.decode() not in shown


def test_a_decrypted_secret_equals_the_encrypted_plaintext() -> None:
    master_key = MasterKey(generate_key())
    assert master_key.decrypt(master_key.encrypt(PRIVATE_KEY)).reveal() == PRIVATE_KEY


def test_the_ciphertext_does_not_contain_the_plaintext() -> None:
    token = MasterKey(generate_key()).encrypt(PRIVATE_KEY)
    assert b"PRIVATE KEY" not in token
    assert b"b3BlbnNzaC1rZXktdjEAAAAA" not in token


def test_encrypting_twice_gives_different_ciphertexts() -> None:
    master_key = MasterKey(generate_key())
    assert master_key.encrypt(PRIVATE_KEY) != master_key.encrypt(PRIVATE_KEY)


def test_decrypting_with_another_key_raises_secret_error() -> None:
    token = MasterKey(generate_key()).encrypt(PRIVATE_KEY)
    with pytest.raises(SecretError, match="cannot be decrypted with this master key"):
        MasterKey(generate_key()).decrypt(token)


def test_decrypting_a_tampered_token_raises_secret_error() -> None:
    master_key = MasterKey(generate_key())
    token = bytearray(master_key.encrypt(PRIVATE_KEY))
    token[40] ^= 0x01
    with pytest.raises(SecretError):
        master_key.decrypt(bytes(token))


@pytest.mark.parametrize("key", [b"", b"too-short", b"!" * 44])
def test_a_malformed_master_key_raises_secret_error(key: bytes) -> None:
    with pytest.raises(SecretError, match="the master key is not valid"):
        MasterKey(key)


def test_create_key_file_writes_a_usable_key_readable_only_by_its_owner(tmp_path: Path) -> None:
    path = tmp_path / "data" / "master.key"
    key = create_key_file(path)
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.read_bytes() == key + b"\n"
    token = MasterKey(key).encrypt(PRIVATE_KEY)
    assert load_master_key(None, path).decrypt(token).reveal() == PRIVATE_KEY


def test_create_key_file_refuses_to_replace_an_existing_key(tmp_path: Path) -> None:
    path = tmp_path / "master.key"
    key = create_key_file(path)
    with pytest.raises(SecretError, match="already exists; refusing to replace a master key"):
        create_key_file(path)
    assert path.read_bytes() == key + b"\n"


def test_load_master_key_prefers_the_environment_value_to_the_file(tmp_path: Path) -> None:
    path = tmp_path / "master.key"
    create_key_file(path)
    env_key = generate_key()
    token = MasterKey(env_key).encrypt(PRIVATE_KEY)
    assert load_master_key(env_key.decode(), path).decrypt(token).reveal() == PRIVATE_KEY


def test_load_master_key_without_a_file_says_to_run_init(tmp_path: Path) -> None:
    with pytest.raises(SecretError, match="does not exist; run `fleetcron init`"):
        load_master_key(None, tmp_path / "master.key")
