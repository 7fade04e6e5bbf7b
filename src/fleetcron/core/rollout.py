"""Rollouts of bulk jobs: which of one slot's targets start now, which wait, and when the
rest of the slot is halted. Pure: no I/O, no clock (``now`` is an argument).

A job with rollout options (``batch``, ``batch_pause_s``, ``max_failures``, ``canary``)
does not start every target of a slot at once. The slot's rows are all recorded when it
fires (``pending``, see ``store/runs.py``), and :func:`plan_rollout` decides from those rows
alone — no memory of earlier decisions — what happens next, so any owner, including a new
one after a failover, continues the same plan.

The plan, over the slot's members (one per target, ordered stably: canaries first, then
by target name, then by assignment id):

- **Waves.** The canaries are the first wave (all at once, whatever ``batch`` says); the
  other members follow in waves of ``batch`` (a count, or a percentage of the slot's
  members rounded up; without ``batch`` all of them in one wave). A wave starts when every
  member of the earlier waves has finished and ``batch_pause_s`` has passed since the last
  of them finished. The first wave starts at once.
- **Canaries.** When a canary fails (an attempt of it counts as a failure, below) or ends
  in anything but ``succeeded`` the rest of the slot is halted. When ``canary`` is set and
  none of the slot's targets is a canary, the slot is halted before anything runs
  (failing closed: a rollout that asked for a canary never runs without one).
- **Threshold.** ``max_failures`` (a count, or a percentage of the slot's members rounded
  up, at least 1) is reached when that many members failed; the rest of the slot (every
  member not started yet) is halted at once. Members already running finish.
- **What counts as a failure**: a member one of whose attempts in this slot ended in
  :data:`ROLLOUT_FAILURES` (``failed``, ``timed_out``, ``connect_error``, ``lost``,
  ``fenced``). A member counts once however many attempts it had, and a retry that later
  succeeds does not take the failure back: the change needed a retry, which is what a
  threshold is there to catch. ``interrupted`` (the scheduler was stopped) is not a failure:
  it says nothing about the change.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Final, NamedTuple

from fleetcron.core.bounded import named_few
from fleetcron.core.labels import parse_selector, selector_matches
from fleetcron.core.statuses import RunStatus
from fleetcron.core.validation import validate_name
from fleetcron.errors import InvalidInput

ROLLOUT_FAILURES: Final = (
    RunStatus.FAILED,
    RunStatus.TIMED_OUT,
    RunStatus.CONNECT_ERROR,
    RunStatus.LOST,
    RunStatus.FENCED,
)
"""The outcomes that count toward ``max_failures`` and halt at a canary (the alerting
failures: ``interrupted`` is left out)."""

NOT_STARTED: Final = (RunStatus.PENDING,)
"""A member whose first attempt is still held by the rollout."""

IN_FLIGHT: Final = (RunStatus.QUEUED, RunStatus.RUNNING)

#: Longest list of target names a halt reason spells out; the rest are counted.
REASON_NAMES: Final = 20
MAX_PAUSE_S: Final = 86400
_AMOUNT = re.compile(r"([0-9]{1,6})(%?)")
AMOUNT_RULE: Final = (
    "a whole number of targets (at least 1, e.g. 10) or a percentage (1% to 100%, e.g. 10%)"
)


@dataclass(frozen=True)
class Amount:
    """A number of targets: ``value`` targets, or ``value`` percent of them."""

    value: int
    percent: bool = False

    def of(self, total: int) -> int:
        """How many targets of ``total`` (a percentage rounds up); at least 1 when there
        is any target, and never more than ``total``."""
        if total <= 0:
            return 0
        count = math.ceil(self.value * total / 100) if self.percent else self.value
        return max(1, min(count, total))

    def __str__(self) -> str:
        return f"{self.value}%" if self.percent else str(self.value)


def parse_amount(text: str | int | None, *, field: str) -> Amount | None:
    """``"10"`` or ``10`` -> 10 targets; ``"10%"`` -> 10 percent; empty or None: not set.

    Raises :class:`InvalidInput` naming the field, the value and what is allowed."""
    if text is None:
        return None
    raw = str(text).strip().replace(" ", "")
    if not raw:
        return None
    match = _AMOUNT.fullmatch(raw)
    if match is not None:
        value, percent = int(match.group(1)), bool(match.group(2))
        if value >= 1 and (not percent or value <= 100):
            return Amount(value, percent)
    raise InvalidInput(
        f"{field}: {str(text)!r} is not a number of targets; allowed: {AMOUNT_RULE}",
        field=field,
        value=text,
        allowed=AMOUNT_RULE,
    )


CANARY_RULE: Final = (
    "target names separated by commas (web1,web2) or a label selector (role=canary)"
)


@dataclass(frozen=True)
class Canary:
    """The canaries of a rollout: named targets, or the targets a selector matches."""

    names: tuple[str, ...] = ()
    selector: Mapping[str, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.names or self.selector)

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        if self.selector:
            return selector_matches(self.selector, labels)
        return name in self.names

    def __str__(self) -> str:
        if self.selector:
            return ",".join(f"{k}={v}" for k, v in sorted(self.selector.items()))
        return ",".join(self.names)


def parse_canary(text: str | Sequence[str] | None, *, field: str = "canary") -> Canary:
    """``"web1,web2"`` (target names) or ``"role=canary"`` (a selector, recognised by its
    ``=``); a list of names is accepted too. Empty: no canary."""
    if text is None:
        return Canary()
    parts = [p.strip() for p in (text.split(",") if isinstance(text, str) else text)]
    parts = [p for p in parts if p]
    if not parts:
        return Canary()
    if any("=" in p for p in parts):
        if not all("=" in p for p in parts):
            raise InvalidInput(
                f"{field}: {text!r} mixes target names and labels; allowed: {CANARY_RULE}",
                field=field,
                value=text,
                allowed=CANARY_RULE,
            )
        return Canary(selector=parse_selector(",".join(parts)))
    for part in parts:
        validate_name(part, field=field)
    return Canary(names=tuple(dict.fromkeys(parts)))


def normal_amount(text: str, *, field: str) -> str:
    """An amount as stored: ``"10"`` or ``"10%"`` (spaces dropped), ``""`` when not set."""
    amount = parse_amount(text, field=field)
    return "" if amount is None else str(amount)


def normal_canary(text: str, *, field: str = "canary") -> str:
    """The canary option as stored: names or a selector, comma-separated, ``""`` if none."""
    return str(parse_canary(text, field=field))


@dataclass(frozen=True)
class RolloutOptions:
    """A job's rollout options, parsed."""

    batch: Amount | None = None
    batch_pause_s: int = 0
    max_failures: Amount | None = None
    canary: Canary = field(default_factory=Canary)

    @property
    def active(self) -> bool:
        """Whether a slot of the job is rolled out at all (``batch_pause_s`` alone: no)."""
        return self.batch is not None or self.max_failures is not None or bool(self.canary)


