"""Safety checkers over the runs table and the append-only effects file.

Each execution appends ``start`` before its work and ``end`` after it, outside the database:
``<kind> <real unix time> <slot> <target> <generation>:<claim> <node>``.

- C1: at most one execution (and one committed outcome) per slot.
- C2: the generation never decreases, in the order executions started.
- C3: every due slot either ran or has a recorded reason.
- C4: executions of different nodes or generations never overlap in time.
- C5: no command of an older generation is still running on a target when a newer
  generation starts one there (killed commands write no ``end`` line: their stop time is
  when :class:`netfault.ProcessWatch` saw their process group gone from /proc).
- C6: every assignment's newest-run columns agree with its runs (``store/run_newest.py``),
  whichever node and which path (claim, completion, fencing, loss) wrote them.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from sqlalchemy import select

from fleetcron.app import App
from fleetcron.core import statuses
from fleetcron.cron import parse
from fleetcron.store import run_newest
from fleetcron.store.schema import Assignment, Job, Run

COMMITTED = statuses.REACHED
"""Runs whose command ran on the target."""


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
    #: The run's shard (0 in the token's form before shards).
    shard: int = 0


def read_effects(path: Path) -> list[Effect]:
    effects: list[Effect] = []
    if not path.exists():
        return effects
    for line in path.read_text().splitlines():
        kind, at, slot, target, token, node, *_pid = line.split()
        # FLEETCRON_FENCING_TOKEN: <shard>:<generation>:<claim> (<generation>:<claim> before
        # shards); all the runs of one target are of its one shard.
        *shard, generation, claim = token.split(":")
        effects.append(
            Effect(
                kind,
                float(at),
                slot,
                target,
                int(generation),
                int(claim),
                node,
                int(shard[0]) if shard else 0,
            )
        )
    return effects


def stopped_at(
    effects: list[Effect], gone_at: Mapping[tuple[str, str], float], until: float
) -> dict[tuple[str, str], float]:
    """When each execution stopped: its ``end`` line, else the moment its process group was
    seen gone (a killed command writes no end line), else ``until`` (still running)."""
    ends = {(e.slot, e.target): e.at for e in effects if e.kind == "end"}
    return {
        (e.slot, e.target): ends.get((e.slot, e.target), gone_at.get((e.slot, e.target), until))
        for e in effects
        if e.kind == "start"
    }


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


def c4_no_overlap_across_owners(
    effects: list[Effect], until: float, gone_at: Mapping[tuple[str, str], float] | None = None
) -> None:
    """No two (node, generation) ever executed at the same time in one shard (ownership,
    generations and active cleanup are per shard: a shard whose target could not be
    cleaned keeps its old command to its deadline while a cleaned shard starts anew)."""
    spans: dict[tuple[int, str, int], list[float]] = defaultdict(
        lambda: [float("inf"), float("-inf")]
    )
    ends = stopped_at(effects, gone_at or {}, until)
    for e in effects:
        if e.kind != "start":
            continue
        span = spans[(e.shard, e.node, e.generation)]
        span[0] = min(span[0], e.at)
        span[1] = max(span[1], ends[(e.slot, e.target)])
    owners = sorted(spans.items(), key=lambda item: item[1][0])
    for i, (first, (first_start, first_end)) in enumerate(owners):
        for second, (second_start, second_end) in owners[i + 1 :]:
            if first[0] == second[0] and second_start < first_end and first_start < second_end:
                raise SafetyViolation(
                    f"C4: {second} started executing at {second_start:.3f} while {first} "
                    f"was still executing until {first_end:.3f}"
                )


def c5_no_older_generation_running_at_a_newer_start(
    effects: list[Effect], until: float, gone_at: Mapping[tuple[str, str], float]
) -> None:
    """When a generation starts a command on a target, no command of an older generation is
    still running there: not by its end line, nor (for killed ones) by /proc."""
    ends = stopped_at(effects, gone_at, until)
    by_target: dict[str, list[Effect]] = defaultdict(list)
    for e in effects:
        if e.kind == "start":
            by_target[e.target].append(e)
    for target, starts in by_target.items():
        for new in starts:
            for old in starts:
                if (
                    old.generation < new.generation
                    and old.at <= new.at < ends[(old.slot, old.target)]
                ):
                    raise SafetyViolation(
                        f"C5: generation {new.generation} ({new.node}) started slot {new.slot} "
                        f"on {target} at {new.at:.3f} while generation {old.generation} "
                        f"({old.node}) still ran slot {old.slot} there until "
                        f"{ends[(old.slot, old.target)]:.3f}"
                    )


def c6_newest_runs_kept(app: App) -> None:
    with app.db.read() as session:
        wrong = run_newest.stale(session)
    if wrong:
        raise SafetyViolation(f"C6: assignments whose newest-run columns are wrong: {wrong[:5]}")
