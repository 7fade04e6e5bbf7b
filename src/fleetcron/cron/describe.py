"""English descriptions of normalized expressions, worded by cron-descriptor."""

from __future__ import annotations

from cron_descriptor import ExpressionDescriptor, Options  # type: ignore[import-untyped]


def describe(normalized: str) -> str:
    """Describe a normalized 5-field expression, e.g. "At 02:00, only on Sunday".

    cron-descriptor reads both day fields as "or"; when either starts with "*" cron requires
    both, so that case gets its own wording.
    """
    options = Options()
    options.use_24hour_time_format = True
    options.verbose = False
    try:
        text = str(ExpressionDescriptor(normalized, options).get_description())
    except Exception:  # a wording failure must not make a valid schedule unusable
        return normalized
    dom, dow = normalized.split()[2::2]
    if dom.startswith("*") and dom != "*" and dow != "*":
        text = text.replace(", or ", ", and ", 1)
    return text