def rollout_options(
    batch: str | int | None,
    batch_pause_s: int | None,
    max_failures: str | int | None,
    canary: str | Sequence[str] | None,
) -> RolloutOptions:
    """The options from their stored (or typed) form; raises :class:`InvalidInput`."""
    pause = 0 if batch_pause_s is None else int(batch_pause_s)
    if not 0 <= pause <= MAX_PAUSE_S:
        raise InvalidInput(
            f"batch_pause_s: {batch_pause_s!r} is out of range; "
            f"allowed: 0 to {MAX_PAUSE_S} seconds",
            field="batch_pause_s",
            value=batch_pause_s,
            allowed=f"0 to {MAX_PAUSE_S} seconds",
        )
    return RolloutOptions(
        batch=parse_amount(batch, field="batch"),
        batch_pause_s=pause,
        max_failures=parse_amount(max_failures, field="max_failures"),
        canary=parse_canary(canary),
    )


def manual_run_options(options: RolloutOptions, any_canary: bool) -> RolloutOptions:
    """A manual run's rollout: the job's, except that a run none of whose targets is a
    canary (a re-run of the targets a threshold halted after the canaries succeeded, a run
    on chosen targets) is not gated by canaries; it still goes in batches under the
    threshold. A scheduled slot without a canary never runs (it fails closed): there no
    operator chose the targets."""
    if options.canary and not any_canary:
        return replace(options, canary=Canary())
    return options


class Attempt(NamedTuple):
    """One row of a member in the slot (a tuple: a slot of thousands is read every tick)."""

    status: RunStatus
    finished_at: datetime | None = None
    run_id: int = 0


@dataclass(frozen=True)
class Member:
    """One target of the slot, with its rows in the slot, oldest attempt first."""

    assignment_id: int
    target_name: str
    attempts: tuple[Attempt, ...]
    canary: bool = False

    @property
    def latest(self) -> Attempt:
        return self.attempts[-1]

    @property
    def not_started(self) -> bool:
        return self.attempts[0].status in NOT_STARTED

    @property
    def in_flight(self) -> bool:
        return self.latest.status in IN_FLIGHT

    @property
    def done(self) -> bool:
        """Started, and its newest attempt is decided."""
        return not self.not_started and not self.in_flight

    @property
    def failure(self) -> Attempt | None:
        """The first attempt that counts as this member's failure, if any."""
        return next((a for a in self.attempts if a.status in ROLLOUT_FAILURES), None)

    @property
    def finished_at(self) -> datetime | None:
        moments = [a.finished_at for a in self.attempts if a.finished_at is not None]
        return max(moments) if moments else None


@dataclass(frozen=True)
class Halt:
    """Why the rest of the slot does not run."""

    reason: str
    #: ``canary``, ``no_canary`` or ``max_failures``.
    cause: str
    failed: tuple[str, ...] = ()


