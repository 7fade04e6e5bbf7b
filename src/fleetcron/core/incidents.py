"""Incidents: one cause on one job over the set of targets sharing it, and when to tell whom.

Pure: no I/O, no clock. The per-assignment alert state (:mod:`fleetcron.core.alerts`) says
*what* changed on one job × target; an incident gathers the targets of one job that share a
cause (``failing``, ``late``, ``stuck``, ``halted`` by the job's rollout) so that 50
targets failing in one slot make one message, not 50.

When a message goes out is :func:`next_message`, per incident and channel, with the timers
of the notification rule and Alertmanager's defaults (its ``dispatch/route.go``):

- ``group_wait`` (30 s): the first message waits this long after the incident opened, so
  that the rest of the slot joins it;
- ``group_interval`` (5 min): at most one update per interval while the set of targets
  changes, naming the ones that joined and that recovered;
- ``repeat_interval`` (4 h): a reminder while the incident stays open, unless it was
  acknowledged;
- one ``resolved`` message once every target recovered.

:func:`render` and :func:`payload` turn a decided message into the email text and the
webhook JSON (schema ``fleetcron.incident/1``, docs/incident.schema.json).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final, Literal
from urllib.parse import urlencode

from fleetcron.core.bounded import named_few
from fleetcron.core.labels import selector_matches
from fleetcron.errors import InvalidInput

Cause = Literal["failing", "late", "stuck", "halted", "unreachable"]
MessageKind = Literal["firing", "update", "reminder", "resolved", "flapping"]
CAUSES: Final[tuple[Cause, ...]] = ("failing", "late", "stuck", "halted", "unreachable")
#: The cause of a host incident: one target a fresh connection cannot reach
#: (:mod:`fleetcron.core.reach`); it has no job (``job_id`` 0) and names its host.
HOST_CAUSE: Final[Cause] = "unreachable"
MESSAGE_KINDS: Final[tuple[MessageKind, ...]] = (
    "firing",
    "update",
    "reminder",
    "resolved",
    "flapping",
)
INCIDENT_SCHEMA: Final = "fleetcron.incident/1"

DEFAULT_GROUP_WAIT_S: Final = 30.0
DEFAULT_GROUP_INTERVAL_S: Final = 300.0
DEFAULT_REPEAT_INTERVAL_S: Final = 4 * 3600.0
#: (least, most) seconds a rule may set for each timer.
TIMER_BOUNDS: Final[dict[str, tuple[float, float]]] = {
    "group_wait_s": (0.0, 3600.0),
    "group_interval_s": (10.0, 86400.0),
    "repeat_interval_s": (60.0, 7 * 86400.0),
}
#: Targets named in one message; the count is always whole.
TARGETS_SHOWN: Final = 20
#: A job and cause whose incidents opened more than FLAP_THRESHOLD times within FLAP_WINDOW
#: is flapping (Nagios' flap detection, counted in incidents).
FLAP_THRESHOLD: Final = 5
FLAP_WINDOW: Final = timedelta(hours=1)
#: Silences last at least a minute and at most 90 days.
SILENCE_MIN: Final = timedelta(minutes=1)
SILENCE_MAX: Final = timedelta(days=90)

_WORDS: Final[dict[Cause, str]] = {
    "failing": "failing",
    "late": "late",
    "stuck": "stuck",
    "halted": "rollout halted",
    "unreachable": "host unreachable",
}
#: The job page's target filter that shows an incident's targets.
_PAGE_STATUS: Final[dict[Cause, str]] = {
    "failing": "failing",
    "late": "late",
    "stuck": "running",
    "halted": "skipped",
    "unreachable": "connect_error",
}


@dataclass(frozen=True)
class Timers:
    """A notification rule's timers, in seconds."""

    group_wait_s: float = DEFAULT_GROUP_WAIT_S
    group_interval_s: float = DEFAULT_GROUP_INTERVAL_S
    repeat_interval_s: float = DEFAULT_REPEAT_INTERVAL_S


