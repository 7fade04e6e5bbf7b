"""The plan of one run of a job over chosen targets, shown before it runs: batches in the
order they start (canaries first), each target's zone and start window, the stop threshold
and what it halts, and the targets left out and why. Pure: the caller passes the targets.

The batches are not a second reading of the rollout rules: :func:`plan_run` asks
:func:`fleetcron.core.rollout.plan_rollout` — the function the scheduler asks on every
tick (``store/run_rollouts.py``) — over the very rows a run records (one ``pending`` row
per target), and plays the slot forward as the scheduler would if every started target
succeeded: a started member is marked finished, a paused one is skipped at its turn (as
the scheduler skips a row whose target is paused when its wave starts), until nothing is
left. A test compares this plan with a real scheduler's starts, target by target.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from fleetcron.core.rollout import (
    MAX_PAUSE_S,
    Attempt,
    Halt,
    Member,
    RolloutOptions,
    plan_rollout,
    threshold,
)
from fleetcron.core.start_window import StartWindow
from fleetcron.core.statuses import RunStatus

#: The reasons a target of the job is not in the plan.
EXCLUDED_WHY = {
    "disabled": "the job is paused on this target",
    "unpaired": "the target is unpaired: it runs nothing until it is paired again",
}

_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
#: A moment past any pause: the simulation never waits for one.
_AFTER_PAUSES = _EPOCH + timedelta(seconds=MAX_PAUSE_S + 1)


@dataclass(frozen=True)
class PlanTarget:
    """One target a run would cover."""

    assignment_id: int
    name: str
    zone: str
    canary: bool = False
    #: Paused targets get a row and are skipped at their turn (counted in percentages).
    paused: bool = False
    #: Its newest run of the job could not connect (health's "unreachable"): it will
    #: likely end ``connect_error``, which counts toward the threshold.
    unreachable: bool = False
    #: Its start window in a scheduled slot, and that slot's next start in its zone.
    window: StartWindow | None = None
    next_start_local: datetime | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "target": self.name,
            "zone": self.zone,
            "canary": self.canary,
            "paused": self.paused,
            "unreachable": self.unreachable,
            "window": None if self.window is None else self.window.as_dict(),
            "next_start_local": None
            if self.next_start_local is None
            else self.next_start_local.isoformat(),
        }


@dataclass(frozen=True)
class Excluded:
    name: str
    why: str

    def as_dict(self) -> dict[str, str]:
        return {"target": self.name, "why": self.why}


@dataclass(frozen=True)
class Batch:
    """One wave: the targets it starts together, and those skipped at its turn (paused)."""

    number: int
    canary: bool
    starts: tuple[PlanTarget, ...]
    skipped: tuple[PlanTarget, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "batch": self.number,
            "canary": self.canary,
            "targets": [t.as_dict() for t in self.starts],
            "skipped_paused": [t.name for t in self.skipped],
        }


@dataclass(frozen=True)
class RunPlan:
    """What a run would do; ``rolled_out`` is False for a job without rollout options or
    a run asked for all at once (one batch, no threshold)."""

    job: str
    rolled_out: bool
    batches: tuple[Batch, ...]
    excluded: tuple[Excluded, ...] = ()
    options: RolloutOptions = field(default_factory=RolloutOptions)
    #: Failed targets that halt the rest, of ``members`` rows (None: no threshold).
    threshold: int | None = None
    members: int = 0
    #: Set when the run would be halted before anything starts (no canary among the
    #: targets, or a canary paused).
    halt: Halt | None = None

    @property
    def order(self) -> list[str]:
        """Every target that would start, in the order of the batches."""
        return [t.name for b in self.batches for t in b.starts]

    def halts_what(self) -> str:
        """What the stop rules would halt, in a sentence."""
        if self.halt is not None:
            return self.halt.reason
        if not self.rolled_out:
            return "nothing: every target starts at once, whatever the others do"
        parts = []
        if self.options.canary:
            parts.append("a canary that does not succeed halts every target after it")
        if self.threshold is not None:
            parts.append(
                f"{self.threshold} failed of {self.members} (max_failures "
                f"{self.options.max_failures}) halt the targets not started yet"
            )
        return "; ".join(parts) or "nothing: no canary and no max_failures"

    def as_dict(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "rolled_out": self.rolled_out,
            "batch_pause_s": self.options.batch_pause_s if self.rolled_out else 0,
            "threshold": self.threshold,
            "max_failures": None
            if self.options.max_failures is None
            else str(self.options.max_failures),
            "canary": str(self.options.canary) or None,
            "members": self.members,
            "halts": self.halts_what(),
            "halted_before_start": self.halt is not None,
            "batches": [b.as_dict() for b in self.batches],
            "excluded": [e.as_dict() for e in self.excluded],
        }


def plan_run(
    job: str,
    targets: Sequence[PlanTarget],
    options: RolloutOptions,
    *,
    all_at_once: bool = False,
    excluded: Sequence[Excluded] = (),
) -> RunPlan:
    """The plan of a run over ``targets`` (each with its ``canary`` flag set from the
    options by the caller, as the scheduler matches them), played forward with the
    scheduler's own :func:`plan_rollout`."""
    in_order = sorted(targets, key=lambda t: (not t.canary, t.name, t.assignment_id))
    if all_at_once or not options.active:
        starts = tuple(t for t in in_order if not t.paused)
        skipped = tuple(t for t in in_order if t.paused)
        batch = Batch(1, False, starts, skipped)
        return RunPlan(job, False, (batch,) if targets else (), tuple(excluded), options)
    batches, halt = _played_forward(targets, options)
    members = len({t.assignment_id for t in targets})
    return RunPlan(
        job,
        True,
        tuple(batches),
        tuple(excluded),
        options,
        threshold(options, members),
        members,
        halt,
    )


def _played_forward(
    targets: Sequence[PlanTarget], options: RolloutOptions
) -> tuple[list[Batch], Halt | None]:
    """The batches :func:`plan_rollout` starts when every started run succeeds at once,
    and the halt that stops the rollout before its first batch, if any."""
    by_id = {t.assignment_id: t for t in targets}
    members = {
        t.assignment_id: Member(
            t.assignment_id, t.name, (Attempt(RunStatus.PENDING),), canary=t.canary
        )
        for t in targets
    }
    batches: list[Batch] = []
    halt: Halt | None = None
    for _ in range(len(members) + 1):  # each step starts or skips at least one member
        step = plan_rollout(list(members.values()), options, _AFTER_PAUSES)
        if step.halt is not None:
            halt = step.halt if not batches else None
            break
        if not step.start:
            break
        chosen = [by_id[aid] for aid in step.start]
        for t in chosen:
            done = RunStatus.SKIPPED if t.paused else RunStatus.SUCCEEDED
            members[t.assignment_id] = replace(
                members[t.assignment_id], attempts=(Attempt(done, _EPOCH),)
            )
        batches.append(
            Batch(
                len(batches) + 1,
                all(t.canary for t in chosen),
                tuple(t for t in chosen if not t.paused),
                tuple(t for t in chosen if t.paused),
            )
        )
    return batches, halt


__all__ = ["EXCLUDED_WHY", "Batch", "Excluded", "PlanTarget", "RunPlan", "plan_run"]
