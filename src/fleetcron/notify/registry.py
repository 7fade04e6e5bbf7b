"""Every channel kind, by name: the one table the services dispatch through."""

from __future__ import annotations

from typing import Any

from fleetcron.notify import ChannelKind, ChannelSpec, DeliveryFailed, email, webhook

KINDS: dict[str, ChannelKind[Any]] = {
    webhook.KIND.name: webhook.KIND,
    email.KIND.name: email.KIND,
}


def kind_named(name: str) -> ChannelKind[Any]:
    """The kind of a stored channel; raises DeliveryFailed for one this version lacks."""
    kind = KINDS.get(name)
    if kind is None:
        raise DeliveryFailed(f"unknown channel kind {name!r}")
    return kind


def kind_of(spec: ChannelSpec) -> ChannelKind[Any]:
    """The kind whose settings ``spec`` holds."""
    for kind in KINDS.values():
        if isinstance(spec, kind.spec_type):
            return kind
    raise TypeError(f"no channel kind takes {type(spec).__name__}")


__all__ = ["KINDS", "kind_named", "kind_of"]
