"""The dashboard's *Recent failures*: the failed runs of the last 24 h grouped by job, with
how many, on how many targets, by status and the newest; read from at most ``cap`` of the
newest failures, the counts then marked as lower bounds. On SQLite and PostgreSQL, over the
fleet of ``test_health_bounded`` (runs recorded through the store's write path)."""

from __future__ import annotations

from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.services.runs.failures import recent_failures
from integration.web.test_health_bounded import OUTCOMES, fleet


def test_failures_are_counted_by_job_with_their_targets_and_statuses(
    app: App, clock: FakeClock, viewer: Actor
) -> None:
    fleet(app, clock, OUTCOMES)
    found = recent_failures(app, viewer)

    # ping fails on 9 targets (5 refuse connections, 4 exit 1), sync on 7; two slots each.
    by_job = {f.job: f for f in found.jobs}
    assert set(by_job) == {"ping", "sync"} and found.total_jobs == 2 and not found.capped
    ping, sync = by_job["ping"], by_job["sync"]
    assert (ping.failures.n, ping.failures.more, ping.targets.n) == (18, False, 9)
    assert (sync.failures.n, sync.targets.n) == (14, 7)
    assert ping.by_status == {"connect_error": 10, "failed": 8}
    assert sync.by_status == {"connect_error": 10, "failed": 4}
    assert found.read == 32
    # The newest failure of each job, linked from the page.
    assert ping.origin == "bulk" and ping.status in ("failed", "connect_error")
    assert ping.at == max(f.at for f in found.jobs)


def test_a_capped_read_says_its_counts_are_lower_bounds_and_lists_are_bounded(
    app: App, clock: FakeClock, viewer: Actor
) -> None:
    fleet(app, clock, OUTCOMES)
    capped = recent_failures(app, viewer, cap=20)
    assert capped.capped and capped.read == 20
    assert sum(f.failures.n for f in capped.jobs) == 20
    assert all(f.failures.more for f in capped.jobs)
    assert capped.jobs[0].failures.short.endswith("+")

    one = recent_failures(app, viewer, jobs=1)
    assert len(one.jobs) == 1 and one.total_jobs == 2 and one.more_jobs == 1

    # Older than the window: not recent any more.
    clock.advance(hours=25)
    assert recent_failures(app, viewer).jobs == []
