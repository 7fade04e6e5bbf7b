"""Comparing two versions of a job's definition (pure).

A definition is the flat mapping of a job's fields (``schedule``, ``command``,
``selector``, ...) as ``job_versions.definition`` stores it. A diff lists the fields
that differ, in a stable order, with a line diff for text that spans lines.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: Fields shown first, in this order; any other field follows by name.
FIELD_ORDER = ("schedule", "timezone", "command", "target", "selector", "origin", "notes")


@dataclass(frozen=True)
class FieldChange:
    """One field that differs between two definitions. ``lines``: a unified diff when
    either side is text over several lines (commands, notes), else empty."""

    field: str
    old: Any
    new: Any
    lines: list[str] = dataclasses.field(default_factory=list)

    @property
    def added(self) -> bool:
        return self.old is None and self.new is not None

    def as_dict(self) -> dict[str, Any]:
        return {"field": self.field, "old": self.old, "new": self.new, "lines": self.lines}


def _order(name: str) -> tuple[int, str]:
    return (FIELD_ORDER.index(name), "") if name in FIELD_ORDER else (len(FIELD_ORDER), name)


def _canonical(value: Any) -> Any:
    # A tuple and a list, or dicts in another key order, are the same stored value.
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def changed_fields(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """The names of the fields whose values differ (a field missing on one side counts as
    ``None`` there, so an option added in a later release is not a change by itself)."""
    names = set(old) | set(new)
    return sorted(
        (n for n in names if _canonical(old.get(n)) != _canonical(new.get(n))), key=_order
    )


def diff_definitions(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[FieldChange]:
    """What changed from ``old`` to ``new``, field by field."""
    changes = []
    for name in changed_fields(old, new):
        before, after = old.get(name), new.get(name)
        lines: list[str] = []
        if _multiline(before) or _multiline(after):
            lines = list(
                difflib.unified_diff(
                    str(before or "").splitlines(),
                    str(after or "").splitlines(),
                    fromfile=f"{name} (old)",
                    tofile=f"{name} (new)",
                    lineterm="",
                )
            )
        changes.append(FieldChange(name, before, after, lines))
    return changes


def _multiline(value: Any) -> bool:
    return isinstance(value, str) and "\n" in value.strip("\n")


def summarize(changes: list[FieldChange]) -> str:
    """A one-line description: ``schedule: 0 2 * * * -> 0 3 * * *; command changed``."""
    parts = []
    for change in changes:
        if change.lines or _long(change.old) or _long(change.new):
            parts.append(f"{change.field} changed")
        else:
            parts.append(f"{change.field}: {_short(change.old)} -> {_short(change.new)}")
    return "; ".join(parts)


def _long(value: Any) -> bool:
    return len(_short(value)) > 40


def _short(value: Any) -> str:
    if value is None or value == "":
        return "(none)"
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in sorted(value.items())) or "(none)"
    if isinstance(value, list):
        return ",".join(str(v) for v in value) or "(none)"
    return str(value)
