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

from fleetcron.cron import CronSchedule, parse_cached, validate_timezone
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


def validate_job_timezone(name: str) -> str:
    """A job's zone: :data:`TARGET_LOCAL` or an IANA name (normalized); anything else is
    refused naming the field, the value and what is allowed."""
    if name == TARGET_LOCAL:
        return TARGET_LOCAL
    try:
        return str(validate_timezone(name).key)
    except InvalidInput as exc:
        allowed = f'{exc.allowed}, or "{TARGET_LOCAL}" (each target\'s own zone)'
        raise InvalidInput(
            f"{exc.message.rsplit('; expected', 1)[0]}; expected {allowed}",
            field="timezone",
            value=name,
            allowed=allowed,
        ) from None


def validate_target_timezone(name: str) -> str:
    """A target's zone: an IANA name (``target`` is a job's word, not a zone)."""
    return str(validate_timezone(name).key)


def effective_zone(job_zone: str, target_zone: str | None, default_zone: str) -> str:
    """The zone an assignment's schedule runs in: the job's own, or, for a target-local
    job, the target's (``default_zone`` when the target has none)."""
    if job_zone != TARGET_LOCAL:
        return job_zone
    return target_zone or default_zone


def assignment_schedule(
    schedule: str, job_zone: str, target_zone: str | None, default_zone: str
) -> CronSchedule:
    """The parsed schedule of one assignment, in its effective zone (cached)."""
    return parse_cached(schedule, effective_zone(job_zone, target_zone, default_zone))


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
