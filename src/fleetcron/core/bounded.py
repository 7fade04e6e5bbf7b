"""Counts read up to a cap: how many, and whether there were more; lists of names cut
to a few (:func:`named_few`), so that a message about 5,000 targets stays one line.

A count that an operator reads ("failed 12 times in a row", "37 failed connections") is
taken by reading at most ``cap + 1`` rows: the cost of an exact count grows with what is
counted (a day of a minute job's failures is 1,440 runs per target and job), and past a
few hundred the exact number tells the reader nothing the start date does not. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

#: How many names a message lists before "and N more".
NAMED = 10


@dataclass(frozen=True)
class Bounded:
    """``n`` counted; ``more``: there were more than ``n`` (``n`` is then the cap)."""

    n: int
    more: bool = False

    @classmethod
    def of(cls, counted: int, cap: int) -> Bounded:
        """What a count of at most ``cap + 1`` rows says."""
        return cls(min(counted, cap), counted > cap)

    def __str__(self) -> str:
        return f"more than {self.n:,}" if self.more else f"{self.n:,}"

    @property
    def short(self) -> str:
        """For a table cell or a badge: ``100+`` for more than 100."""
        return f"{self.n:,}+" if self.more else f"{self.n:,}"


def named_few(names: Sequence[str], limit: int = NAMED, *, total: int | None = None) -> str:
    """The first ``limit`` of ``names``, comma separated, then "and N more" for the rest;
    ``total``: how many there are when ``names`` holds only the first of them."""
    count = len(names) if total is None else total
    shown = ", ".join(names[:limit])
    more = count - min(len(names), limit)
    return f"{shown} and {more:,} more" if more > 0 else shown
