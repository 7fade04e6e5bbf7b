"""How to reach targets, for the work that connects to them outside a run: the host probe
(:mod:`fleetcron.services.targets.reach`) and active cleanup after a takeover
(:mod:`fleetcron.services.cluster.cleanup`). Each connection comes with its chain of jump
hosts, so a target behind one is never connected to directly."""

from __future__ import annotations

from dataclasses import replace
from typing import Protocol

from sqlalchemy import select
from sqlalchemy.orm import Session

from fleetcron.core.targets import TargetKind
from fleetcron.executors.base import RunTarget
from fleetcron.store.run_dispatch import chain, load_hops
from fleetcron.store.schema import Target


def connections(session: Session, ids: list[int]) -> list[tuple[int, RunTarget]]:
    """How to reach each target of ``ids`` (in that order; ids not found are left out): its
    connection with the key still encrypted and, for one behind jump hosts, the chain of
    them, the one reached directly first (read as the run path reads it,
    :func:`~fleetcron.store.run_dispatch.load_hops`). The host probe and active cleanup
    connect so."""
    found: dict[int, tuple[RunTarget, int | None]] = {}
    for start in range(0, len(ids), 500):
        for row in session.execute(
            select(
                Target.id,
                Target.name,
                Target.kind,
                Target.host,
                Target.port,
                Target.user,
                Target.private_key_enc,
                Target.host_key,
                Target.host_ca,
                Target.client_cert_enc,
                Target.via_id,
            ).where(Target.id.in_(ids[start : start + 500]))
        ):
            found[row.id] = (_run_target(row.name, row.kind, row), row.via_id)
    hops = load_hops(session, {via for _, via in found.values() if via is not None})
    out: list[tuple[int, RunTarget]] = []
    for tid in ids:
        if tid not in found:
            continue
        target, via = found[tid]
        if via is not None:
            target = replace(
                target, via=tuple(_run_target(h.name, TargetKind.JUMP, h) for h in chain(via, hops))
            )
        out.append((tid, target))
    return out


class _Connection(Protocol):
    """What connecting needs of a target row or a hop (read-only)."""

    @property
    def host(self) -> str | None: ...
    @property
    def port(self) -> int | None: ...
    @property
    def user(self) -> str | None: ...
    @property
    def private_key_enc(self) -> bytes | None: ...
    @property
    def host_key(self) -> str | None: ...
    @property
    def host_ca(self) -> str | None: ...
    @property
    def client_cert_enc(self) -> bytes | None: ...


def _run_target(name: str, kind: str, row: _Connection) -> RunTarget:
    return RunTarget(
        name=name,
        kind=kind,
        host=row.host,
        port=row.port,
        user=row.user,
        private_key_enc=row.private_key_enc,
        host_key=row.host_key,
        host_ca=row.host_ca,
        client_cert_enc=row.client_cert_enc,
    )