def merged(timers: Iterable[Timers]) -> Timers:
    """The timers of a channel that several rules send an incident to: the shortest of
    each, so no rule gets a message later than it asked for."""
    found = list(timers)
    if not found:
        return Timers()
    return Timers(
        min(t.group_wait_s for t in found),
        min(t.group_interval_s for t in found),
        min(t.repeat_interval_s for t in found),
    )


def checked_timers(
    group_wait_s: float | None = None,
    group_interval_s: float | None = None,
    repeat_interval_s: float | None = None,
) -> Timers:
    """Timers from what a user gave (None: the default); raises InvalidInput naming the
    field when one is out of :data:`TIMER_BOUNDS`."""
    given = {
        "group_wait_s": (group_wait_s, DEFAULT_GROUP_WAIT_S),
        "group_interval_s": (group_interval_s, DEFAULT_GROUP_INTERVAL_S),
        "repeat_interval_s": (repeat_interval_s, DEFAULT_REPEAT_INTERVAL_S),
    }
    values: dict[str, float] = {}
    for name, (value, default) in given.items():
        low, high = TIMER_BOUNDS[name]
        if value is None:
            values[name] = default
            continue
        if not low <= value <= high:
            raise InvalidInput(
                f"{name}: {value:g} is out of range ({low:g} to {high:g} seconds)",
                field=name,
                value=value,
                allowed=f"{low:g}..{high:g}",
            )
        values[name] = float(value)
    return Timers(**values)


@dataclass(frozen=True)
class RuleTimers:
    """A rule's timers as a user gave them, in seconds (None: the default)."""

    group_wait_s: float | None = None
    group_interval_s: float | None = None
    repeat_interval_s: float | None = None

    def checked(self) -> Timers:
        """The timers with the defaults filled in (:func:`checked_timers`)."""
        return checked_timers(self.group_wait_s, self.group_interval_s, self.repeat_interval_s)


#: (least, most) a rule may ask for consecutive failures before firing and successes
#: before resolving.
THRESHOLD_BOUNDS: Final = (1, 100)


