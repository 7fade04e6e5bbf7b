"""Failover that always happens: an owner cut off from PostgreSQL at any point of its cycle
(between statements, inside each kind of locking transaction, during a commit, one way
only) or whose backend is paused never holds the standby off for longer than the lease
plus a small bound (``store.db.session_bounds``); C1-C4 hold throughout.

The cut lands at its point deterministically: the owner's process stops there (the
test-only ``FAULT_HOLD_AT`` hook of node_process.py), the link is cut, then it goes on, so
its next statements are held by the proxy with every socket open. The negative control
starts both nodes without the bounds (``FAULT_NO_BOUNDS``): the standby then waits for
the cut-off owner's lock for as long as the link is cut.
"""

from __future__ import annotations

import contextlib
import os
import signal
import statistics
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest
from checkers import (
    c1_one_execution_per_slot,
    c2_generation_never_decreases,
    c3_every_due_slot_accounted_for,
    c4_no_overlap_across_owners,
    read_effects,
)
from harness import Lab, wait_until
from netfault import CuttableLink, ProcessWatch
from sqlalchemy import Engine, select, text

from fleetcron.app import SYSTEM
from fleetcron.services.cluster import status as cluster
from fleetcron.services.runs import reads as runs
from fleetcron.store.schema import AuditEvent
from waiting import eventually

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

GRACE = timedelta(seconds=60)
LEASE_S = 3.0
RENEW_S = 0.5
LEASE = {
    "FLEETCRON_LEASE_S": str(LEASE_S),
    "FLEETCRON_LEASE_RENEW_S": str(RENEW_S),
}
#: The documented bound (docs/high-availability.md): the lease, one standby step, and the
#: rest of the issue's goal of 10 s as the margin of a loaded machine.
BOUND_S = LEASE_S + 10
#: cut point -> seconds from the cut to the standby owning the jobs (printed with -s).
TAKEOVER_S: dict[str, float] = {}


class TakeoverTooLate(AssertionError):
    pass


@pytest.fixture(scope="module", autouse=True)
def report() -> Iterator[None]:
    yield
    if TAKEOVER_S:
        values = sorted(TAKEOVER_S.values())
        print(
            f"\ntakeover after the cut over {len(values)} cut points: min {values[0]:.1f} s, "
            f"median {statistics.median(values):.1f} s, max {values[-1]:.1f} s: {TAKEOVER_S}"
        )


def alpha_starts(lab: Lab) -> int:
    return sum(1 for e in read_effects(lab.effects) if e.kind == "start" and e.node == "alpha")


def beta_owns(lab: Lab) -> bool:
    status = cluster.status(lab.app("beta"), SYSTEM, lab.node("beta"))
    return status.owner == lab.node("beta").identity.node_id


def start_pair(
    lab: Lab, *, alpha_env: dict[str, str], both_env: dict[str, str] | None = None
) -> tuple[datetime, ProcessWatch]:
    lab.approve("alpha", "beta")
    lab.make_owner("alpha")
    lab.add_fleet(3, work="sleep 1", timeout_s=2)
    since = lab.sim_now()
    watch = ProcessWatch(lab.effects).start()
    lab.start("alpha", **LEASE, **(both_env or {}), **alpha_env)
    lab.start("beta", **LEASE, **(both_env or {}))
    wait_until(lambda: alpha_starts(lab) >= 3, timeout=40, what="alpha's runs in flight")
    return since, watch


def await_takeover(lab: Lab, cut_at: float, point: str) -> float:
    """Seconds from the cut to beta owning the jobs; raises :class:`TakeoverTooLate`."""
    runs.request_run(lab.app("beta"), SYSTEM, "everywhere")
    try:
        eventually(
            lambda: beta_owns(lab),
            max(cut_at + BOUND_S - time.time(), 0),
            f"{point}: beta to own the jobs",
        )
    except AssertionError as late:
        raise TakeoverTooLate(f"{point}: beta did not take over within {BOUND_S:g} s") from late
    took = time.time() - cut_at
    TAKEOVER_S[point] = round(took, 2)
    print(f"{point}: beta owner {took:.2f} s after the cut")
    return took


def finish(
    lab: Lab, since: datetime, watch: ProcessWatch, link: CuttableLink | None = None
) -> None:
    """beta runs the next generation; the link is restored (so alpha can stop); both nodes
    stop; C1-C4 over everything that ran."""
    wait_until(
        lambda: any(e.generation == 2 and e.kind == "start" for e in read_effects(lab.effects)),
        timeout=20,
        what="beta's first run",
    )
    if link is not None:
        link.restore()
    lab.stop_all()
    watch.stop()
    effects = read_effects(lab.effects)
    app = lab.app("alpha")
    c1_one_execution_per_slot(app, effects)
    c2_generation_never_decreases(effects)
    c3_every_due_slot_accounted_for(app, since, lab.accounted_until(GRACE))
    c4_no_overlap_across_owners(effects, until=time.time(), gone_at=watch.gone_at)


