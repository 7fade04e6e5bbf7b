"""Target labels (``key=value``) and the label selectors of bulk jobs (``env=prod,role=pbx``).

A selector matches a target when every one of its pairs is among the target's labels;
the empty selector matches every target.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from fleetcron.errors import InvalidInput

_KEY = re.compile(r"[a-z0-9]([a-z0-9._/-]{0,62})?")
_VALUE = re.compile(r"[A-Za-z0-9._-]{0,63}")
KEY_RULE = (
    "lowercase letters, digits, '.', '_', '-', '/' (at most 63, starting with a letter or digit)"
)
VALUE_RULE = "letters, digits, '.', '_', '-' (at most 63)"


def parse_label(text: str, *, field: str = "label") -> tuple[str, str]:
    """``"env=prod"`` -> ``("env", "prod")``."""
    key, sep, value = text.partition("=")
    if not sep:
        raise InvalidInput(
            f'{field}: "{text}" is not key=value', field=field, value=text, allowed="key=value"
        )
    key, value = key.strip(), value.strip()
    if not _KEY.fullmatch(key):
        raise InvalidInput(
            f'{field}: key "{key}" is not valid; allowed: {KEY_RULE}',
            field=field,
            value=text,
            allowed=KEY_RULE,
        )
    if not _VALUE.fullmatch(value):
        raise InvalidInput(
            f'{field}: value "{value}" of "{key}" is not valid; allowed: {VALUE_RULE}',
            field=field,
            value=text,
            allowed=VALUE_RULE,
        )
    return key, value


def parse_labels(items: Iterable[str], *, field: str = "label") -> dict[str, str]:
    """Several ``key=value`` items; a key given twice is an error."""
    labels: dict[str, str] = {}
    for item in items:
        key, value = parse_label(item, field=field)
        if key in labels and labels[key] != value:
            raise InvalidInput(
                f'{field}: "{key}" is given twice ({labels[key]!r} and {value!r})',
                field=field,
                value=item,
                allowed="each key once",
            )
        labels[key] = value
    return labels


def parse_selector(text: str | None) -> dict[str, str]:
    """``"env=prod,role=pbx"`` -> ``{"env": "prod", "role": "pbx"}``; empty means all targets."""
    if text is None or not text.strip():
        return {}
    return parse_labels((part for part in text.split(",")), field="selector")


def format_selector(selector: Mapping[str, str]) -> str:
    return ",".join(f"{key}={value}" for key, value in sorted(selector.items()))


def selector_matches(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())