@dataclass(frozen=True)
class Thresholds:
    """How many consecutive failed slots of a target a rule waits for before it hears of
    it (``failures_before``), and how many consecutive successes take a target out of an
    incident (``successes_before``). 1 and 1: the first failure and the first success,
    as before rules had them."""

    failures_before: int = 1
    successes_before: int = 1

    def checked(self) -> Thresholds:
        """These thresholds, or InvalidInput naming the field out of
        :data:`THRESHOLD_BOUNDS`."""
        low, high = THRESHOLD_BOUNDS
        for name in ("failures_before", "successes_before"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise InvalidInput(
                    f"{name}: {value!r} is not a whole number from {low} to {high}",
                    field=name,
                    value=value,
                    allowed=f"{low}..{high}",
                )
        return self


def merged_thresholds(found: Iterable[Thresholds]) -> Thresholds:
    """The thresholds of a channel that several rules send an incident to: the smallest
    of each, so no rule hears of a failure later than it asked for."""
    given = list(found)
    if not given:
        return Thresholds()
    return Thresholds(min(t.failures_before for t in given), min(t.successes_before for t in given))


def reached_at(verdicts: Sequence[tuple[datetime, bool]], failures: int) -> datetime | None:
    """When a target's current failure streak reached ``failures`` failed slots, given its
    final verdicts (finished at, failed?) oldest first; None if the streak (the failures
    after its newest success) is shorter."""
    streak: list[datetime] = []
    for at, failed in verdicts:
        streak = [*streak, at] if failed else []
    return streak[failures - 1] if len(streak) >= failures else None


def released_at(successes: Sequence[datetime], needed: int) -> datetime | None:
    """When a target held in an incident leaves it: its ``needed``-th success after its
    newest failure (``successes`` oldest first), or None while it has had fewer."""
    ordered = sorted(successes)
    return ordered[needed - 1] if len(ordered) >= needed else None


@dataclass(frozen=True)
class IncidentFacts:
    """What :func:`next_message` needs of an incident: when it opened and resolved,
    whether it was acknowledged, and the assignments still in it."""

    opened_at: datetime
    resolved_at: datetime | None
    acknowledged: bool
    targets: frozenset[int]


@dataclass(frozen=True)
class NoticeFacts:
    """What one channel was last told of an incident (nothing yet: ``last_sent_at`` None)."""

    last_sent_at: datetime | None = None
    notified: frozenset[int] = frozenset()
    closed: bool = False


def next_message(
    incident: IncidentFacts,
    notice: NoticeFacts,
    timers: Timers,
    now: datetime,
    *,
    silenced: bool = False,
    flapping: bool = False,
    flap_announced: bool = False,
) -> MessageKind | None:
    """The message a channel gets about an incident now, or None.

    A silenced incident sends nothing (the message that is due goes out when the silence
    lifts, if it is still due). A flapping job and cause (:func:`is_flapping`) sends one
    ``flapping`` message, then nothing until it is stable again (callers close the
    notices of the incidents that opened meanwhile). An incident that resolved before its
    first message was sent still gets one ``resolved`` message once its group_wait has
    passed — a failure that fixed itself is still worth one line — unless it was silenced.
    """
    if notice.closed or silenced:
        return None
    if flapping:
        return None if flap_announced else "flapping"
    if incident.resolved_at is not None:
        if notice.last_sent_at is None and now < incident.opened_at + _s(timers.group_wait_s):
            return None
        return "resolved"
    if notice.last_sent_at is None:
        if now >= incident.opened_at + _s(timers.group_wait_s):
            return "firing"
        return None
    if incident.targets != notice.notified:
        if now >= notice.last_sent_at + _s(timers.group_interval_s):
            return "update"
        return None
    if not incident.acknowledged and now >= notice.last_sent_at + _s(timers.repeat_interval_s):
        return "reminder"
    return None


def is_flapping(
    opened: Iterable[datetime],
    now: datetime,
    *,
    threshold: int = FLAP_THRESHOLD,
    window: timedelta = FLAP_WINDOW,
) -> bool:
    """Whether the incidents of one job and cause, opened at ``opened``, flap: more than
    ``threshold`` of them opened within ``window`` before ``now``. It stops once the older
    ones age out of the window, that is once it has been stable for about a window."""
    return sum(1 for moment in opened if now - window < moment <= now) > threshold


def closes(kind: MessageKind) -> bool:
    """Whether a channel hears nothing more of the incident after this message."""
    return kind == "resolved"


# -- silences ----------------------------------------------------------------------------


@dataclass(frozen=True)
class SilenceFacts:
    """A silence: everything (no job, target nor selector), or one job, one target or the
    targets a label selector matches (each given one narrows it), between two times."""

    starts_at: datetime
    ends_at: datetime
    job_id: int | None = None
    target_id: int | None = None
    selector: Mapping[str, str] | None = None
    #: The project whose incidents it mutes; None: every project's (the mute of an
    #: unreachable host, which holds for every job on it).
    project_id: int | None = None

    def active(self, now: datetime) -> bool:
        return self.starts_at <= now < self.ends_at

    def covers(self, job_id: int, target_id: int, labels: Mapping[str, str]) -> bool:
        if self.job_id is not None and self.job_id != job_id:
            return False
        if self.target_id is not None and self.target_id != target_id:
            return False
        return not self.selector or selector_matches(self.selector, labels)


def of_project(silences: Iterable[SilenceFacts], project_id: int) -> list[SilenceFacts]:
    """The silences that may mute an incident of project ``project_id``: that project's,
    and those of no project (an unreachable host's). A silence of one project never
    mutes another's incidents, even of a job or target of the same name."""
    return [s for s in silences if s.project_id is None or s.project_id == project_id]


def is_silenced(
    silences: Iterable[SilenceFacts],
    job_id: int,
    targets: Sequence[tuple[int, Mapping[str, str]]],
    now: datetime,
) -> bool:
    """Whether an incident is muted: every one of its ``targets`` (id, labels) is covered by
    a silence in force now. An incident without targets is muted by a silence of its job
    or of everything."""
    live = [s for s in silences if s.active(now)]
    if not live:
        return False
    if not targets:
        return any(s.target_id is None and not s.selector and s.covers(job_id, 0, {}) for s in live)
    return all(any(s.covers(job_id, tid, labels) for s in live) for tid, labels in targets)


def covered(
    silences: Iterable[SilenceFacts],
    job_id: int,
    target_id: int,
    labels: Mapping[str, str],
    now: datetime,
) -> bool:
    """Whether a silence in force now mutes this job on this target: a silence of part of
    a job's targets (a target, a label selector) mutes only their share of its incidents,
    and health shows their failures marked silenced."""
    return any(s.active(now) and s.covers(job_id, target_id, labels) for s in silences)


def silence_window(
    now: datetime, *, duration: timedelta | None, until: datetime | None
) -> tuple[datetime, datetime]:
    """(starts, ends) of a silence made now, lasting ``duration`` or until ``until``
    (exactly one); raises InvalidInput naming the field when it is missing, both, or out
    of :data:`SILENCE_MIN` .. :data:`SILENCE_MAX`."""
    if (duration is None) == (until is None):
        raise InvalidInput(
            "duration: give a duration or an end time (until), not both and not neither",
            field="duration",
            allowed="a duration such as 2h, or --until TIME",
        )
    name = "duration" if duration is not None else "until"
    length = duration if duration is not None else (until - now if until else SILENCE_MIN)
    if not SILENCE_MIN <= length <= SILENCE_MAX:
        raise InvalidInput(
            f"{name}: a silence lasts from 1 minute to 90 days (asked: {_span(length)})",
            field=name,
            value=str(until.isoformat() if name == "until" and until else _span(length)),
            allowed="1m..90d",
        )
    return now, now + length


_UNITS: Final[dict[str, int]] = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str, *, field: str = "duration") -> timedelta:
    """``"90m"``, ``"2h"``, ``"1d12h"``, ``"3600"`` (seconds) -> a timedelta; raises
    InvalidInput naming ``field`` for anything else."""
    given = text.strip().lower()
    if given.isdigit():
        return timedelta(seconds=int(given))
    total, number = 0, ""
    for char in given:
        if char.isdigit():
            number += char
        elif char in _UNITS and number:
            total += int(number) * _UNITS[char]
            number = ""
        else:
            number = "bad"
            break
    if number or not given:
        raise InvalidInput(
            f"{field}: {text!r} is not a duration (e.g. 90m, 2h, 1d12h)",
            field=field,
            value=text,
            allowed="a number with s, m, h, d or w",
        )
    return timedelta(seconds=total)