def cut_at_point(
    lab: Lab,
    link: CuttableLink,
    point: str,
    *,
    direction: str = "both",
    both_env: dict[str, str] | None = None,
    alpha_extra: dict[str, str] | None = None,
) -> tuple[datetime, ProcessWatch, float]:
    """Start the pair with alpha behind ``link``; cut it with alpha stopped at ``point``
    (``between``: wherever alpha is); returns when alpha goes on, and the cut's time."""
    hold = lab.directory / "hold"
    hold.mkdir()
    alpha_env = {"FLEETCRON_DATABASE_URL": link.url_for(lab.database_url), **(alpha_extra or {})}
    if point != "between":
        alpha_env |= {"FAULT_HOLD_AT": point, "FAULT_HOLD_DIR": str(hold)}
    since, watch = start_pair(lab, alpha_env=alpha_env, both_env=both_env)
    if point != "between":
        (hold / "armed").write_text("")
        wait_until(lambda: (hold / "inside").exists(), timeout=20, what=f"alpha at {point}")
    cut_at = time.time()
    link.cut(direction=direction)
    (hold / "go").write_text("")
    return since, watch, cut_at


@pytest.mark.parametrize(
    ("point", "direction"),
    [
        ("between", "both"),
        ("renew", "both"),
        ("guard", "both"),
        ("commit", "both"),
        ("commit", "to_client"),
    ],
    ids=["between-statements", "in-lease-renewal", "in-run-write", "during-commit", "one-way"],
)
def test_a_cut_off_owner_is_replaced_within_the_bound_wherever_it_was_cut(
    lab: Lab, link: CuttableLink, point: str, direction: str
) -> None:
    since, watch, cut_at = cut_at_point(lab, link, point, direction=direction)
    name = point if direction == "both" else f"{point}, replies cut only"
    await_takeover(lab, cut_at, name)
    finish(lab, since, watch, link)


class BackendFreezer:
    """Keeps every PostgreSQL backend of one node stopped (SIGSTOP), the ones it opens later
    included: a node whose pool opens a fresh session while its first ones hang is not
    cut off, and goes on owning (rightly). A backend is kept stopped only if it was idle
    when stopped (one stopped holding a lock is beyond any server-side bound: see the docs);
    one caught inside a statement is resumed and stopped again at a later round."""

    def __init__(self, engine: Engine, node_id: str) -> None:
        self._engine = engine
        self._prefix = f"fleetcron:{node_id}:"
        self._query = text(
            "SELECT pid, state FROM pg_stat_activity WHERE starts_with(application_name, :p)"
        )
        self.stopped: set[int] = set()
        self.all_idle = threading.Event()
        #: When every backend of the node was first stopped at once (time.time()).
        self.since = 0.0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="backend-freezer", daemon=True)

    def _states(self) -> dict[int, str | None]:
        with self._engine.connect() as conn:
            return {r.pid: r.state for r in conn.execute(self._query, {"p": self._prefix})}

    def _round(self) -> None:
        fresh = set(self._states()) - self.stopped
        for pid in fresh:
            os.kill(pid, signal.SIGSTOP)
        states = self._states()
        busy = {pid for pid in fresh if states.get(pid, "idle") != "idle"}
        for pid in busy:
            os.kill(pid, signal.SIGCONT)
        self.stopped |= fresh - busy
        if self.stopped and set(states) <= self.stopped and not self.all_idle.is_set():
            self.since = time.time()
            self.all_idle.set()

    def _run(self) -> None:
        while not self._done.is_set():
            self._round()
            self._done.wait(0.05)  # sleep-in-loop: a round of pausing, until told to stop

    def __enter__(self) -> BackendFreezer:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._done.set()
        self._thread.join(timeout=10)
        for pid in self.stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


def test_an_owner_whose_backends_are_paused_is_replaced_within_the_bound(lab: Lab) -> None:
    """SIGSTOP on every PostgreSQL backend of alpha (those it opens later too) while none
    is inside a transaction."""
    since, watch = start_pair(lab, alpha_env={})
    freezer = BackendFreezer(lab.app("beta").db.engine, lab.node("alpha").identity.node_id)
    with freezer:
        assert freezer.all_idle.wait(20), "alpha's backends were never all idle at once"
        await_takeover(lab, freezer.since, "backends paused")
    finish(lab, since, watch)


def test_the_new_owner_ends_the_sessions_of_an_expired_owner_without_bounds_and_audits_it(
    lab: Lab, link: CuttableLink
) -> None:
    """alpha's sessions have no server-side bounds (a node of an older version during a
    rolling upgrade, or one whose bounds an operator's role settings override): its
    session cut off inside a run write would hold the ownership lock for good; beta ends
    it once alpha's lease has expired."""
    since, watch, cut_at = cut_at_point(lab, link, "guard", alpha_extra={"FAULT_NO_BOUNDS": "1"})
    await_takeover(lab, cut_at, "guard, owner without bounds, its sessions ended")
    finish(lab, since, watch, link)
    with lab.app("beta").db.read() as session:
        ended = session.scalars(
            select(AuditEvent).where(AuditEvent.action == "cluster.end_sessions")
        ).all()
    assert ended, "beta ended none of alpha's sessions"
    assert ended[0].detail["node"] == lab.node("alpha").identity.node_id
    assert ended[0].detail["sessions"] >= 1


def test_negative_control_without_the_bounds_the_cut_off_owner_holds_the_standby_off(
    lab: Lab, link: CuttableLink
) -> None:
    _since, watch, cut_at = cut_at_point(lab, link, "guard", both_env={"FAULT_NO_BOUNDS": "1"})
    try:
        with pytest.raises(TakeoverTooLate):
            await_takeover(lab, cut_at, "guard, no bounds (control)")
    finally:
        TAKEOVER_S.pop("guard, no bounds (control)", None)
        link.restore()
        watch.stop()