@dataclass(frozen=True)
class RolloutPlan:
    """What to do with the slot's members now (assignment ids, in the stable order)."""

    start: tuple[int, ...] = ()
    wait: tuple[int, ...] = ()
    #: Members never started that are recorded ``skipped`` now (set only with ``halt``).
    skip: tuple[int, ...] = ()
    halt: Halt | None = None
    #: The wave starting now or next (0-based), of ``waves``.
    wave: int = 0
    waves: int = 0
    #: When waiting for a pause: the moment it ends.
    resume_at: datetime | None = None

    @property
    def finished(self) -> bool:
        """Nothing is left to start or to skip."""
        return not (self.start or self.wait or self.skip)


def ordered(members: Sequence[Member]) -> list[Member]:
    """The stable order of a slot's members: canaries first, then by name, then by id."""
    return sorted(members, key=lambda m: (not m.canary, m.target_name, m.assignment_id))


def waves_of(members: Sequence[Member], options: RolloutOptions) -> list[list[Member]]:
    """The slot's members in waves (see the module docstring), in the stable order."""
    members = ordered(members)
    canaries = [m for m in members if m.canary]
    rest = [m for m in members if not m.canary]
    size = options.batch.of(len(members)) if options.batch is not None else len(rest)
    waves = [canaries] if canaries else []
    waves += [rest[i : i + size] for i in range(0, len(rest), max(size, 1))]
    return waves


def threshold(options: RolloutOptions, total: int) -> int | None:
    """How many failed members halt the slot, or None without ``max_failures``."""
    if options.max_failures is None:
        return None
    return max(1, options.max_failures.of(total))


def plan_rollout(members: Sequence[Member], options: RolloutOptions, now: datetime) -> RolloutPlan:
    """Decide the slot's next step from its rows (see the module docstring)."""
    waves = waves_of(members, options)
    pending = [m for wave in waves for m in wave if m.not_started]
    if not members:
        return RolloutPlan()
    halt = _halt(waves, members, options)
    if halt is not None:
        return RolloutPlan(
            skip=tuple(m.assignment_id for m in pending), halt=halt, waves=len(waves)
        )
    if not pending:
        return RolloutPlan(wave=len(waves), waves=len(waves))
    current = next(i for i, wave in enumerate(waves) if any(m.not_started for m in wave))
    earlier = [m for wave in waves[:current] for m in wave]
    waiting = tuple(m.assignment_id for m in pending)
    if not all(m.done for m in earlier):
        return RolloutPlan(wait=waiting, wave=current, waves=len(waves))
    finished = [m.finished_at for m in earlier if m.finished_at is not None]
    if finished and options.batch_pause_s > 0:
        resume_at = max(finished) + timedelta(seconds=options.batch_pause_s)
        if now < resume_at:
            return RolloutPlan(wait=waiting, wave=current, waves=len(waves), resume_at=resume_at)
    start = tuple(m.assignment_id for m in waves[current] if m.not_started)
    return RolloutPlan(
        start=start,
        wait=tuple(a for a in waiting if a not in start),
        wave=current,
        waves=len(waves),
    )


def _halt(
    waves: Sequence[Sequence[Member]], members: Sequence[Member], options: RolloutOptions
) -> Halt | None:
    if options.canary and not any(m.canary for m in members):
        return Halt(
            f"rollout halted: no target of this slot is a canary (canary {options.canary}); "
            "nothing runs without one",
            "no_canary",
        )
    for member in ordered(members):
        failed = member.failure if member.canary else None
        if member.canary and (
            failed is not None or (member.done and member.latest.status != RunStatus.SUCCEEDED)
        ):
            status = (failed or member.latest).status
            return Halt(
                f"rollout halted: canary {member.target_name} ended {status}; "
                "the other targets do not start",
                "canary",
                (member.target_name,),
            )
    limit = threshold(options, len(members))
    if limit is None:
        return None
    failures = sorted(
        ((m, f) for m in members if (f := m.failure) is not None),
        key=lambda pair: (
            pair[1].finished_at is None,
            pair[1].finished_at or datetime.min,
            pair[0].target_name,
        ),
    )
    if len(failures) < limit:
        return None
    names = tuple(m.target_name for m, _ in failures)
    spec = str(options.max_failures)
    if options.max_failures is not None and options.max_failures.percent:
        spec += f" ({limit} of {len(members)} targets)"
    return Halt(
        f"rollout halted: max_failures {spec} reached after failures on "
        f"{named_few(names, REASON_NAMES)}",
        "max_failures",
        names,
    )


__all__ = [
    "AMOUNT_RULE",
    "CANARY_RULE",
    "MAX_PAUSE_S",
    "ROLLOUT_FAILURES",
    "Amount",
    "Attempt",
    "Canary",
    "Halt",
    "Member",
    "RolloutOptions",
    "RolloutPlan",
    "manual_run_options",
    "normal_amount",
    "normal_canary",
    "ordered",
    "parse_amount",
    "parse_canary",
    "plan_rollout",
    "rollout_options",
    "threshold",
    "waves_of",
]