# -- messages ------------------------------------------------------------------------------

#: Clusters a message names (the largest first); the rest are counted in "other".
CLUSTERS_SHOWN: Final = 5


@dataclass(frozen=True)
class Cluster:
    """Targets of an incident that failed the same way, and the labels they all share."""

    reason: str
    count: int
    labels: Mapping[str, str] = field(default_factory=dict)

    def phrase(self) -> str:
        where = ",".join(f"{k}={v}" for k, v in sorted(self.labels.items()))
        return f"{self.count} {self.reason}" + (f" in {where}" if where else "")


def failure_key(status: str, exit_code: int | None, error: str | None) -> str:
    """How a target's newest failing run failed, as a cluster's name: ``exit 1``,
    ``connect_error: connection timed out``, ``timed_out``... (an error's first line up
    to its first ": ", where the address it names usually follows, so 5,000 hosts timing
    out make one cluster, not 5,000)."""
    if status == "failed" and exit_code is not None:
        return f"exit {exit_code}"
    if error:
        head = error.splitlines()[0] if error.splitlines() else error
        return f"{status}: {head.split(': ')[0][:60]}"
    return status


def clusters(
    failures: Iterable[tuple[str, Mapping[str, str]]], *, limit: int = CLUSTERS_SHOWN
) -> list[Cluster]:
    """(failure key, target labels) of each target -> the clusters, largest first, each
    with the labels all its targets share; beyond ``limit`` clusters, one ``other``."""
    found: dict[str, list[Mapping[str, str]]] = {}
    for key, labels in failures:
        found.setdefault(key, []).append(labels)
    ordered = sorted(found.items(), key=lambda item: (-len(item[1]), item[0]))
    out: list[Cluster] = []
    for key, labelled in ordered[:limit]:
        shared = dict(labelled[0])
        for labels in labelled[1:]:
            shared = {k: v for k, v in shared.items() if labels.get(k) == v}
        out.append(Cluster(key, len(labelled), shared))
    rest = sum(len(labelled) for _, labelled in ordered[limit:])
    if rest:
        out.append(Cluster("other", rest))
    return out


