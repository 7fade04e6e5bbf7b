"""When one target starts inside a slot: the one rule, read by the scheduler's dispatch,
the upcoming view, the job page and the rollout plan. Pure: ids and options in, seconds out.

A scheduled start waits, after its slot, the target's **spread offset** (stable: a hash of
the job and target ids, in ``[0, spread_s)``) and then its **jitter** (another hash, in
``[0, jitter_s]``). Both come from hashes, not ``random``, so a target keeps its place from
slot to slot, across restarts and owners, and a preview shows the very second the
scheduler will use. A run not started by the schedule (run now, catch-up, retry) does not
wait: its window is empty.

For an operator the two options are one thing, the **start window** of a slot: its targets
start between the slot and ``spread_s + jitter_s`` seconds after it, each at a place of its
own. :func:`window_words` says so in one line (the job page, the jobs list, the upcoming
view); the job form explains it once (``templates/start_window_help.html``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta

#: The only trigger whose start waits for its window.
WAITING_TRIGGER = "schedule"


def jitter_offset(job_id: int, target_id: int, jitter_s: int) -> float:
    """Deterministic delay in [0, jitter_s] seconds for one target of a fire, so a fleet
    is not hit in the same second."""
    if jitter_s <= 0:
        return 0.0
    digest = hashlib.blake2b(f"{job_id}:{target_id}".encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "big") % (jitter_s * 1000 + 1)) / 1000


def spread_offset(job_id: int, target_id: int, spread_s: int) -> float:
    """The stable offset of one target inside a job's spread window: in [0, spread_s)
    seconds, in millisecond steps, so a fleet's targets fall evenly over the window.
    Another hash than :func:`jitter_offset`'s, so the two offsets do not line up."""
    if spread_s <= 0:
        return 0.0
    digest = hashlib.blake2b(f"spread:{job_id}:{target_id}".encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "big") % (spread_s * 1000)) / 1000


@dataclass(frozen=True)
class StartWindow:
    """One target's start inside a slot, in seconds after the slot."""

    #: The job's options the window comes from (0 and 0 for a start that does not wait).
    spread_s: int
    jitter_s: int
    #: The target's stable place in the spread window.
    offset_s: float
    #: The target's jitter, at most ``jitter_s``.
    jitter_offset_s: float

    @property
    def delay_s(self) -> float:
        """Seconds the start waits after its slot: offset plus jitter, at most
        ``spread_s + jitter_s`` (which the job options bound together). The run's claim
        deadline adds this wait to its timeout."""
        return self.offset_s + self.jitter_offset_s

    @property
    def bound_s(self) -> float:
        """The latest this target can start after its slot: its offset plus the jitter bound."""
        return self.offset_s + self.jitter_s

    def start(self, slot: datetime) -> datetime:
        """The moment the target's command is started for ``slot``."""
        return slot + timedelta(seconds=self.delay_s)

    def as_dict(self) -> dict[str, float | int]:
        return {
            "spread_s": self.spread_s,
            "jitter_s": self.jitter_s,
            "offset_s": self.offset_s,
            "jitter_offset_s": self.jitter_offset_s,
            "delay_s": round(self.delay_s, 3),
        }


NO_WAIT = StartWindow(0, 0, 0.0, 0.0)


def window_words(spread_s: int, jitter_s: int) -> str:
    """A job's start window in one line, as every page says it ("" when its targets start at
    the slot's second): how long it is, and what each target's place in it is made of."""
    spread_s, jitter_s = max(0, spread_s), max(0, jitter_s)
    if not spread_s and not jitter_s:
        return ""
    if not jitter_s:
        return f"starts within {spread_s} s, each target at its own fixed offset"
    if not spread_s:
        return f"starts within {jitter_s} s, each target at its own jitter (fixed too)"
    return (
        f"starts within {spread_s + jitter_s} s, each target at its own fixed offset in "
        f"{spread_s} s plus up to {jitter_s} s of jitter (fixed too)"
    )


def start_window(
    job_id: int,
    target_id: int,
    *,
    spread_s: int,
    jitter_s: int,
    trigger: str = WAITING_TRIGGER,
) -> StartWindow:
    """The start window of ``target_id`` in a slot of ``job_id`` fired by ``trigger``."""
    if trigger != WAITING_TRIGGER or (spread_s <= 0 and jitter_s <= 0):
        return NO_WAIT
    return StartWindow(
        spread_s,
        jitter_s,
        spread_offset(job_id, target_id, spread_s),
        jitter_offset(job_id, target_id, jitter_s),
    )


__all__ = [
    "NO_WAIT",
    "WAITING_TRIGGER",
    "StartWindow",
    "jitter_offset",
    "spread_offset",
    "start_window",
    "window_words",
]
