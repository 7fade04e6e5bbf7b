"""The rule against registering one command twice on one target: two jobs that would run
the same command (compared without surrounding whitespace) on a common target are a
duplicate registration, unless one of them allows duplicates.

Pure: the jobs service (one job against the store) and schedules as code (a whole file
against the store, and the export that marks the pairs already there) give it plain
registrations.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from itertools import combinations


@dataclass(frozen=True)
class Registration:
    """A job's command on the targets it covers (bulk: every matched target, paused or not;
    individual: its target, paired or not)."""

    job: str
    command: str
    targets: frozenset[str]
    allow_duplicate: bool = False


@dataclass(frozen=True)
class Duplicate:
    """Two jobs registering the same command on the same targets."""

    command: str
    jobs: tuple[str, str]
    targets: tuple[str, ...]

    def describe(self) -> str:
        first, second = self.jobs
        where = "target" if len(self.targets) == 1 else "targets"
        return (
            f"jobs {first} and {second} both run {self.command!r} on {where} "
            f"{', '.join(self.targets)}; remove one, or set allow_duplicate: true on one of them"
        )


def find_duplicates(
    registrations: Iterable[Registration], *, among: Collection[str] | None = None
) -> list[Duplicate]:
    """Pairs of jobs that run the same command (compared without surrounding whitespace)
    on a common target, unless one of the two allows duplicates.

    With ``among``, only pairs with at least one job in it are reported (an apply answers
    for the jobs of its file, not for duplicates already in the store between others).
    """
    by_command: dict[str, list[Registration]] = defaultdict(list)
    for registration in registrations:
        by_command[registration.command.strip()].append(registration)
    found: list[Duplicate] = []
    for command, group in by_command.items():
        for a, b in combinations(sorted(group, key=lambda r: r.job), 2):
            if a.allow_duplicate or b.allow_duplicate:
                continue
            if among is not None and a.job not in among and b.job not in among:
                continue
            common = a.targets & b.targets
            if common:
                found.append(Duplicate(command, (a.job, b.job), tuple(sorted(common))))
    return sorted(found, key=lambda d: (d.jobs, d.command))


def duplicates_to_allow(duplicates: Iterable[Duplicate]) -> dict[str, list[Duplicate]]:
    """Which jobs must say ``allow_duplicate: true`` so that every pair is allowed: the
    second job of each pair not already covered. Returns job -> the pairs it answers for."""
    marked: dict[str, list[Duplicate]] = {}
    for duplicate in duplicates:
        first, second = duplicate.jobs
        holder = first if first in marked and second not in marked else second
        marked.setdefault(holder, []).append(duplicate)
    return marked


__all__ = ["Duplicate", "Registration", "duplicates_to_allow", "find_duplicates"]