@dataclass(frozen=True)
class TargetLine:
    id: int
    name: str


@dataclass(frozen=True)
class FirstRun:
    """The first failing run of an incident (none for a slot that never started)."""

    id: int
    status: str
    exit_code: int | None
    error: str | None
    stderr: str

    @property
    def link(self) -> str:
        return f"/runs/{self.id}"


@dataclass(frozen=True)
class IncidentMessage:
    """Everything one message about an incident shows."""

    kind: MessageKind
    incident_id: int
    job_id: int
    job_name: str
    cause: Cause
    opened_at: datetime
    at: datetime
    previous_state: str
    state: str
    reason: str
    targets: Sequence[TargetLine]
    target_count: int
    failed_slots: int
    joined: Sequence[TargetLine] = ()
    recovered: Sequence[TargetLine] = ()
    resolved_at: datetime | None = None
    acknowledged_by: str | None = None
    first_run: FirstRun | None = None
    clusters: Sequence[Cluster] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)

    flapping: int | None = None
    """Incidents of this job and cause opened within :data:`FLAP_WINDOW` (flapping only)."""

    host: TargetLine | None = None
    """The target a host incident (cause ``unreachable``) is about; None for a job's."""

    @property
    def status(self) -> Literal["firing", "resolved"]:
        return "resolved" if self.kind == "resolved" else "firing"

    @property
    def link(self) -> str:
        if self.host is not None:
            return host_link(self.host.name)
        return job_link(self.job_name, self.cause)

    @property
    def about(self) -> str:
        """What the incident is about: its job, or ``host NAME``."""
        return f"host {self.host.name}" if self.host is not None else self.job_name


def job_link(job_name: str, cause: Cause) -> str:
    """The job page filtered to the targets of an incident of this cause."""
    return f"/jobs/{job_name}?" + urlencode({"status": _PAGE_STATUS[cause]})


def host_link(target_name: str) -> str:
    """The target page of a host incident's target."""
    return f"/targets/{target_name}"


def bounded(names: Iterable[TargetLine], limit: int = TARGETS_SHOWN) -> list[TargetLine]:
    """The first ``limit`` targets by name (the count is given beside them)."""
    return sorted(names, key=lambda t: t.name)[:limit]


def subject(message: IncidentMessage) -> str:
    """One line that stays the same over the incident's life but for its last part, so a
    mail client sorts them together: ``[fleetcron] #12 backup failing: 50 targets``."""
    words = "unreachable" if message.host is not None else _WORDS[message.cause]
    head = f"[fleetcron] #{message.incident_id} {message.about} {words}"
    if message.kind == "resolved":
        return _one_line(f"{head}: RESOLVED after {_span(_lasted(message))}")
    count = f"{message.target_count} target{'s' if message.target_count != 1 else ''}"
    if message.kind == "flapping":
        return _one_line(
            f"{head}: FLAPPING ({message.flapping} incidents in {_span(FLAP_WINDOW)}), "
            "quiet until stable"
        )
    tail = {"firing": "", "update": " (changed)", "reminder": " (still open)"}[message.kind]
    return _one_line(f"{head}: {count}{tail}")


