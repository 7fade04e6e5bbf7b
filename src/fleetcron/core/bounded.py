"""Counts read up to a cap: how many, and whether there were more.

A count that an operator reads ("failed 12 times in a row", "37 failed connections") is
taken by reading at most ``cap + 1`` rows: the cost of an exact count grows with what is
counted (a day of a minute job's failures is 1,440 runs per target and job), and past a
few hundred the exact number tells the reader nothing the start date does not. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass


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
