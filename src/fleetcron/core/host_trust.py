"""Which host trust applies to a target: the one rule, for every path that writes it.

In order: the target's own host CA (set on the target), then the host CA of the oldest
label rule whose selector matches its labels, then its pinned host key; with none of them
the target is not yet trusted. Pure: the store reads the rules and writes the outcome
(``services/targets/trust_rules.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fleetcron.core.labels import selector_matches


@dataclass(frozen=True)
class TrustRule:
    """A host CA for the targets whose labels match ``selector``."""

    id: int
    selector: Mapping[str, str]
    host_ca: str


@dataclass(frozen=True)
class LabelTrust:
    """What the label rules give a target: its host CA and the rule it came from (both
    None: no rule applies, or the target's own CA wins)."""

    host_ca: str | None
    rule_id: int | None


NO_LABEL_TRUST = LabelTrust(None, None)


def label_trust(
    rules: Sequence[TrustRule], labels: Mapping[str, str], *, own_ca: bool
) -> LabelTrust:
    """The host CA the label rules give a target with ``labels``: none when it has a CA of
    its own (which wins), else the oldest (lowest id) rule that matches."""
    if own_ca:
        return NO_LABEL_TRUST
    for rule in sorted(rules, key=lambda r: r.id):
        if selector_matches(rule.selector, labels):
            return LabelTrust(rule.host_ca, rule.id)
    return NO_LABEL_TRUST
