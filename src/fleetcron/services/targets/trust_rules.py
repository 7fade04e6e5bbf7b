"""Host trust by label: a host CA attached to a label selector (``target trust ca add
--label site=paris --ca-file ca.pub``), for the SSH targets and jump hosts that match.

Which trust applies is :func:`fleetcron.core.host_trust.label_trust`'s rule: the target's
own host CA wins, then the oldest matching label rule, then the pinned host key. The rule's
outcome is written to the target (``targets.host_ca``, with ``host_ca_rule_id`` naming the
rule), so every connection path (runs, the host probe, pairing, active cleanup) reads one
column as before. It is written again whenever it can change: a rule added or removed, a
target added, edited or labelled (:func:`apply_label_trust`, in the same transaction).

A rule applies at once to the targets it matches, paired or not: their next connection is
checked against the CA instead of their pinned key (which is kept, and trusted again when
the rule goes). Each rule change is audited (``target.trust_ca_add``,
``target.trust_ca_remove``) with the targets it changed; bad input (a CA key in the wrong
format, a selector that is not ``key=value,...``) is refused naming the field, with
nothing saved.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from fleetcron.app import Actor, App
from fleetcron.core.host_trust import TrustRule, label_trust
from fleetcron.core.labels import format_selector, parse_selector
from fleetcron.core.targets import TargetKind
from fleetcron.errors import Conflict, InvalidInput, NotFound
from fleetcron.executors.hostkeys import fingerprint, normalize_host_ca, split_host_ca
from fleetcron.services.audit import AuditNote, audited
from fleetcron.services.targets.views import TargetView
from fleetcron.store.schema import HostTrustRule, Target

SELECTOR_ALLOWED = "a label selector key=value[,key=value...], e.g. site=paris"


@dataclass(frozen=True)
class TrustRuleView:
    """A label rule as the CLI, the API and the pages show it."""

    id: int
    selector: str
    #: The fingerprints of its CA keys, and how many keys it revokes.
    ca_fingerprints: tuple[str, ...]
    revoked: int
    created_by: str
    created_at: datetime
    #: The targets it applies to now.
    targets: tuple[str, ...] = ()

    @classmethod
    def of(cls, row: HostTrustRule, targets: Iterable[str] = ()) -> TrustRuleView:
        cas, revoked = split_host_ca(row.host_ca)
        return cls(
            row.id,
            row.selector,
            tuple(fingerprint(line) for line in cas),
            len(revoked),
            row.created_by,
            row.created_at,
            tuple(targets),
        )


def checked_selector(text: str) -> str:
    """``text`` as a stored selector (sorted ``key=value`` pairs); InvalidInput (field
    ``label``) for an empty one or one that is not ``key=value,...``."""
    try:
        selector = parse_selector(text)
    except InvalidInput as exc:
        raise InvalidInput(
            f"label: {text!r} is not a label selector: {exc.message}",
            field="label",
            value=text,
            allowed=SELECTOR_ALLOWED,
        ) from None
    if not selector:
        raise InvalidInput(
            "label: a host CA by label needs a selector (a CA for every target is set "
            "per target with --host-ca)",
            field="label",
            value=text,
            allowed=SELECTOR_ALLOWED,
        )
    return format_selector(selector)


def rules_in(session: Session) -> list[TrustRule]:
    """Every label rule, oldest first, as the core's plain values."""
    rows = session.scalars(select(HostTrustRule).order_by(HostTrustRule.id))
    return [TrustRule(r.id, parse_selector(r.selector), r.host_ca) for r in rows]


def apply_label_trust(
    session: Session, targets: Iterable[Target], rules: list[TrustRule] | None = None
) -> list[str]:
    """Write on each of ``targets`` the host CA the label rules give it (see the module
    docstring); returns the names of the targets whose trust changed."""
    rules = rules_in(session) if rules is None else rules
    changed: list[str] = []
    for target in targets:
        if not target.kind.over_ssh:
            continue
        own = target.host_ca is not None and target.host_ca_rule_id is None
        given = label_trust(rules, target.labels or {}, own_ca=own)
        if own or (target.host_ca, target.host_ca_rule_id) == (given.host_ca, given.rule_id):
            continue
        target.host_ca, target.host_ca_rule_id = given.host_ca, given.rule_id
        changed.append(target.name)
    return changed


def _ssh_targets(session: Session) -> list[Target]:
    return list(
        session.scalars(select(Target).where(Target.kind != TargetKind.LOCAL).order_by(Target.name))
    )


def add_trust_rule(app: App, actor: Actor, selector: str, host_ca: str) -> TrustRuleView:
    """Attach a host CA to the targets whose labels match ``selector``; audited."""
    note = AuditNote("target.trust_ca_add", detail={"selector": selector})
    with audited(app, actor, note) as session:
        actor.authorize("target.edit")
        stored = checked_selector(selector)
        ca = normalize_host_ca(host_ca, field="ca")
        note.detail["selector"] = stored
        if session.scalar(select(HostTrustRule.id).where(HostTrustRule.selector == stored)):
            raise Conflict(
                f"label: a host CA is already attached to {stored}; remove it first "
                f"(`fleetcron target trust ca remove --label {stored}`)",
                field="label",
            )
        row = HostTrustRule(
            selector=stored, host_ca=ca, created_by=actor.name, created_at=app.now()
        )
        session.add(row)
        session.flush()
        changed = apply_label_trust(session, _ssh_targets(session))
        view = TrustRuleView.of(row, changed)
        note.detail.update({"ca": list(view.ca_fingerprints), "targets": changed[:100]})
    return view


def remove_trust_rule(app: App, actor: Actor, selector: str) -> list[str]:
    """Remove the host CA attached to ``selector``; its targets go back to another rule,
    or to their pinned keys. Returns the targets whose trust changed; audited."""
    note = AuditNote("target.trust_ca_remove", detail={"selector": selector})
    with audited(app, actor, note) as session:
        actor.authorize("target.edit")
        stored = checked_selector(selector)
        row = session.scalars(select(HostTrustRule).where(HostTrustRule.selector == stored)).first()
        if row is None:
            raise NotFound("host CA for label", stored, field="label")
        session.delete(row)
        session.flush()
        changed = apply_label_trust(session, _ssh_targets(session))
        note.detail.update({"selector": stored, "targets": changed[:100]})
    return changed


def trust_rules(app: App, actor: Actor) -> list[TrustRuleView]:
    """Every label rule, oldest first, with the targets it applies to now."""
    actor.authorize("target.read")
    with app.db.read() as session:
        rows = session.scalars(select(HostTrustRule).order_by(HostTrustRule.id)).all()
        users: dict[int, list[str]] = {}
        for name, rule_id in session.execute(
            select(Target.name, Target.host_ca_rule_id)
            .where(Target.host_ca_rule_id.is_not(None))
            .order_by(Target.name)
        ):
            if rule_id is not None:
                users.setdefault(rule_id, []).append(name)
        return [TrustRuleView.of(row, users.get(row.id, ())) for row in rows]


def ca_source(app: App, target: TargetView) -> str | None:
    """Where ``target``'s host CA comes from, as the pages say it: ``the target`` (its
    own), ``label SELECTOR``; None when it is not trusted by a CA."""
    if not target.host_ca:
        return None
    if target.host_ca_rule_id is None:
        return "the target"
    with app.db.read() as session:
        selector = session.scalar(
            select(HostTrustRule.selector).where(HostTrustRule.id == target.host_ca_rule_id)
        )
    return f"label {selector}" if selector else "a label"
