"""Upcoming fires (pure): grouping by zone, counts of paused and disabled targets, DST,
spread, rollout waves and the limit.

Europe/Berlin changes to summer time on 2026-03-29 (02:00 CET -> 03:00 CEST) and back on
2026-10-25 (03:00 CEST -> 02:00 CET); Asia/Tokyo has no DST (UTC+9).
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from fleetcron.core import rollout as slot_rollout
from fleetcron.core.rollout import RolloutOptions, rollout_options
from fleetcron.core.start_window import start_window, window_words
from fleetcron.core.statuses import RunStatus
from fleetcron.core.upcoming import JobFacts, Member, Rollout, rollout_plan, upcoming

NOON = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


def members(*names: str, zone: str | None = None) -> list[Member]:
    return [Member(name, zone, enabled=True, target_paused=False) for name in names]


def test_a_fixed_zone_job_fires_once_per_slot_with_every_target_counted() -> None:
    job = JobFacts("reload", "bulk", "0 2 * * *", "Europe/Berlin", members("a", "b", "c"))

    [fire] = upcoming([job], NOON, 24, "UTC").fires

    assert fire.at == datetime(2026, 3, 3, 1, 0, tzinfo=UTC)  # 02:00 CET
    assert (fire.zone, fire.active, fire.paused, fire.disabled, fire.state) == (
        "Europe/Berlin",
        3,
        0,
        0,
        "fires",
    )


def test_a_target_local_job_has_one_fire_per_zone_at_each_zones_wall_time() -> None:
    job = JobFacts(
        "maint",
        "bulk",
        "0 2 * * *",
        "target",
        [
            *members("tokyo1", "tokyo2", zone="Asia/Tokyo"),
            *members("berlin1", zone="Europe/Berlin"),
            *members("nozone"),  # falls back to the default zone
        ],
    )

    fires = upcoming([job], NOON, 24, "America/New_York").fires

    assert [(f.zone, f.active, f.at.astimezone(UTC).hour) for f in fires] == [
        ("Asia/Tokyo", 2, 17),
        ("Europe/Berlin", 1, 1),
        ("America/New_York", 1, 7),
    ]
    assert all(f.at.hour == 2 for f in fires)  # each in its own zone's wall time


def test_paused_targets_and_disabled_assignments_are_counted_apart() -> None:
    job = JobFacts(
        "reload",
        "bulk",
        "0 13 * * *",
        "UTC",
        [
            Member("a", None, enabled=True, target_paused=False),
            Member("b", None, enabled=True, target_paused=True),
            Member("c", None, enabled=False, target_paused=False),
            Member("d", None, enabled=False, target_paused=True),
        ],
    )

    [fire] = upcoming([job], NOON, 2, "UTC").fires

    assert (fire.active, fire.paused, fire.disabled, fire.state) == (1, 1, 2, "fires")


def test_a_fire_with_only_paused_or_disabled_targets_says_so() -> None:
    paused = JobFacts("p", "individual", "0 13 * * *", "UTC", [Member("a", None, True, True)])
    disabled = JobFacts("d", "individual", "0 13 * * *", "UTC", [Member("a", None, False, False)])

    fires = upcoming([paused, disabled], NOON, 2, "UTC").fires

    assert [(f.job, f.state) for f in fires] == [("d", "disabled"), ("p", "paused")]


def test_a_slot_in_the_spring_forward_gap_fires_once_right_after_the_change() -> None:
    job = JobFacts("nightly", "individual", "30 2 * * *", "Europe/Berlin", members("a"))
    start = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)

    fires = upcoming([job], start, 48, "UTC").fires

    assert [f.at.astimezone(UTC) for f in fires] == [
        datetime(2026, 3, 29, 1, 0, tzinfo=UTC),  # 03:00 CEST: the 02:30 that did not exist
        datetime(2026, 3, 30, 0, 30, tzinfo=UTC),  # 02:30 CEST
    ]


def test_an_hourly_job_fires_in_both_hours_of_the_fall_back_in_instant_order() -> None:
    hourly = JobFacts("hourly", "individual", "0 * * * *", "Europe/Berlin", members("a"))
    start = datetime(2026, 10, 24, 23, 30, tzinfo=UTC)

    fires = upcoming([hourly], start, 3, "UTC").fires

    assert [f.at.astimezone(UTC).hour for f in fires] == [0, 1, 2]
    assert [f.at.hour for f in fires] == [2, 2, 3]  # 02:00 CEST, 02:00 CET, 03:00 CET


def test_fires_of_several_jobs_come_soonest_first_and_stop_at_the_limit() -> None:
    every_minute = JobFacts("a-minute", "individual", "* * * * *", "UTC", members("a"))
    hourly = JobFacts("b-hourly", "individual", "0 * * * *", "UTC", members("a"))

    result = upcoming([hourly, every_minute], NOON, 2, "UTC", limit=70)

    assert len(result.fires) == 70 and result.truncated
    assert [f.at for f in result.fires] == sorted(f.at for f in result.fires)
    assert ("b-hourly", datetime(2026, 3, 2, 13, 0, tzinfo=UTC)) in [
        (f.job, f.at) for f in result.fires
    ]
    assert not upcoming([hourly], NOON, 2, "UTC").truncated


def test_a_bulk_job_shows_its_spread_window_and_its_targets_first_and_last_start() -> None:
    fleet = [Member(f"t{i}", None, True, False, target_id=i) for i in range(1, 6)]
    job = JobFacts("sweep", "bulk", "0 13 * * *", "UTC", fleet, spread_s=300, job_id=7)

    [fire] = upcoming([job], NOON, 2, "UTC").fires

    delays = [start_window(7, i, spread_s=300, jitter_s=0).delay_s for i in range(1, 6)]
    assert fire.spread_s == 300
    assert fire.first_start == fire.at + timedelta(seconds=min(delays))
    assert fire.last_start == fire.at + timedelta(seconds=max(delays))
    assert fire.at <= fire.first_start < fire.last_start < fire.at + timedelta(seconds=300)


def test_an_individual_job_shows_its_spread_as_the_scheduler_applies_it() -> None:
    solo = [Member("solo", None, True, False, target_id=3)]
    job = JobFacts("backup", "individual", "0 13 * * *", "UTC", solo, spread_s=60, job_id=9)

    [fire] = upcoming([job], NOON, 2, "UTC").fires

    wait = start_window(9, 3, spread_s=60, jitter_s=0).delay_s
    assert wait > 0  # the control: a view without the spread would show the slot itself
    assert fire.spread_s == 60
    assert fire.first_start == fire.last_start == fire.at + timedelta(seconds=wait)


def test_a_rollout_starts_canaries_first_then_batches_of_the_rest() -> None:
    options = rollout_options("10%", 60, "2", "web1,web2")
    active = members(*(f"web{i}" for i in range(1, 33)))

    plan = rollout_plan(options, active)

    assert plan is not None
    # 10% of the slot's 32 targets, canaries included (as the scheduler counts): 4.
    assert (plan.canaries, plan.batch, plan.waves, plan.max_failures) == (2, 4, 9, 2)
    assert plan.describe() == (
        "2 canaries first, 8 batches of up to 4, 60 s between batches, halt after 2 failed"
    )


def test_a_job_without_rollout_options_has_no_plan() -> None:
    assert rollout_plan(rollout_options("", 0, "", ""), members("a")) is None
    assert rollout_plan(rollout_options("5", 0, "", ""), []) is None


# -- the plan shown agrees with the scheduler's ------------------------------------------


def scheduled(options: RolloutOptions, active: list[Member], paused: list[Member]) -> Rollout:
    """What the scheduler's own rollout (``core/rollout.plan_rollout``) does with a slot of
    these rows when every target succeeds: the waves it starts, their sizes, the
    threshold, or why it halts before anything runs. The reference for ``rollout_plan``."""
    pending = RunStatus.PENDING
    rows = [
        slot_rollout.Member(
            i,
            m.target,
            (slot_rollout.Attempt(pending if i < len(active) else RunStatus.SKIPPED),),
            canary=bool(options.canary) and options.canary.matches(m.target, m.labels),
        )
        for i, m in enumerate([*active, *paused])
    ]
    canaries = sum(1 for m in rows if m.canary and m.attempts[0].status == pending)
    now = NOON
    started: list[list[str]] = []
    limit = slot_rollout.threshold(options, len(rows))
    while True:
        plan = slot_rollout.plan_rollout(rows, options, now)
        if plan.halt is not None:
            assert not started, "a slot of successes halted after it started"
            return Rollout(0, 0, 0, options.batch_pause_s, limit, halted=plan.halt.cause)
        if plan.start:
            started.append([rows[i].target_name for i in plan.start])
            done = slot_rollout.Attempt(RunStatus.SUCCEEDED, now)
            rows = [m if m.assignment_id not in plan.start else _with(m, done) for m in rows]
        if plan.finished:
            break
        now += timedelta(seconds=options.batch_pause_s + 1)
    batches = started[1:] if canaries else started
    return Rollout(
        canaries,
        len(started),
        max((len(w) for w in batches), default=0),
        options.batch_pause_s,
        limit,
    )


def _with(member: slot_rollout.Member, attempt: slot_rollout.Attempt) -> slot_rollout.Member:
    return slot_rollout.Member(
        member.assignment_id, member.target_name, (attempt,), canary=member.canary
    )


def shown(plan: Rollout | None) -> Rollout | None:
    """The plan as compared: the halt's cause only (the wording is the page's)."""
    if plan is None or plan.halted is None:
        return plan
    cause = "no_canary" if "is a canary" in plan.halted else "canary"
    return Rollout(0, 0, 0, plan.pause_s, plan.max_failures, halted=cause)


def random_slot(rng: random.Random) -> tuple[RolloutOptions, list[Member], list[Member]]:
    size = rng.randint(1, 30)
    names = [f"t{i:02d}" for i in range(size)]
    labelled = {n: {"role": "canary"} if rng.random() < 0.2 else {} for n in names}
    members = [Member(n, None, True, rng.random() < 0.2, labelled[n]) for n in names]

    def amount() -> str:
        return rng.choice(["", str(rng.randint(1, 8)), f"{rng.randint(1, 100)}%"])

    canary = rng.choice(["", "role=canary", ",".join(rng.sample(names, min(2, size))), "gone"])
    options = rollout_options(amount(), rng.choice([0, 30]), amount(), canary)
    return (
        options,
        [m for m in members if not m.target_paused],
        [m for m in members if m.target_paused],
    )


def test_the_plan_shown_is_the_one_the_scheduler_carries_out() -> None:
    rng = random.Random(20261201)
    compared = 0
    for _ in range(3000):
        options, active, paused = random_slot(rng)
        if not options.active or not active:
            continue
        compared += 1
        assert shown(rollout_plan(options, active, paused)) == scheduled(options, active, paused), (
            options,
            [m.target for m in active],
            [m.target for m in paused],
        )
    assert compared > 1000


def test_the_checker_catches_a_plan_computed_the_old_way() -> None:
    # Negative control: the plan of the previous release (a percentage of the targets
    # other than the canaries, the threshold of the active ones, no halt for a missing or
    # paused canary) disagrees with the scheduler on some of the same random slots.
    def old_plan(options: RolloutOptions, active: list[Member]) -> Rollout:
        canaries = sum(
            1 for m in active if options.canary and options.canary.matches(m.target, m.labels)
        )
        rest = len(active) - canaries
        batch = options.batch.of(rest) if options.batch is not None and rest else rest
        waves = (1 if canaries else 0) + (-(-rest // batch) if rest and batch else 0)
        limit = options.max_failures.of(len(active)) if options.max_failures else None
        return Rollout(canaries, waves, batch, options.batch_pause_s, limit)

    rng = random.Random(20261201)
    wrong = 0
    for _ in range(3000):
        options, active, paused = random_slot(rng)
        if (
            options.active
            and active
            and old_plan(options, active) != scheduled(options, active, paused)
        ):
            wrong += 1
    assert wrong > 100


def test_a_fire_whose_zone_has_no_canary_is_shown_halted() -> None:
    options = rollout_options("", 0, "", "berlin1")
    job = JobFacts(
        "maint",
        "bulk",
        "0 2 * * *",
        "target",
        [*members("berlin1", zone="Europe/Berlin"), *members("tokyo1", zone="Asia/Tokyo")],
        rollout=options,
    )

    fires = {f.zone: f for f in upcoming([job], NOON, 24, "UTC").fires}

    assert fires["Europe/Berlin"].state == "fires"
    assert fires["Asia/Tokyo"].state == "halted"
    assert fires["Asia/Tokyo"].rollout is not None
    assert fires["Asia/Tokyo"].rollout.describe() == (
        "halted: no target of this fire is a canary (canary berlin1); nothing runs"
    )
    assert fires["Asia/Tokyo"].as_dict()["state"] == "halted"


def test_a_fire_whose_canary_is_paused_is_shown_halted() -> None:
    options = rollout_options("1", 0, "", "a")
    job = JobFacts(
        "reload",
        "bulk",
        "0 13 * * *",
        "UTC",
        [Member("a", None, True, True), *members("b", "c")],
        rollout=options,
    )

    [fire] = upcoming([job], NOON, 2, "UTC").fires

    assert (fire.state, fire.active, fire.paused) == ("halted", 2, 1)
    assert fire.rollout is not None
    assert fire.rollout.describe() == "halted: canary a is paused; nothing runs"


def test_zones_that_fire_at_the_same_instant_roll_out_as_one_slot() -> None:
    # Berlin and Paris keep the same offset: 02:00 there is one instant, one slot, and the
    # Berlin canary gates the Paris target too (each line shows the whole slot's plan).
    # Tokyo fires at another instant: a slot of its own, without a canary.
    options = rollout_options("", 0, "", "berlin1")
    job = JobFacts(
        "maint",
        "bulk",
        "0 2 * * *",
        "target",
        [
            *members("berlin1", zone="Europe/Berlin"),
            *members("paris1", "paris2", zone="Europe/Paris"),
            *members("tokyo1", zone="Asia/Tokyo"),
        ],
        rollout=options,
    )

    fires = {f.zone: f for f in upcoming([job], NOON, 24, "UTC").fires}

    assert fires["Europe/Paris"].at.astimezone(UTC) == fires["Europe/Berlin"].at.astimezone(UTC)
    for zone in ("Europe/Berlin", "Europe/Paris"):
        assert fires[zone].state == "fires"
        plan = fires[zone].rollout
        assert plan is not None
        assert plan.describe() == "1 canary first, 1 batch of up to 2"
    assert fires["Europe/Paris"].active == 2  # the line still counts its own zone's targets
    assert fires["Asia/Tokyo"].state == "halted"


def test_a_fire_asked_for_one_target_counts_it_alone_but_plans_the_whole_slot() -> None:
    options = rollout_options("1", 0, "50%", "a")
    job = JobFacts("reload", "bulk", "0 13 * * *", "UTC", members("a", "b", "c", "d"))
    job = JobFacts(**{**job.__dict__, "rollout": options})

    [fire] = upcoming([job], NOON, 2, "UTC", target="c").fires
    [whole] = upcoming([job], NOON, 2, "UTC").fires

    assert (fire.active, whole.active) == (1, 4)
    assert fire.rollout == whole.rollout
    assert fire.rollout is not None
    assert fire.rollout.describe() == "1 canary first, 3 batches of up to 1, halt after 2 failed"
    assert upcoming([job], NOON, 2, "UTC", target="nobody").fires == []


def test_a_fire_says_its_start_window_in_the_words_every_page_uses() -> None:
    fleet = [Member(f"t{i}", None, True, False, target_id=i) for i in range(1, 6)]
    both = JobFacts("sweep", "bulk", "0 13 * * *", "UTC", fleet, spread_s=120, jitter_s=30)
    none = JobFacts("plain", "bulk", "0 13 * * *", "UTC", fleet)

    fires = {f.job: f for f in upcoming([both, none], NOON, 2, "UTC").fires}

    assert fires["sweep"].window == window_words(120, 30)
    assert fires["sweep"].as_dict()["starts"]["window"] == window_words(120, 30)
    # The control: a job without a window starts every target at the fire, and says nothing.
    assert fires["plain"].window == ""
    assert fires["plain"].first_start == fires["plain"].last_start == fires["plain"].at
