"""Safety checkers over the runs table and the append-only effects file.

Each execution appends ``start`` before its work and ``end`` after it, outside the database:
``<kind> <real unix time> <slot> <target> <generation>:<claim> <node>``.

- C1: at most one execution (and one committed outcome) per slot.
- C2: the generation never decreases, in the order executions started.
- C3: every due slot either ran or has a recorded reason.
- C4: executions of different nodes or generations never overlap in time.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from sqlalchemy import select

from fleetcron.cron import parse
from fleetcron.services.context import App
from fleetcron.store.schema import Assignment, Job, Run

COMMITTED = ("succeeded", "failed", "timed_out")


class SafetyViolation(AssertionError):
    pass


@dataclass(frozen=True)
class Effect:
    kind: str
    at: float
    slot: str
    target: str
    generation: int
    claim: int
    node: str


def read_effects(path: Path) -> list[Effect]:
    effects = []
    if not path.exists():
        return effects
    for line in path.read_text().splitlines():
        kind, at, slot, target, token, node = line.split()
        generation, claim = token.split(":")
        effects.append(Effect(kind, float(at), slot, target, int(generation), int(claim), node))
    return effects


def c1_one_execution_per_slot(app: App, effects: list[Effect]) -> None:
    starts = Counter((e.slot, e.target) for e in effects if e.kind == "start")
    twice = [key for key, n in starts.items() if n > 1]
    if twice:
        raise SafetyViolation(f"C1: slots executed more than once: {twice[:5]}")
    with app.db.read() as session:
        rows = session.execute(
            select(Run.assignment_id, Run.scheduled_for).where(Run.status.in_(COMMITTED))
        ).all()
    committed = Counter((r.assignment_id, r.scheduled_for) for r in rows)
    doubled = [key for key, n in committed.items() if n > 1]
    if doubled:
        raise SafetyViolation(f"C1: slots with more than one committed outcome: {doubled[:5]}")


def c2_generation_never_decreases(effects: list[Effect]) -> None:
    highest = 0
    for e in sorted((e for e in effects if e.kind == "start"), key=lambda e: e.at):
        if e.generation < highest:
            raise SafetyViolation(
                f"C2: generation {e.generation} started after generation {highest}"
            )
        highest = e.generation


def c3_every_due_slot_accounted_for(app: App, start: datetime, end: datetime) -> None:
    """Slots in (start, end] of every enabled assignment have a run row."""
    with app.db.read() as session:
        assignments = session.execute(
            select(Assignment.id, Job.schedule, Job.timezone).join(Job).where(Assignment.enabled)
        ).all()
        recorded = {
            (r.assignment_id, r.scheduled_for)
            for r in session.execute(select(Run.assignment_id, Run.scheduled_for))
        }
    missing = [
        (a.id, slot)
        for a in assignments
        for slot in parse(a.schedule, a.timezone).between(start, end)
        if (a.id, slot) not in recorded
    ]
    if missing:
        raise SafetyViolation(f"C3: {len(missing)} due slot(s) with no record, e.g. {missing[:3]}")


def c4_no_overlap_across_owners(effects: list[Effect], until: float) -> None:
    """No two (node, generation) ever executed at the same time."""
    spans: dict[tuple[str, int], list[float]] = defaultdict(lambda: [float("inf"), float("-inf")])
    ends = {(e.slot, e.target): e.at for e in effects if e.kind == "end"}
    for e in effects:
        if e.kind != "start":
            continue
        span = spans[(e.node, e.generation)]
        span[0] = min(span[0], e.at)
        span[1] = max(span[1], ends.get((e.slot, e.target), until))
    owners = sorted(spans.items(), key=lambda item: item[1][0])
    for i, (first, (first_start, first_end)) in enumerate(owners):
        for second, (second_start, second_end) in owners[i + 1 :]:
            if second_start < first_end and first_start < second_end:
                raise SafetyViolation(
                    f"C4: {second} started executing at {second_start:.3f} while {first} "
                    f"was still executing until {first_end:.3f}"
                )