def render(message: IncidentMessage) -> tuple[str, str]:
    """The subject and plain text of the message."""
    lines = [*_heading(message), "", message.reason, ""]
    if message.kind == "flapping":
        lines += [
            f"Flapping: {message.flapping} incidents of this job and cause opened within "
            f"{_span(FLAP_WINDOW)}; no more messages about it until it has been stable "
            "for that long.",
            "",
        ]
    lines += _target_lines(message)
    if message.first_run is not None and message.kind != "resolved":
        lines += _first_run_lines(message.first_run)
    return subject(message), "\n".join(lines).rstrip("\n") + "\n"


def _heading(message: IncidentMessage) -> list[str]:
    """The text's first lines: the incident, its job, cause and state, when, the link."""
    lines = [
        f"Incident: #{message.incident_id} ({message.status}; {message.kind})",
        f"Host:     {message.host.name}" if message.host else f"Job:      {message.job_name}",
        f"Cause:    {_WORDS[message.cause]}",
        f"State:    {message.state} (was {message.previous_state})",
        f"Opened:   {_when(message.opened_at)}",
    ]
    if message.resolved_at is not None:
        lines.append(f"Resolved: {_when(message.resolved_at)} (lasted {_span(_lasted(message))})")
    lines.append(f"Slots:    {message.failed_slots} failed")
    if message.acknowledged_by:
        lines.append(f"Acked by: {message.acknowledged_by}")
    lines.append(f"Link:     {message.link}")
    return lines


def _target_lines(message: IncidentMessage) -> list[str]:
    """How the targets failed and which they are (not in a resolved message), and which
    joined and recovered since the last message."""
    lines: list[str] = []
    if message.kind != "resolved":
        if len(message.clusters) > 1 or (message.clusters and message.clusters[0].labels):
            lines.append("Failed as: " + "; ".join(c.phrase() for c in message.clusters))
        lines.append(
            f"Targets ({message.target_count}): {_names(message.targets, message.target_count)}"
        )
    if message.joined:
        lines.append(f"Joined:    {_names(message.joined, len(message.joined))}")
    if message.recovered:
        lines.append(f"Recovered: {_names(message.recovered, len(message.recovered))}")
    return lines


def _first_run_lines(run: FirstRun) -> list[str]:
    lines = [
        "",
        f"First failing run: {run.link} ({run.status}"
        + (f", exit code {run.exit_code}" if run.exit_code is not None else "")
        + ")",
    ]
    if run.error:
        lines.append(f"  {run.error}")
    if run.stderr:
        lines.append("stderr:")
        lines += ["  " + line for line in run.stderr.splitlines()]
    return lines


def payload(message: IncidentMessage) -> dict[str, Any]:
    """The webhook body of schema ``fleetcron.incident/1``. Fields are only ever added to
    this schema, never renamed or removed. The fields of ``fleetcron.alert/1`` that still
    mean something (``event``, ``state``, ``previous_state``, ``job``, ``run``) keep their
    names, so a receiver written for it keeps working."""
    subject_line, text = render(message)
    run = message.first_run
    event = "recovery" if message.kind == "resolved" else _EVENTS[message.cause]
    return {
        "schema": INCIDENT_SCHEMA,
        "incident_id": message.incident_id,
        "status": message.status,
        "message": message.kind,
        "event": event,
        "cause": message.cause,
        "state": message.state,
        "previous_state": message.previous_state,
        "at": message.at.isoformat(),
        "opened_at": message.opened_at.isoformat(),
        "resolved_at": message.resolved_at.isoformat() if message.resolved_at else None,
        "acknowledged_by": message.acknowledged_by,
        "subject": subject_line,
        "text": text,
        "job": {"id": message.job_id, "name": message.job_name},
        "host": None
        if message.host is None
        else {"id": message.host.id, "name": message.host.name},
        "link": message.link,
        "reason": message.reason,
        "failed_slots": message.failed_slots,
        "clusters": [
            {"reason": c.reason, "count": c.count, "labels": dict(c.labels)}
            for c in message.clusters
        ],
        "flapping": None
        if message.flapping is None
        else {"incidents": message.flapping, "window_s": FLAP_WINDOW.total_seconds()},
        "targets": _targets_body(message),
        "run": None if run is None else _run_body(run),
        **dict(message.extra),
    }


