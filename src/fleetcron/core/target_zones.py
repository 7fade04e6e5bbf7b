"""Each target's own local time: which zone an assignment's schedule runs in, and reading
the zone a server reports at pairing.

A job whose ``timezone`` is the literal :data:`TARGET_LOCAL` (``"target"``) fires each
assignment at its target's local wall time, with the cron engine's DST rules for that
zone. A target without a zone falls back to the default zone of new jobs (the
``timezone`` setting). Every next-fire computation asks :func:`assignment_schedule`, so
the services (``services/fleet.next_fire``) and the run store (advancing ``next_fire_at``
after a fire) agree.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import difflib
from functools import lru_cache
from zoneinfo import available_timezones

from fleetcron.cron import CronSchedule, DstPolicy, parse_cached, validate_timezone
from fleetcron.cron.dst import CRONIE
from fleetcron.cron.dst import DEFAULT as DEFAULT_DST
from fleetcron.errors import InvalidInput

#: The job time zone meaning "each target's own zone".
TARGET_LOCAL = "target"
#: Who set a target's zone: detected over SSH (or the scheduler host's, for a local
#: target) at pairing, or given by an operator (never overwritten by a detection).
SOURCE_DETECTED = "detected"
SOURCE_OPERATOR = "operator"
TIMEZONE_SOURCES = (SOURCE_DETECTED, SOURCE_OPERATOR)

#: One command, POSIX sh, that prints the server's zone: ``timedatectl`` first, then
#: ``/etc/timezone``, then the ``/etc/localtime`` symlink. Each step's output is tagged so
#: the parser knows which source answered.
DETECT_COMMAND = (
    'z=$(timedatectl show -p Timezone --value 2>/dev/null) && [ -n "$z" ] '
    '&& { echo "timedatectl:$z"; exit 0; }; '
    '[ -r /etc/timezone ] && z=$(head -n 1 /etc/timezone) && [ -n "$z" ] '
    '&& { echo "etc_timezone:$z"; exit 0; }; '
    'z=$(readlink /etc/localtime 2>/dev/null) && [ -n "$z" ] '
    '&& { echo "localtime:$z"; exit 0; }; '
    "echo none:; exit 0"
)

_ZONEINFO_MARKERS = ("/zoneinfo/", "zoneinfo/")


@lru_cache(maxsize=1)
def _known_zones() -> dict[str, str]:
    """Every IANA zone this machine knows, by its lower-case name."""
    return {zone.lower(): zone for zone in available_timezones()}


def suggest_zone(name: str) -> str | None:
    """The known zone an unknown ``name`` most likely means (``europe/warsaw``,
    ``Europe/Warsow`` → ``Europe/Warsaw``), or ``None`` when nothing is close.

    The one source of "did you mean" for every adapter: the CLI, the API and the forms
    all reach it through :func:`validate_zone`."""
    if not isinstance(name, str) or not name.strip():
        return None
    known = _known_zones()
    wanted = name.strip().lower().replace(" ", "_")
    if wanted in known:
        return known[wanted]
    # A bare city ("warsaw") is matched against the last part of each zone's name.
    by_city = {zone.rsplit("/", 1)[-1]: zone for zone in known if "/" in zone}
    if wanted in by_city:
        return known[by_city[wanted]]
    close = difflib.get_close_matches(wanted, list(known), n=1, cutoff=0.8)
    return known[close[0]] if close else None


def validate_zone(name: str, *, field: str = "timezone", extra: str = "") -> str:
    """An IANA zone name (normalized), or :class:`InvalidInput` naming ``field``, the value,
    what is allowed (``extra`` appended to it) and the closest known zone, if any
    ("did you mean Europe/Warsaw?")."""
    try:
        return str(validate_timezone(name).key)
    except InvalidInput as exc:
        allowed = f"{exc.allowed}{extra}"
        head = exc.message.rsplit("; expected", 1)[0].removeprefix("timezone: ")
        hint = suggest_zone(name)
        message = f"{field}: {head}; " + (f"did you mean {hint}? " if hint else "")
        raise InvalidInput(
            message + f"expected {allowed}", field=field, value=name, allowed=allowed
        ) from None


def validate_job_timezone(name: str) -> str:
    """A job's zone: :data:`TARGET_LOCAL` or an IANA name (normalized); anything else is
    refused naming the field, the value, what is allowed and the closest zone."""
    if name == TARGET_LOCAL:
        return TARGET_LOCAL
    return validate_zone(name, extra=f', or "{TARGET_LOCAL}" (each target\'s own zone)')


def validate_target_timezone(name: str) -> str:
    """A target's zone: an IANA name (``target`` is a job's word, not a zone)."""
    return validate_zone(name)


def effective_zone(job_zone: str, target_zone: str | None, default_zone: str) -> str:
    """The zone an assignment's schedule runs in: the job's own, or, for a target-local
    job, the target's (``default_zone`` when the target has none)."""
    if job_zone != TARGET_LOCAL:
        return job_zone
    return target_zone or default_zone


def assignment_schedule(
    schedule: str,
    job_zone: str,
    target_zone: str | None,
    default_zone: str,
    dst: DstPolicy = DEFAULT_DST,
) -> CronSchedule:
    """The parsed schedule of one assignment, in its effective zone, under the job's DST
    policy (cached)."""
    return parse_cached(schedule, effective_zone(job_zone, target_zone, default_zone), dst)


def dst_policy(gap: str | None, fold: str | None) -> DstPolicy:
    """A job's DST policy from its two columns (``None``, a row read before migration 0029
    ran: Debian cron's rule)."""
    return DstPolicy(gap or CRONIE, fold or CRONIE)


def parse_detected_zone(output: str) -> tuple[str | None, str]:
    """Read what :data:`DETECT_COMMAND` printed: ``(zone, how)``.

    ``zone`` is a known IANA name, or ``None`` with ``how`` saying why not (no source
    answered, or the answer is not a zone this machine knows). A ``/etc/localtime`` link
    target is reduced to the part after ``zoneinfo/`` (``/usr/share/zoneinfo/Asia/Tokyo``
    → ``Asia/Tokyo``; ``../usr/share/zoneinfo/UTC`` → ``UTC``)."""
    line = next((ln.strip() for ln in output.splitlines() if ln.strip()), "")
    source, sep, value = line.partition(":")
    if not sep or source not in ("timedatectl", "etc_timezone", "localtime"):
        return None, "no zone reported (timedatectl, /etc/timezone and /etc/localtime)"
    value = value.strip()
    if source == "localtime":
        for marker in _ZONEINFO_MARKERS:
            if marker in value:
                value = value.rsplit(marker, 1)[1]
                break
        else:
            return None, f"/etc/localtime links to {value!r}, which is not a zoneinfo file"
    label = {"timedatectl": "timedatectl", "etc_timezone": "/etc/timezone"}.get(
        source, "/etc/localtime"
    )
    try:
        return validate_target_timezone(value), label
    except InvalidInput:
        return None, f"{label} reported {value[:64]!r}, which is not a known time zone"
