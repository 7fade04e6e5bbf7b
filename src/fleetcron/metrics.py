"""Prometheus metrics of one fleetcron process.

Counters and histograms are observed by the scheduler as it works; gauges that describe
the database (late assignments, ownership; open incidents by cause, acknowledged and
silenced) are read at scrape time by collectors, so a scrape always reflects the current
state and costs a few indexed queries. The alert rules of ``deploy/prometheus/`` are
written on these names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
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


@dataclass(frozen=True)
class IncidentReading:
    """One open incident at scrape time: its job and cause, its open targets, whether it
    was acknowledged and whether a silence mutes every one of its open targets."""

    job: str
    cause: str
    targets: int
    acknowledged: bool
    silenced: bool
    #: A host incident's target (empty for a job's incident).
    target: str = ""
    #: The project of its job (of its target for a host incident): two teams' jobs of
    #: the same name are two series.
    project: str = ""


@dataclass(frozen=True)
class IncidentsReading:
    """Every open incident, and the causes to report (a cause without an open incident
    is reported 0, so an alert rule can tell "none" from "not scraped")."""

    causes: Sequence[str]
    incidents: Sequence[IncidentReading]


@dataclass(frozen=True)
class ShardReading:
    """One shard at scrape time: its generation, its runs executing, and whether this node
    owns it (a standalone node owns its one shard)."""

    shard: int
    generation: int
    running: int
    owned: bool
    #: With the members placement: owned elsewhere than the placement puts it.
    misplaced: bool = False


class _ShardCollector(Collector):
    """The per-shard gauges, one series per shard (the count is fixed at creation)."""

    def __init__(self, read: Callable[[], Sequence[ShardReading]]) -> None:
        self._read = read

    def collect(self) -> Iterator[GaugeMetricFamily]:
        shards = self._read()
        generation = GaugeMetricFamily(
            "fleetcron_shard_generation", "Each shard's ownership generation.", labels=["shard"]
        )
        running = GaugeMetricFamily(
            "fleetcron_shard_runs_in_flight",
            "Runs recorded as running, per shard (every node's).",
            labels=["shard"],
        )
        owned = GaugeMetricFamily(
            "fleetcron_shard_owned", "1 when this node owns the shard.", labels=["shard"]
        )
        misplaced = GaugeMetricFamily(
            "fleetcron_shard_misplaced",
            "1 when the members placement puts the shard on another node than its owner.",
            labels=["shard"],
        )
        for s in shards:
            label = [str(s.shard)]
            generation.add_metric(label, s.generation)
            running.add_metric(label, s.running)
            owned.add_metric(label, 1 if s.owned else 0)
            misplaced.add_metric(label, 1 if s.misplaced else 0)
        yield from (generation, running, owned, misplaced)


@dataclass(frozen=True)
class MemberReading:
    """One registered member (a node's scheduler process) at scrape time: its weight,
    whether its lease holds, the age of its last heartbeat, and (for worker 0, which
    stands for its node) the shards its node owns; -1 for another worker."""

    member: str
    weight: float
    live: bool
    heartbeat_age_s: float
    shards: int


class _MemberCollector(Collector):
    """The per-member gauges, one series per registered member."""

    def __init__(self, read: Callable[[], Sequence[MemberReading]]) -> None:
        self._read = read

    def collect(self) -> Iterator[GaugeMetricFamily]:
        members = self._read()
        live = GaugeMetricFamily(
            "fleetcron_member_live", "1 while the member's lease holds.", labels=["member"]
        )
        weight = GaugeMetricFamily(
            "fleetcron_member_weight", "The member's share weight.", labels=["member"]
        )
        age = GaugeMetricFamily(
            "fleetcron_member_heartbeat_age_seconds",
            "Seconds since the member's last heartbeat (database clock).",
            labels=["member"],
        )
        shards = GaugeMetricFamily(
            "fleetcron_member_shards",
            "Shards the member's node owns (worker 0 stands for its node).",
            labels=["member"],
        )
        for m in members:
            label = [m.member]
            live.add_metric(label, 1 if m.live else 0)
            weight.add_metric(label, m.weight)
            age.add_metric(label, m.heartbeat_age_s)
            if m.shards >= 0:
                shards.add_metric(label, m.shards)
        yield from (live, weight, age, shards)


class _IncidentCollector(Collector):
    """The incident gauges. The job's label is ``fleetcron_job``: ``job`` is the scrape
    job's label in Prometheus, which would rename it to ``exported_job``. Each incident's
    series carry its ``project``, since job and target names are unique per project."""

    def __init__(self, read: Callable[[], IncidentsReading]) -> None:
        self._read = read

    def collect(self) -> Iterator[GaugeMetricFamily]:
        reading = self._read()
        causes = sorted({*reading.causes, *(i.cause for i in reading.incidents)})
        totals = (
            ("fleetcron_incidents_open", "Open incidents, by cause.", lambda i: True),
            (
                "fleetcron_incidents_acknowledged",
                "Open incidents someone acknowledged, by cause.",
                lambda i: i.acknowledged,
            ),
            (
                "fleetcron_incidents_silenced",
                "Open incidents a silence mutes entirely, by cause.",
                lambda i: i.silenced,
            ),
        )
        for name, text, counted in totals:
            family = GaugeMetricFamily(name, text, labels=["cause"])
            for cause in causes:
                family.add_metric(
                    [cause], sum(1 for i in reading.incidents if i.cause == cause and counted(i))
                )
            yield family
        yield from self._per_incident(reading.incidents)

    @staticmethod
    def _per_incident(incidents: Sequence[IncidentReading]) -> Iterator[GaugeMetricFamily]:
        labels = ["project", "fleetcron_job", "fleetcron_target", "cause"]
        targets = GaugeMetricFamily(
            "fleetcron_incident_targets", "Open targets of each open incident.", labels=labels
        )
        acked = GaugeMetricFamily(
            "fleetcron_incident_acknowledged",
            "1 when the open incident was acknowledged.",
            labels=labels,
        )
        muted = GaugeMetricFamily(
            "fleetcron_incident_silenced",
            "1 when a silence mutes every open target of the incident.",
            labels=labels,
        )
        for incident in incidents:
            key = [incident.project, incident.job, incident.target, incident.cause]
            targets.add_metric(key, incident.targets)
            acked.add_metric(key, 1 if incident.acknowledged else 0)
            muted.add_metric(key, 1 if incident.silenced else 0)
        yield targets
        yield acked
        yield muted


@dataclass(frozen=True)
class SshPoolReading:
    """What the SSH executor's pool has done so far (read at scrape time)."""

    connections_opened: int
    connect_retries: int
    pooled: int


class _SshPoolCollector(Collector):
    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        read = self._metrics.ssh_pool
        reading = read() if read is not None else None
        if reading is None:
            return
        yield CounterMetricFamily(
            "fleetcron_ssh_connections_opened",
            "SSH handshakes completed by this process (a reused connection does not count).",
            value=reading.connections_opened,
        )
        yield CounterMetricFamily(
            "fleetcron_ssh_connect_retries",
            "SSH handshakes retried after the server dropped or reset them (sshd MaxStartups).",
            value=reading.connect_retries,
        )
        yield GaugeMetricFamily(
            "fleetcron_ssh_pooled_connections",
            "SSH connections held open by the pool.",
            value=reading.pooled,
        )


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
    #: Reads the SSH pool's counters at scrape time (set by the scheduler; see
    #: :meth:`watch_ssh_pool`); ``None`` or a reading of ``None``: no SSH metrics.
    ssh_pool: Callable[[], SshPoolReading | None] | None = None

    def __post_init__(self) -> None:
        r = self.registry
        r.register(_SshPoolCollector(self))
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

    def watch_ssh_pool(self, read: Callable[[], SshPoolReading | None]) -> None:
        """Export the SSH pool's counters, read by ``read`` at each scrape (the last
        scheduler to call this wins)."""
        self.ssh_pool = read

    def watch_state(self, read: Callable[[], StateReading]) -> None:
        self.registry.register(_StateCollector(read))

    def watch_shards(self, read: Callable[[], Sequence[ShardReading]]) -> None:
        """Export the per-shard gauges, read by ``read`` at each scrape."""
        self.registry.register(_ShardCollector(read))

    def watch_members(self, read: Callable[[], Sequence[MemberReading]]) -> None:
        """Export the per-member gauges, read by ``read`` at each scrape."""
        self.registry.register(_MemberCollector(read))

    def watch_incidents(self, read: Callable[[], IncidentsReading]) -> None:
        """Export the incident gauges, read by ``read`` at each scrape."""
        self.registry.register(_IncidentCollector(read))

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