def _targets_body(message: IncidentMessage) -> dict[str, Any]:
    """The payload's ``targets``: the whole count, and the bounded lists of names."""
    return {
        "count": message.target_count,
        "shown": [{"id": t.id, "name": t.name} for t in message.targets],
        "joined": [{"id": t.id, "name": t.name} for t in message.joined],
        "recovered": [{"id": t.id, "name": t.name} for t in message.recovered],
    }


def _run_body(run: FirstRun) -> dict[str, Any]:
    """The payload's ``run``: the incident's first failing run."""
    return {
        "id": run.id,
        "status": run.status,
        "exit_code": run.exit_code,
        "error": run.error,
        "stderr": run.stderr,
        "link": run.link,
    }


_EVENTS: Final[dict[Cause, str]] = {
    "failing": "failure",
    "late": "late",
    "stuck": "late",
    "halted": "failure",
    "unreachable": "failure",
}


def rule_event(message: IncidentMessage) -> str:
    """The rule switch (``on_failure``, ``on_late``, ``on_recovery``) a message obeys."""
    return "recovery" if message.kind == "resolved" else _EVENTS[message.cause]


def cause_event(cause: Cause) -> str:
    """The rule switch that lets an incident of this cause be announced at all."""
    return _EVENTS[cause]


def _names(targets: Sequence[TargetLine], count: int) -> str:
    return named_few([t.name for t in targets], len(targets), total=count)


def _lasted(message: IncidentMessage) -> timedelta:
    end = message.resolved_at or message.at
    return max(end - message.opened_at, timedelta(0))


def _span(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    if seconds < 0:
        return f"-{_span(-delta)}"
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [
        f"{days}d" if days else "",
        f"{hours}h" if hours else "",
        f"{minutes}m" if minutes else "",
    ]
    text = "".join(parts)
    if secs or not text:
        text += f"{secs}s"
    return text


def _s(seconds: float) -> timedelta:
    return timedelta(seconds=seconds)


def _when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S %Z").strip()


def _one_line(text: str) -> str:
    # A subject is a mail header: a line break in it would start a new header.
    return " ".join(text.split())


__all__ = [
    "CAUSES",
    "CLUSTERS_SHOWN",
    "DEFAULT_GROUP_INTERVAL_S",
    "DEFAULT_GROUP_WAIT_S",
    "DEFAULT_REPEAT_INTERVAL_S",
    "FLAP_THRESHOLD",
    "FLAP_WINDOW",
    "HOST_CAUSE",
    "INCIDENT_SCHEMA",
    "MESSAGE_KINDS",
    "SILENCE_MAX",
    "SILENCE_MIN",
    "TARGETS_SHOWN",
    "THRESHOLD_BOUNDS",
    "TIMER_BOUNDS",
    "Cause",
    "Cluster",
    "FirstRun",
    "IncidentFacts",
    "IncidentMessage",
    "MessageKind",
    "NoticeFacts",
    "RuleTimers",
    "SilenceFacts",
    "TargetLine",
    "Thresholds",
    "Timers",
    "bounded",
    "cause_event",
    "checked_timers",
    "closes",
    "clusters",
    "covered",
    "failure_key",
    "host_link",
    "is_flapping",
    "is_silenced",
    "job_link",
    "merged",
    "merged_thresholds",
    "next_message",
    "parse_duration",
    "payload",
    "reached_at",
    "released_at",
    "render",
    "rule_event",
    "silence_window",
    "subject",
]
