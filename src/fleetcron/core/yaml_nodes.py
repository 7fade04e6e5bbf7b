"""Reading composed YAML nodes with line numbers, collecting every problem instead of
stopping at the first: the mechanics under the schedule file's parser
(:mod:`fleetcron.core.schedule_file`). Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

TAGS = {
    "string": "tag:yaml.org,2002:str",
    "integer": "tag:yaml.org,2002:int",
    "boolean": "tag:yaml.org,2002:bool",
}

TAG_NAMES = {
    "tag:yaml.org,2002:str": "a string",
    "tag:yaml.org,2002:int": "an integer",
    "tag:yaml.org,2002:bool": "a boolean",
    "tag:yaml.org,2002:float": "a number",
    "tag:yaml.org,2002:null": "nothing (null)",
    "tag:yaml.org,2002:timestamp": "a date",
    "tag:yaml.org,2002:seq": "a list",
    "tag:yaml.org,2002:map": "a mapping",
}


@dataclass(frozen=True, order=True)
class Problem:
    """One thing wrong with a file: where (line, path) and what."""

    line: int
    path: str
    message: str

    def render(self, source: str) -> str:
        where = f"{source}:{self.line}"
        return f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"


def line_of(node: Node) -> int:
    return int(node.start_mark.line) + 1


def kind_of(node: Node) -> str:
    if isinstance(node, ScalarNode):
        kind = TAG_NAMES.get(node.tag, f"a value tagged {node.tag}")
        return kind if node.tag.endswith(":null") else f"{kind} {node.value!r}"
    if isinstance(node, SequenceNode):
        return "a list"
    return "a mapping"


class Reader:
    """Walks the composed YAML nodes, collecting problems instead of stopping at the first."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []
        self._construct = SafeConstructor()

    def fail(self, node: Node, path: str, message: str) -> None:
        self.problems.append(Problem(line_of(node), path, message))

    def mapping(
        self, node: Node, path: str, allowed: Sequence[str], what: str
    ) -> dict[str, tuple[Node, Node]] | None:
        """The keys of a mapping node with their (key, value) nodes; unknown and repeated
        keys are problems."""
        if not isinstance(node, MappingNode):
            self.fail(node, path, f"expected {what}, got {kind_of(node)}")
            return None
        out: dict[str, tuple[Node, Node]] = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, ScalarNode) else None
            key_path = f"{path}.{key}" if path else str(key)
            if not isinstance(key, str) or key not in allowed:
                self.fail(
                    key_node,
                    key_path,
                    f"unknown key; allowed keys: {', '.join(allowed)}",
                )
            elif key in out:
                self.fail(
                    key_node,
                    key_path,
                    f"given twice (first on line {line_of(out[key][0])})",
                )
            else:
                out[key] = (key_node, value_node)
        return out

    def scalar(self, node: Node, path: str, kind: str) -> Any:
        """The value of a scalar of ``kind`` (string, integer, boolean), or None (a problem)."""
        if not isinstance(node, ScalarNode) or node.tag != TAGS[kind]:
            hint = "; quote it" if kind == "string" and isinstance(node, ScalarNode) else ""
            if isinstance(node, ScalarNode) and node.tag == "tag:yaml.org,2002:null":
                hint = "; leave the key out for the default"
            self.fail(node, path, f"expected {article(kind)}, got {kind_of(node)}{hint}")
            return None
        return self._construct.construct_object(node, deep=True)

    def strings(self, node: Node, path: str) -> tuple[str, ...] | None:
        if not isinstance(node, SequenceNode):
            self.fail(node, path, f"expected a list of strings, got {kind_of(node)}")
            return None
        items = [self.scalar(item, f"{path}[{i}]", "string") for i, item in enumerate(node.value)]
        if any(item is None for item in items):
            return None
        return tuple(items)


def article(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


__all__ = ["TAGS", "TAG_NAMES", "Problem", "Reader", "article", "kind_of", "line_of"]
