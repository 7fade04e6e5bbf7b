"""Notification channels: the I/O edge of alerting.

A channel *kind* (webhook, email) is one module here that builds a :class:`ChannelKind`:
the settings it takes (a :class:`ChannelSpec` subclass), how they are validated, how a
message is sent, and how its settings are shown, audited and sealed at rest.
:mod:`fleetcron.notify.registry` lists the kinds; adding one is a module plus a line there.

Senders deliver one message within a timeout and raise :class:`DeliveryFailed` with a
message an operator can act on for anything that goes wrong. Nothing here touches the
database; callers send outside any transaction and record the outcome afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from fleetcron.crypto import Secret
from fleetcron.errors import FleetcronError

#: A channel's stored settings (JSON).
Config = dict[str, Any]
#: Encrypts, or decrypts, bytes with the master key.
Cipher = Callable[[bytes], bytes]


class DeliveryFailed(FleetcronError):
    """The notification could not be delivered."""


class ChannelSpec:
    """What an operator gives to create a channel; each kind subclasses it."""


@dataclass(frozen=True)
class Sending:
    """How one message is sent: its delivery id (None for a test message), the timeout,
    and whether destinations on non-public addresses are refused."""

    delivery_id: int | None
    timeout: float
    refuse_private: bool = False


S = TypeVar("S", bound=ChannelSpec)


def _unchanged(config: Config, cipher: Cipher) -> Config:
    return config


@dataclass(frozen=True)
class ChannelKind(Generic[S]):
    """One kind of channel, as the services use it.

    ``validate`` turns a spec into the stored config and the secret apart (the caller
    encrypts it), raising InvalidInput naming the field. ``send`` takes the config as
    ``unseal`` returns it and a ``fleetcron.alert/1`` message; it returns None or a note on
    a partial success, and raises DeliveryFailed. ``shown`` is the config as lists show it,
    ``summary`` one line of that, ``audit`` what the audit log records of a new channel.
    ``seal`` encrypts what must not be stored in clear and returns the very same object
    when there is nothing to seal; ``unseal`` undoes it.
    """

    name: str
    spec_type: type[S]
    validate: Callable[[S], tuple[Config, str | None]]
    send: Callable[[Config, Secret | None, Mapping[str, Any], Sending], str | None]
    shown: Callable[[Config], Config]
    summary: Callable[[Config, bool], str]
    audit: Callable[[Config, bool], dict[str, Any]]
    seal: Callable[[Config, Cipher], Config] = _unchanged
    unseal: Callable[[Config, Cipher], Config] = _unchanged


__all__ = ["ChannelKind", "ChannelSpec", "Cipher", "Config", "DeliveryFailed", "Sending"]
