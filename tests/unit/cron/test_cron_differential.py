"""Differential test against cronsim, the closest public reference to Debian cron.

Random expressions (seeded, so failures reproduce) and random start times, in UTC and in
America/New_York: both engines must give the same next 50 fire times (compared in UTC).

Intended differences, kept out of the comparison:
* cronsim accepts a step without a range ("5/15"); we reject it, as cronie does, so the
  generator never produces one.
* For a fixed-time job started inside the second pass of a repeated hour, cronsim can return
  a first-pass time that lies before the start; we never return a time at or before the
  start, nor the same instant twice. Such cronsim results are dropped before comparing.
* cronsim reads a one-value range with a step ("6-6/1") like "6/1", i.e. 6 to the end of the
  field; cron and we read it as just 6. The generator does not produce such ranges.
* Names are only used where both accept them (three-letter day and month names).
"""

from __future__ import annotations

import itertools
import random
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from cronsim import CronSim

from fleetcron.cron import parse
from fleetcron.errors import CronError

FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("dom", 1, 31), ("month", 1, 12), ("dow", 0, 7))
DAY_NAMES = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
MONTH_NAMES = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]


def random_item(rng: random.Random, name: str, low: int, high: int) -> str:
    roll = rng.random()
    if name == "dom" and roll < 0.05:
        return rng.choice(["L", "LW"])
    if name == "dow" and roll < 0.05:
        return f"{rng.randint(0, 6)}#{rng.randint(1, 5)}"
    if name == "dow" and roll < 0.1:
        return f"{rng.randint(0, 7)}L"
    if roll < 0.3:
        return "*"
    if roll < 0.45:
        return f"*/{rng.randint(1, high - low + 1)}"
    a = rng.randint(low, high)
    if roll < 0.7:
        if name == "dow" and rng.random() < 0.3:
            return DAY_NAMES[a % 7]
        if name == "month" and rng.random() < 0.3:
            return MONTH_NAMES[a - 1]
        return str(a)
    b = rng.randint(a, high)
    if roll < 0.85:
        return f"{a}-{b}"
    if a == b:
        return str(a)  # cronsim reads "a-a/n" as "a/n"; see the module docstring
    return f"{a}-{b}/{rng.randint(1, high - low + 1)}"


def random_expression(rng: random.Random) -> str:
    fields = []
    for name, low, high in FIELDS:
        count = 1 if rng.random() < 0.7 else rng.randint(2, 3)
        fields.append(",".join(random_item(rng, name, low, high) for _ in range(count)))
    return " ".join(fields)


def cases(seed: int, count: int) -> list[tuple[str, datetime]]:
    rng = random.Random(seed)
    result: list[tuple[str, datetime]] = []
    while len(result) < count:
        expr = random_expression(rng)
        try:
            parse(expr)
        except CronError:
            continue  # e.g. "0 0 30 2 *": rejected at parse time, by design
        start = datetime(2000, 1, 1) + timedelta(seconds=rng.randint(0, 40 * 365 * 86400))
        result.append((expr, start))
    return result


def ours(expr: str, zone: str, start: datetime, count: int) -> list[datetime]:
    schedule = parse(expr, zone)
    return [f.astimezone(UTC) for f in itertools.islice(schedule.iter_after(start), count)]


def theirs(expr: str, start: datetime, count: int) -> list[datetime]:
    result: list[datetime] = []
    threshold = start.astimezone(UTC)
    for fire in CronSim(expr, start):
        moment = fire.astimezone(UTC)
        if moment > threshold:
            result.append(moment)
            threshold = moment
        if len(result) == count:
            break
    return result


@pytest.mark.parametrize("zone", ["UTC", "America/New_York"])
def test_next_50_fire_times_agree_with_cronsim(zone: str) -> None:
    tz = ZoneInfo(zone)
    mismatches = []
    for expr, naive_start in cases(seed=20260308, count=300):
        start = naive_start.replace(tzinfo=tz)
        if ours(expr, zone, start, 50) != theirs(expr, start, 50):
            mismatches.append(expr)
    assert mismatches == []


@pytest.mark.parametrize(
    "expr", ["30 2 * * *", "*/30 * * * *", "30 1 * * *", "0 * * * *", "15 1-3 * * *"]
)
def test_new_york_transition_days_agree_with_cronsim(expr: str) -> None:
    # 2026-03-08 02:00 EST -> 03:00 EDT and 2026-11-01 02:00 EDT -> 01:00 EST
    for day in (datetime(2026, 3, 7, 12), datetime(2026, 10, 31, 12)):
        start = day.replace(tzinfo=ZoneInfo("America/New_York"))
        assert ours(expr, "America/New_York", start, 50) == theirs(expr, start, 50)
