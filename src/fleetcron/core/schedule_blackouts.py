"""The ``blackouts:`` section of a schedule file: blackout windows declared next to the jobs
they cover, planned and applied in the jobs' transaction (docs/schedules-as-code.md).

One window, with the fields of ``fleetcron blackout add``::

    blackouts:
      - name: patch-night
        reason: monthly patching of rack 1
        selector: rack=r1          # and/or job: NAME, target: NAME
        zone: Europe/Warsaw        # or target (each target's own); default UTC
        weekly: sat 22:00          # or cron: "0 22 * * 6", or start: / end:
        duration: 2h               # 90m, 1d12h, or seconds
        until: "2027-03-31 00:00"

A window is known by its name among the windows in force: a declared name no window in
force has is created, one that differs is changed. Windows the file does not declare are
left alone (lift them with ``fleetcron blackout lift``). Pure: the shape and the types are
read here; the values are checked by the blackouts service's own rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from yaml.nodes import Node, ScalarNode, SequenceNode

from fleetcron.core.blackouts import WINDOW_KEYS
from fleetcron.core.incidents import parse_duration
from fleetcron.core.yaml_nodes import TAGS, Problem, Reader, kind_of, line_of
from fleetcron.errors import InvalidInput

#: Keys holding a time, which YAML may read as a date: taken as written.
_TIME_KEYS = frozenset({"start", "end", "until"})
_TIME_TAGS = frozenset({TAGS["string"], "tag:yaml.org,2002:timestamp"})


@dataclass(frozen=True)
class BlackoutDecl:
    """One window as the file declares it: its fields as the CLI takes them (text, and
    ``duration_s`` in seconds), each key's line."""

    index: int
    line: int
    fields: Mapping[str, Any]
    lines: Mapping[str, int]

    @property
    def name(self) -> str:
        return str(self.fields["name"])

    def problem(self, key: str, message: str) -> Problem:
        key = "duration" if key == "duration_s" else key
        known = key in WINDOW_KEYS
        path = f"blackouts[{self.index}]" + (f".{key}" if known else "")
        return Problem(self.lines.get(key, self.line), path, message)


@dataclass(frozen=True)
class BlackoutChange:
    """Create a window, or change the window in force of that name (the fields that
    differ)."""

    kind: Literal["create", "change"]
    name: str
    blackout_id: int | None
    fields: tuple[str, ...] = ()


def read_blackouts(reader: Reader, node: Node) -> list[BlackoutDecl]:
    """The windows of the section that read without a problem, each name once."""
    if isinstance(node, ScalarNode) and node.tag.endswith(":null"):
        return []
    if not isinstance(node, SequenceNode):
        reader.fail(node, "blackouts", f"expected a list of windows, got {kind_of(node)}")
        return []
    out: list[BlackoutDecl] = []
    first: dict[str, int] = {}
    for index, item in enumerate(node.value):
        decl = _read_blackout(reader, item, index)
        if decl is None:
            continue
        if decl.name in first:
            message = f"window {decl.name} is declared twice (first on line {first[decl.name]})"
            reader.problems.append(decl.problem("name", message))
            continue
        first[decl.name] = decl.lines["name"]
        out.append(decl)
    return out


def _read_blackout(reader: Reader, node: Node, index: int) -> BlackoutDecl | None:
    path = f"blackouts[{index}]"
    before = len(reader.problems)
    keys = reader.mapping(node, path, WINDOW_KEYS, "a window (a mapping with name, reason, ...)")
    if keys is None:
        return None
    lines = {key: line_of(value) for key, (_, value) in keys.items()}
    fields: dict[str, Any] = {}
    for key, (_, value) in keys.items():
        if key == "duration":
            fields["duration_s"] = _duration(reader, value, f"{path}.duration")
        elif key in _TIME_KEYS and isinstance(value, ScalarNode) and value.tag in _TIME_TAGS:
            fields[key] = str(value.value)
        else:
            fields[key] = reader.scalar(value, f"{path}.{key}", "string")
    for required in ("name", "reason"):
        if required not in keys:
            reader.problems.append(Problem(line_of(node), path, f"missing required key {required}"))
    if len(reader.problems) > before:
        return None
    return BlackoutDecl(index=index, line=line_of(node), fields=fields, lines=lines)


def _duration(reader: Reader, node: Node, path: str) -> int | None:
    """``2h``, ``90m``, ``1d12h`` or a number of seconds."""
    if isinstance(node, ScalarNode) and node.tag == TAGS["integer"]:
        return int(node.value)
    text = reader.scalar(node, path, "string")
    if text is None:
        return None
    try:
        return int(parse_duration(text).total_seconds())
    except InvalidInput as exc:
        reader.fail(node, path, exc.message.removeprefix("duration: "))
        return None


def duration_text(seconds: int) -> str:
    """Seconds as the file writes them: ``2h``, ``90m``, ``1d12h``, else seconds."""
    units = (("d", 86_400), ("h", 3_600), ("m", 60))
    if seconds % 60:
        return f"{seconds}s"
    parts, left = [], seconds
    for unit, size in units:
        if left >= size:
            parts.append(f"{left // size}{unit}")
            left %= size
    return "".join(parts) or "0s"


__all__ = [
    "BlackoutChange",
    "BlackoutDecl",
    "duration_text",
    "read_blackouts",
]
