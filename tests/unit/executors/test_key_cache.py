"""The SSH kind's cache of decrypted keys is bounded: the least recently used key is
dropped (and decrypted again on its next use), a key in use stays."""

from __future__ import annotations

import pytest

from fleetcron.executors.kinds import KEY_CACHE_SIZE, SshKind
from fleetcron.executors.ssh import SshExecutor


class CountingDecrypt:
    def __init__(self) -> None:
        self.calls: list[bytes] = []

    def __call__(self, encrypted: bytes) -> bytes:
        self.calls.append(encrypted)
        return b"key of " + encrypted


def test_a_key_is_decrypted_once_while_it_is_among_the_most_recently_used() -> None:
    decrypt = CountingDecrypt()
    kind = SshKind(SshExecutor(), decrypt, key_cache_size=2)
    assert kind.private_key(b"a") == b"key of a"
    assert kind.private_key(b"b") == b"key of b"
    assert kind.private_key(b"a") == b"key of a"  # cached; now the most recent
    assert decrypt.calls == [b"a", b"b"]
    kind.private_key(b"c")  # over the bound: drops b, the least recently used
    kind.private_key(b"a")
    assert decrypt.calls == [b"a", b"b", b"c"]
    # Negative control: the dropped key is decrypted again.
    assert kind.private_key(b"b") == b"key of b"
    assert decrypt.calls == [b"a", b"b", b"c", b"b"]


def test_the_cache_never_holds_more_than_its_bound() -> None:
    decrypt = CountingDecrypt()
    kind = SshKind(SshExecutor(), decrypt)
    for i in range(KEY_CACHE_SIZE + 10):
        kind.private_key(str(i).encode())
    assert len(kind._keys) == KEY_CACHE_SIZE
    assert b"0" not in kind._keys and str(KEY_CACHE_SIZE + 9).encode() in kind._keys


def test_a_cache_size_below_one_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match="key_cache_size must be at least 1, not 0"):
        SshKind(SshExecutor(), CountingDecrypt(), key_cache_size=0)
