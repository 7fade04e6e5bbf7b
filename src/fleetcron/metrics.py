"""Prometheus metrics of one fleetcron process.

Counters and histograms are observed by the scheduler as it works; gauges that describe
the database (late assignments, ownership) are read at scrape time by a collector, so a
scrape always reflects the current state and costs two indexed queries.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
LATENESS_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60)


@dataclass(frozen=True)
class StateReading:
    """What the database says at scrape time."""

    late_assignments: int
    running_runs: int
    ownership: str  # standalone | owner | standby | invalid | refused
    generation: int


class _StateCollector(Collector):
    def __init__(self, read: Callable[[], StateReading]) -> None:
        self._read = read

    def collect(self) -> Iterator[GaugeMetricFamily]:
        state = self._read()
        yield GaugeMetricFamily(
            "fleetcron_late_assignments",
            "Enabled assignments whose slot passed the misfire grace with no decision.",
            value=state.late_assignments,
        )
        yield GaugeMetricFamily(
            "fleetcron_runs_running", "Runs recorded as running.", value=state.running_runs
        )
        owner = GaugeMetricFamily(
            "fleetcron_ownership", "1 for this node's ownership state.", labels=["state"]
        )
        for name in ("standalone", "owner", "standby", "invalid", "refused"):
            owner.add_metric([name], 1 if state.ownership == name else 0)
        yield owner
        yield GaugeMetricFamily(
            "fleetcron_ownership_generation",
            "Current ownership generation.",
            value=state.generation,
        )


@dataclass
class Metrics:
    """The metrics of one process, in a registry of its own."""

    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        r = self.registry
        self.runs = Counter(
            "fleetcron_runs",
            "Runs finished by this process, by status and origin.",
            ["status", "origin"],
            registry=r,
        )
        self.duration = Histogram(
            "fleetcron_run_duration_seconds", "Run duration.", buckets=DURATION_BUCKETS, registry=r
        )
        self.lateness = Histogram(
            "fleetcron_dispatch_lateness_seconds",
            "Start of a run minus its slot.",
            buckets=LATENESS_BUCKETS,
            registry=r,
        )
        self.due = Gauge("fleetcron_due_slots", "Slots decided by the last tick.", registry=r)
        self.in_flight = Gauge(
            "fleetcron_runs_in_flight", "Runs executing in this process.", registry=r
        )
        self.tick = Histogram(
            "fleetcron_tick_duration_seconds", "Duration of one scheduler tick.", registry=r
        )
        self.skipped = Counter(
            "fleetcron_slots_not_run",
            "Slots recorded without running, by outcome.",
            ["outcome"],
            registry=r,
        )

    def watch_state(self, read: Callable[[], StateReading]) -> None:
        self.registry.register(_StateCollector(read))

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
