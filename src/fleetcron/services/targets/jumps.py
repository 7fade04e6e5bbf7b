"""Jump hosts: the rules of ``via`` (a target reached through a target of kind ``jump``).

- The jump host named must exist and be of kind ``jump``; following jump hosts from it
  must not come back to the target (a loop) nor go on for more than
  :data:`~fleetcron.store.run_dispatch.MAX_JUMPS` hops.
- A jump host runs no jobs: bulk jobs skip it, no individual job is made on it.
- A jump host still used by other targets is not unpaired, removed or changed into
  another kind: the refusal names the targets that use it.
- Pairing a target behind a jump host goes through the chain, each hop with its own
  pinned host key: a jump host is paired (its key pinned) before the targets behind it.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from fleetcron.app import App
from fleetcron.core.bounded import named_few
from fleetcron.core.targets import TargetKind
from fleetcron.errors import Conflict, InvalidInput
from fleetcron.executors.base import SshTarget
from fleetcron.services.projects.scope import target_reaches
from fleetcron.store.run_dispatch import MAX_JUMPS
from fleetcron.store.schema import Target

#: What a ``via`` may name, in its errors.
VIA_ALLOWED = "the name of a target of kind jump (or nothing: reached directly)"


def resolve_via(session: Session, name: str, via: str | None, pid: int) -> Target | None:
    """The jump host row ``via`` names for target ``name`` of project ``pid`` (one of the
    project's, or shared into it), checked (see the module docstring); None for no jump
    host."""
    if not via:
        return None
    jump = session.scalars(
        select(Target)
        .where(Target.name == via, target_reaches(pid))
        .order_by(Target.project_id != pid, Target.id)
    ).first()
    if jump is None:
        raise InvalidInput(
            f"via: there is no target named {via}", field="via", value=via, allowed=VIA_ALLOWED
        )
    if jump.kind is not TargetKind.JUMP:
        raise InvalidInput(
            f"via: target {via} is of kind {jump.kind.value}, not jump; add a jump host with "
            "kind jump",
            field="via",
            value=via,
            allowed=VIA_ALLOWED,
        )
    path = [name, via]
    hop: Target | None = jump
    while hop is not None and hop.via_id is not None:
        hop = session.get(Target, hop.via_id)
        if hop is None:
            break
        path.append(hop.name)
        if hop.name == name:
            raise InvalidInput(
                f"via: a jump loop: {' -> '.join(path)}",
                field="via",
                value=via,
                allowed=VIA_ALLOWED + ", not leading back to this target",
            )
        if len(path) > MAX_JUMPS + 1:
            raise InvalidInput(
                f"via: more than {MAX_JUMPS} jump hosts in a row: {' -> '.join(path)}",
                field="via",
                value=via,
                allowed=f"a chain of at most {MAX_JUMPS} jump hosts",
            )
    return jump


def chain_of(session: Session, via_id: int | None) -> list[Target]:
    """The jump hosts on the way through ``via_id``, the one reached directly first."""
    chain: list[Target] = []
    at = via_id
    while at is not None and len(chain) < MAX_JUMPS:
        hop = session.get(Target, at)
        if hop is None:
            break
        chain.append(hop)
        at = hop.via_id
    return list(reversed(chain))


def users_of(session: Session, jump: Target) -> list[str]:
    """The names of the targets reached through ``jump`` (directly behind it)."""
    return list(
        session.scalars(select(Target.name).where(Target.via_id == jump.id).order_by(Target.name))
    )


def refuse_if_used(session: Session, jump: Target, doing: str) -> None:
    """Refuse ``doing`` (unpair, remove, change the kind) on a jump host still in use."""
    if jump.kind is not TargetKind.JUMP:
        return
    users = users_of(session, jump)
    if users:
        shown = named_few(users, 20)
        raise Conflict(
            f"name: jump host {jump.name} is still used by {len(users)} target(s): {shown}; "
            f"move them to another jump host (`target edit NAME --via OTHER`, or --via '' "
            f"to reach them directly) before you {doing} it",
            field="name",
        )


def hops_via(app: App, via_id: int | None) -> tuple[SshTarget, ...]:
    """The SSH connections of the jump hosts on the way through ``via_id`` (keys
    decrypted), for pairing; a hop without a pinned host key is refused (pair the jump
    host first)."""
    if via_id is None:
        return ()
    with app.db.read() as session:
        return _hop_targets(app, chain_of(session, via_id))


def _hop_targets(app: App, chain: list[Target]) -> tuple[SshTarget, ...]:
    hops: list[SshTarget] = []
    for hop in chain:
        trusted = hop.host_key or hop.host_ca
        if not (hop.host and hop.port and hop.user and hop.private_key_enc and trusted):
            raise InvalidInput(
                f"via: jump host {hop.name} has no pinned host key or connection yet; pair "
                f"it first (`fleetcron target pair {hop.name}`)",
                field="via",
                value=hop.name,
                allowed="a paired jump host",
            )
        hops.append(
            SshTarget(
                name=hop.name,
                host=hop.host,
                port=hop.port,
                user=hop.user,
                private_key=app.master_key.decrypt(hop.private_key_enc).reveal(),
                host_key=hop.host_key or "",
                host_ca=hop.host_ca or "",
                client_cert=app.master_key.decrypt(hop.client_cert_enc).reveal()
                if hop.client_cert_enc
                else "",
            )
        )
    return tuple(hops)
