"""Host trust at fleet scale: which targets have a pinned host key, and pinning many at
once from a ``known_hosts`` file or ``ssh-keyscan`` output.

- **Import** pins the file's key for every SSH target (and jump host) that has none yet,
  matched by the target's host and port as OpenSSH matches them (hashed entries too).
  With several keys for one host the preferred type is pinned (ed25519 first). A target
  whose pinned key is among the file's keys is left as it is. **A different key already
  pinned is never replaced** (that is a re-pin, which shows both fingerprints first): it
  is reported as a conflict. Pinning does not pair: ``target pair`` checks the login.
- A target trusted by its host CA is left as it is (``CA-trusted``): nothing is pinned.
- Each pin is audited (``target.pin_imported``, with the fingerprint and the file's line),
  in one transaction with the others: an import is written whole or not at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind
from fleetcron.errors import InvalidInput
from fleetcron.executors.hostkeys import fingerprint, split_host_ca
from fleetcron.executors.known_hosts import KnownHostsFile, keys_for, parse_known_hosts
from fleetcron.services.audit import AuditNote, audited, record
from fleetcron.store.schema import HostTrustRule, Target

PINNED = "pinned"
CA_TRUSTED = "CA-trusted"
ALREADY = "already pinned"
CONFLICT = "conflict"
ABSENT = "not in file"
NOT_TRUSTED = "not yet trusted"
#: Every outcome of an import, in the order they are reported.
OUTCOMES = (PINNED, ALREADY, CONFLICT, ABSENT, CA_TRUSTED)


@dataclass(frozen=True)
class TrustState:
    """How one target's host is trusted, as ``target trust list`` shows it."""

    name: str
    kind: TargetKind
    address: str
    #: ``pinned``, ``CA-trusted``, ``not yet trusted``, or ``-`` for a local target.
    state: str
    fingerprint: str | None
    via: str | None
    #: When its user certificate expires (None: none, or it never does).
    client_cert_expires_at: datetime | None = None
    #: Where its host CA comes from: ``target`` (its own), ``label SELECTOR`` (a label
    #: rule, :mod:`~fleetcron.services.targets.trust_rules`); None when not CA-trusted.
    ca_from: str | None = None


@dataclass(frozen=True)
class ImportOutcome:
    """What an import did (or, in a dry run, would do) for one target."""

    name: str
    outcome: str
    #: The fingerprint pinned now, or the file's for a conflict.
    fingerprint: str | None = None
    #: The fingerprint that was already pinned (already pinned, conflict).
    pinned: str | None = None


@dataclass(frozen=True)
class ImportReport:
    outcomes: tuple[ImportOutcome, ...]
    #: Key lines read, ``@cert-authority``/``@revoked`` lines skipped, unreadable lines.
    entries: int
    markers: int
    bad_lines: tuple[int, ...]
    dry_run: bool

    def count(self, outcome: str) -> int:
        return sum(1 for o in self.outcomes if o.outcome == outcome)


def trust_states(app: App, actor: Actor) -> list[TrustState]:
    """Every target and how its host is trusted, by name."""
    actor.authorize("target.read")
    with app.db.read() as session:
        rows = session.scalars(select(Target).order_by(Target.name)).all()
        selectors = dict(session.execute(select(HostTrustRule.id, HostTrustRule.selector)).all())
        return [_state_of(row, selectors) for row in rows]


def _ca_from(row: Target, selectors: dict[int, str]) -> str:
    if row.host_ca_rule_id is None:
        return "target"
    return f"label {selectors.get(row.host_ca_rule_id, '?')}"


def _state_of(row: Target, selectors: dict[int, str]) -> TrustState:
    if not row.kind.over_ssh:
        return TrustState(row.name, row.kind, "-", "-", None, None)
    address = f"{row.user}@{row.host}:{row.port}"
    via = row.via.name if row.via is not None else None
    if row.host_ca:
        cas = ", ".join(fingerprint(line) for line in split_host_ca(row.host_ca)[0])
        return TrustState(
            row.name,
            row.kind,
            address,
            CA_TRUSTED,
            cas,
            via,
            row.client_cert_expires_at,
            _ca_from(row, selectors),
        )
    return TrustState(
        row.name,
        row.kind,
        address,
        PINNED if row.host_key else NOT_TRUSTED,
        fingerprint(row.host_key) if row.host_key else None,
        via,
        row.client_cert_expires_at,
    )


def empty_import() -> InvalidInput:
    """The refusal of an import of nothing (the API's body model refuses it itself)."""
    return InvalidInput(
        "known_hosts: nothing to import; paste a known_hosts file or ssh-keyscan output",
        field="known_hosts",
        value="",
        allowed="known_hosts lines (hashed or not) or ssh-keyscan output",
    )


def import_trust(app: App, actor: Actor, text: str, *, dry_run: bool = False) -> ImportReport:
    """Pin the keys ``text`` has for the targets without one; report every SSH target
    (see the module docstring)."""
    known = parse_known_hosts(text)
    note = AuditNote("target.trust_import", detail={"dry_run": dry_run})
    with audited(app, actor, note) as session:
        actor.authorize("target.pair")
        rows = session.scalars(
            select(Target).where(Target.kind != TargetKind.LOCAL).order_by(Target.name)
        ).all()
        outcomes = [_decide(known, row) for row in rows]
        if not dry_run:
            now = app.now()
            for row, outcome in zip(rows, outcomes, strict=True):
                if outcome.outcome == PINNED:
                    row.host_key = keys_for(known, row.host or "", row.port or 22)[0]
                    row.updated_at = now
                    _audit_pin(session, app, actor, row, outcome)
        note.detail.update(
            {outcome: sum(1 for o in outcomes if o.outcome == outcome) for outcome in OUTCOMES}
        )
        note.detail["conflicts"] = [o.name for o in outcomes if o.outcome == CONFLICT][:100]
    return ImportReport(
        tuple(outcomes), len(known.entries), known.markers, known.bad_lines, dry_run
    )


def _decide(known: KnownHostsFile, row: Target) -> ImportOutcome:
    if row.host_ca:
        # Trusted by its host CA: nothing is pinned (an import does not change the mode).
        return ImportOutcome(row.name, CA_TRUSTED)
    keys = keys_for(known, row.host or "", row.port or 22)
    if not keys:
        return ImportOutcome(row.name, ABSENT)
    pinned = fingerprint(row.host_key) if row.host_key else None
    if row.host_key is None:
        return ImportOutcome(row.name, PINNED, fingerprint(keys[0]))
    if row.host_key in keys:
        return ImportOutcome(row.name, ALREADY, pinned, pinned)
    return ImportOutcome(row.name, CONFLICT, fingerprint(keys[0]), pinned)


def _audit_pin(
    session: Session, app: App, actor: Actor, row: Target, outcome: ImportOutcome
) -> None:
    record(
        session,
        app,
        actor,
        AuditNote(
            "target.pin_imported",
            target_id=row.id,
            target_name=row.name,
            detail={"host_key": outcome.fingerprint},
        ),
        success=True,
    )
