"""One declaration of a job's options: the table every adapter derives its fields from.

Each :class:`JobOption` says once what an option is called in each place (the attribute of
``JobSpec``/``JobView``/the ``jobs`` column and the API field, ``name``; the schedule-file
key, the web form field and the field an error names, ``key``; the CLI flag), its type,
default, bounds or choices, help text, and whether the job form shows it among the run
options. From :data:`OPTIONS` come the ``job add``/``job edit`` flags
(:mod:`fleetcron.cli.job_cmd`), the API models' fields (:mod:`fleetcron.web.schemas`), the
form's parsing and its fields (:mod:`fleetcron.web.pages.jobs`, ``macros.html``), the
schedule-file keys and their types (:mod:`fleetcron.core.schedule_file`) and the fields a
job edit accepts (:data:`fleetcron.services.jobs.edit.EDITABLE`).

Adding an option: one entry here, the column (``store/schema.py`` plus a migration) and the
typed fields of ``JobSpec``, ``JobView`` and ``JobState``, which a test checks against this
table; the scheduler reads it where it acts on it.

Pure: no I/O. :func:`check_option` applies the rules the table states (ranges, choices,
lengths) and raises :class:`InvalidInput` naming the field, the value and what is allowed;
rules that need the settings or the cron engine (the schedule, the zone, the command's
configured limit) stay with the jobs service.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

from fleetcron.core import rollout
from fleetcron.core import validation as v
from fleetcron.core.blackouts import ON_BLACKOUT
from fleetcron.core.calendars import calendar_reference
from fleetcron.cron import dst
from fleetcron.cron.zones import validate_timezone
from fleetcron.errors import InvalidInput

#: text: a string; int: a whole number; choice: one of ``choices``; choices: a list of
#: ``choices``; flag: true or false.
OptionKind = Literal["text", "int", "choice", "choices", "flag"]

#: The longest ``canary`` option (target names or a selector).
CANARY_MAX_CHARS = 2000
#: The longest a job may keep its runs by outcome (100 years, as ``retention_days``).
MAX_KEEP_DAYS = 100 * 365


@dataclass(frozen=True)
class JobOption:
    """One option of a job, as every adapter sees it."""

    #: The attribute of ``JobSpec``, ``JobView`` and the ``jobs`` column; the API field.
    name: str
    #: The schedule-file key, the web form field and the field an error names.
    key: str
    kind: OptionKind
    #: The product's default. ``None`` with ``setting``: the setting of that name decides.
    default: Any
    help: str
    #: The label in the job form.
    label: str = ""
    #: The CLI flag of ``job add`` and ``job edit`` (default: ``--`` and the key with dashes).
    cli_flag: str = ""
    #: Other spellings the CLI accepts for the same flag (kept for scripts written before
    #: the flag got its name).
    cli_aliases: tuple[str, ...] = ()
    low: int | None = None
    high: int | None = None
    choices: tuple[str, ...] = ()
    #: How the form shows each choice (default: the choice itself).
    choice_labels: Mapping[str, str] = field(default_factory=dict)
    #: The longest text, in characters (refused beyond, never cut).
    max_chars: int | None = None
    #: Needed when a job is added (``job add`` requires the flag, the API the field).
    required: bool = False
    #: Shown among the "Run options" of the job form, drawn by the loop in ``macros.html``
    #: (the schedule, zone, command and notes have their own fields there).
    form: bool = True
    #: The :class:`~fleetcron.config.Settings` attribute that gives the value when the
    #: option is left unset (``default`` is then ``None``).
    setting: str | None = None
    #: A rule beyond what the table states: takes the value (already checked against the
    #: table) and returns it normalized, or raises :class:`InvalidInput`.
    check: Callable[[Any], Any] | None = None
    #: A text that may be a count: an integer in JSON or YAML (``10``) is taken as its text
    #: (``"10"``), so a count needs no quotes where a percentage (``10%``) is a string.
    count_as_text: bool = False

    @property
    def flag(self) -> str:
        return self.cli_flag or "--" + self.key.replace("_", "-")

    @property
    def allowed(self) -> str:
        """What the option accepts, as the help and the errors say it."""
        if self.kind == "int":
            return f"{self.low}-{self.high}"
        if self.kind in ("choice", "choices"):
            return ", ".join(self.choices)
        if self.kind == "flag":
            return "true or false"
        return f"at most {self.max_chars} characters" if self.max_chars else "text"

    def plain(self, value: Any) -> Any:
        """The value as plain, comparable data (a list of choices becomes a tuple)."""
        return tuple(value) if self.kind == "choices" else value

    def stored(self, value: Any) -> Any:
        """The value as the column and the views hold it (a list of choices is a list)."""
        return list(value) if self.kind == "choices" else value


OPTIONS: tuple[JobOption, ...] = (
    JobOption(
        "schedule",
        "schedule",
        "text",
        None,
        'Cron expression, e.g. "0 2 * * 0".',
        label="Schedule",
        max_chars=v.SCHEDULE_MAX_CHARS,
        required=True,
        form=False,
    ),
    JobOption(
        "timezone",
        "timezone",
        "text",
        None,
        'IANA time zone, or "target": each target\'s own (default: the configured one).',
        label="Time zone",
        cli_flag="--timezone",
        cli_aliases=("--tz",),
        max_chars=v.TIMEZONE_MAX_CHARS,
        form=False,
        setting="timezone",
    ),
    JobOption(
        "command",
        "command",
        "text",
        None,
        "Shell command, run verbatim.",
        label="Command",
        required=True,
        form=False,
    ),
    JobOption(
        "notes",
        "notes",
        "text",
        "",
        "Why this job exists; shown in the lists.",
        label="Notes",
        max_chars=v.NOTES_MAX_CHARS,
        form=False,
    ),
    JobOption(
        "timeout_s",
        "timeout",
        "int",
        None,
        "Seconds before the run is killed.",
        label="Timeout (s)",
        low=1,
        high=v.MAX_TIMEOUT_S,
        setting="job_timeout_s",
    ),
    JobOption(
        "overlap",
        "overlap",
        "choice",
        "allow",
        "While the previous run still goes on: allow starts anyway, forbid skips the slot.",
        label="If still running",
        choices=v.OVERLAP_POLICIES,
        choice_labels={"allow": "start anyway", "forbid": "skip this slot"},
    ),
    JobOption(
        "catchup",
        "catchup",
        "choice",
        "none",
        "latest: after downtime, run the most recent missed slot once.",
        label="Missed slots",
        choices=v.CATCHUP_POLICIES,
        choice_labels={"none": "skip them", "latest": "run the latest once"},
    ),
    JobOption(
        "jitter_s",
        "jitter",
        "int",
        0,
        "Start window: up to N seconds more after each target's spread offset, each "
        "target's own amount (fixed from slot to slot, like the offset); 0: none.",
        label="Plus jitter (s)",
        low=0,
        high=v.MAX_JITTER_S,
    ),
    JobOption(
        "spread_s",
        "spread",
        "int",
        0,
        "Start window: a slot's targets start over N seconds after it, each at its own "
        "offset, fixed from slot to slot (from the job and target ids); 0: all at once.",
        label="Spread (s)",
        low=0,
        high=v.MAX_JITTER_S,
    ),
    JobOption(
        "retries",
        "retries",
        "int",
        0,
        "Extra attempts after a failure.",
        label="Retries",
        low=0,
        high=v.MAX_RETRIES,
    ),
    JobOption(
        "retry_on",
        "retry_on",
        "choices",
        ("connect_error",),
        "Failure kinds that are retried (default connect_error).",
        label="Retry when a run",
        choices=v.RETRY_KINDS,
        choice_labels={
            "connect_error": "cannot connect",
            "failed": "fails (non-zero exit)",
            "timed_out": "times out",
        },
    ),
    JobOption(
        "retry_backoff_s",
        "retry_backoff",
        "int",
        30,
        "Seconds before the first retry; doubles after each.",
        label="Retry backoff (s)",
        low=1,
        high=v.MAX_RETRY_BACKOFF_S,
    ),
    JobOption(
        "allow_duplicate",
        "allow_duplicate",
        "flag",
        False,
        "Allow another job to run the same command on the same target.",
        label="Allow duplicates",
        form=False,
    ),
    # Rollout of each slot over the job's targets (core/rollout.py); empty: not set.
    JobOption(
        "batch",
        "batch",
        "text",
        "",
        "Bulk jobs: start this many targets of a slot at a time, a count or a percentage "
        "(10 or 10%); empty: all at once.",
        label="Batch",
        max_chars=8,
        check=lambda value: rollout.normal_amount(value, field="batch"),
        count_as_text=True,
    ),
    JobOption(
        "batch_pause_s",
        "batch_pause",
        "int",
        0,
        "Seconds between the end of one batch and the start of the next.",
        label="Pause between batches (s)",
        low=0,
        high=rollout.MAX_PAUSE_S,
    ),
    JobOption(
        "max_failures",
        "max_failures",
        "text",
        "",
        "Bulk jobs: after this many failed targets (a count or a percentage), the rest of "
        "the slot is skipped and an alert fires; empty: no limit.",
        label="Max failures",
        max_chars=8,
        check=lambda value: rollout.normal_amount(value, field="max_failures"),
        count_as_text=True,
    ),
    JobOption(
        "canary",
        "canary",
        "text",
        "",
        "Bulk jobs: targets that run first (names, web1,web2, or a selector, role=canary); "
        "the rest start only if all of them succeeded.",
        label="Canary",
        max_chars=CANARY_MAX_CHARS,
        check=lambda value: rollout.normal_canary(value),
    ),
    # Time policy: what a slot inside a blackout window does (core/blackouts.py).
    JobOption(
        "on_blackout",
        "on_blackout",
        "choice",
        "skip",
        "A slot inside a blackout window: skip records it skipped; defer runs it once "
        "when the window ends (recorded with its own slot).",
        label="During a blackout",
        choices=ON_BLACKOUT,
        choice_labels={"skip": "skip the slot", "defer": "run it when the window ends"},
    ),
    # Time policy: calendars filtering the fire times (core/calendars.py); empty: not set.
    JobOption(
        "run_only_on",
        "run_only_on",
        "text",
        "",
        "Fire only on the dates of this calendar (business-days), or on its n-th date of "
        "each month (business-days:last, :first, :2, :-2); other dates are no fire times.",
        label="Run only on",
        max_chars=80,
        check=lambda value: calendar_reference(value, field_name="run_only_on"),
    ),
    JobOption(
        "never_on",
        "never_on",
        "text",
        "",
        "Never fire on the dates of this calendar (holidays).",
        label="Never on",
        max_chars=80,
        check=lambda value: calendar_reference(value, field_name="never_on"),
    ),
    # -- Time policy: DST choices (cron/dst.py) and history kept by outcome
    # (services/runs/retention.py).
    JobOption(
        "dst_gap",
        "dst_gap",
        "choice",
        dst.CRONIE,
        "A scheduled time that a DST jump skips: cronie: as cron does (a fixed time runs "
        "right after the jump, a */N or * schedule skips it); run_at_gap_end: runs right "
        "after the jump; skip: does not run that day.",
        label="Time skipped by DST",
        choices=dst.GAP_CHOICES,
        choice_labels={
            "cronie": "as cron does",
            "run_at_gap_end": "run right after the jump",
            "skip": "skip it",
        },
    ),
    JobOption(
        "dst_fold",
        "dst_fold",
        "choice",
        dst.CRONIE,
        "A scheduled time that a DST change repeats: cronie: as cron does (a fixed time "
        "runs once, on the first pass; a */N or * schedule on both); first, last: once, on "
        "that pass; both: on each pass.",
        label="Time repeated by DST",
        choices=dst.FOLD_CHOICES,
        choice_labels={
            "cronie": "as cron does",
            "first": "once, first pass",
            "last": "once, second pass",
            "both": "on both passes",
        },
    ),
    JobOption(
        "keep_successes_days",
        "keep_successes_days",
        "int",
        0,
        "Days this job's successful runs are kept; 0: as configured "
        "(retention_success_days, else retention_days).",
        label="Keep successes (days)",
        low=0,
        high=MAX_KEEP_DAYS,
    ),
    JobOption(
        "keep_failures_days",
        "keep_failures_days",
        "int",
        0,
        "Days this job's failed runs are kept; 0: as configured "
        "(retention_failure_days, else retention_days).",
        label="Keep failures (days)",
        low=0,
        high=MAX_KEEP_DAYS,
    ),
)

BY_NAME: Mapping[str, JobOption] = {option.name: option for option in OPTIONS}
BY_KEY: Mapping[str, JobOption] = {option.key: option for option in OPTIONS}
#: The run options the job form draws in its loop.
FORM_OPTIONS: tuple[JobOption, ...] = tuple(option for option in OPTIONS if option.form)


def option(name: str) -> JobOption:
    """The option with this attribute name (``retry_backoff_s``)."""
    return BY_NAME[name]


def defaults() -> dict[str, Any]:
    """The product's default of every option, by attribute name (``None``: a setting's)."""
    return {option.name: option.default for option in OPTIONS}


def check_option(option: JobOption, value: Any) -> Any:
    """``value`` checked against what the table says of ``option``; returns it normalized
    (a list of choices as a list). ``None`` passes for an option a setting fills in."""
    field_name = option.key
    if value is None and option.setting is not None:
        return None
    if option.kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidInput(
                f"{field_name}: {value!r} is not a whole number",
                field=field_name,
                value=value,
                allowed=option.allowed,
            )
        assert option.low is not None and option.high is not None
        v.validate_int(value, field=field_name, low=option.low, high=option.high)
    elif option.kind == "choice":
        v.validate_choice(value, option.choices, field=field_name)
    elif option.kind == "choices":
        value = [v.validate_choice(item, option.choices, field=field_name) for item in value]
    elif option.kind == "flag":
        if not isinstance(value, bool):
            raise InvalidInput(
                f"{field_name}: {value!r} is not true or false",
                field=field_name,
                value=value,
                allowed=option.allowed,
            )
    else:
        if not isinstance(value, str):
            raise InvalidInput(
                f"{field_name}: {value!r} is not text",
                field=field_name,
                value=value,
                allowed=option.allowed,
            )
        if option.max_chars is not None:
            v.validate_length(value, field=field_name, limit=option.max_chars)
    return option.check(value) if option.check is not None else value


#: A rule over several options of one job: it gets every option's value by attribute name
#: and raises :class:`InvalidInput` naming the field to change.
JobRule = Callable[[Mapping[str, Any]], None]


#: The rules over several options, checked by :func:`check_job` when a job is added, edited
#: or applied from a schedule file (after each option passed its own checks).
def _start_delay_bounded(values: Mapping[str, Any]) -> None:
    """Spread and jitter add up (a start waits its spread offset, then its jitter): the
    longest wait is their sum, which stays within the bound of either alone."""
    jitter, spread = values.get("jitter_s") or 0, values.get("spread_s") or 0
    if jitter + spread > v.MAX_JITTER_S:
        raise InvalidInput(
            f"spread: {spread} with jitter {jitter} could delay a start by {jitter + spread} s; "
            f"spread and jitter together are at most {v.MAX_JITTER_S}",
            field="spread",
            value=spread,
            allowed=f"0-{v.MAX_JITTER_S - jitter} with jitter {jitter}",
        )


#: The options that make a slot's start window (``core/start_window.py``), in the order the
#: job form shows them together, under one explanation (``start_window_help.html``).
START_WINDOW_KEYS = ("spread", "jitter")


#: The options that roll a slot out over its targets: a bulk job's only.
ROLLOUT_KEYS = ("canary", "batch", "max_failures")


def _rollout_is_for_bulk_jobs(values: Mapping[str, Any]) -> None:
    """A rollout is a plan over a bulk slot's targets. On an individual job it means
    nothing, except that a canary naming another target stops every slot from running;
    so an individual job (``origin``, when the caller gives it) has none of them."""
    if values.get("origin") != "individual":
        return
    for key in ROLLOUT_KEYS:
        if values.get(key):
            raise InvalidInput(
                f"{key}: {values[key]!r} applies to bulk jobs only (a rollout over their "
                "targets); an individual job runs on its one target",
                field=key,
                value=values[key],
                allowed="empty on an individual job",
            )


#: How far ahead a zone is looked at for a DST transition when a job asks for a DST choice.
DST_HORIZON = timedelta(days=10 * 366)
DST_KEYS = ("dst_gap", "dst_fold")


def _dst_choice_needs_dst(values: Mapping[str, Any]) -> None:
    """A DST choice other than cronie's on a job whose own zone has no transition in the
    next ten years (from ``today``, when the caller gives it) would never act: refused, so
    the job does not promise what it cannot do. A job in the ``target`` zone is accepted:
    the choice acts on its targets whose zone has DST (the previews say which have none)."""
    today, zone = values.get("today"), values.get("timezone")
    if today is None or not zone or zone == "target":
        return
    for key in DST_KEYS:
        choice = values.get(key) or dst.CRONIE
        if choice == dst.CRONIE:
            continue
        if not dst.has_dst(validate_timezone(zone), today, today + DST_HORIZON):
            raise InvalidInput(
                f"{key}: {choice!r} would never act: the job's zone {zone} has no DST "
                "transition in the next ten years; leave it cronie, or choose a zone with "
                'DST (or "target", each target\'s own)',
                field=key,
                value=choice,
                allowed=f"cronie in {zone}",
            )


JOB_RULES: tuple[JobRule, ...] = (
    _start_delay_bounded,
    _rollout_is_for_bulk_jobs,
    _dst_choice_needs_dst,
)


def check_job(values: Mapping[str, Any]) -> None:
    """Every rule over several options of one job (``values``: each option by name, and
    ``origin``, ``bulk`` or ``individual``, and ``today``, the aware instant a change is
    made, for the rules that depend on them)."""
    for rule in JOB_RULES:
        rule(values)


def check_options(values: Mapping[str, Any]) -> dict[str, Any]:
    """Every option given in ``values`` (by attribute name) checked and normalized; other
    keys pass unchanged."""
    out = dict(values)
    for name, value in values.items():
        if name in BY_NAME:
            out[name] = check_option(BY_NAME[name], value)
    return out


__all__ = [
    "BY_KEY",
    "BY_NAME",
    "FORM_OPTIONS",
    "JOB_RULES",
    "OPTIONS",
    "START_WINDOW_KEYS",
    "JobOption",
    "JobRule",
    "OptionKind",
    "check_job",
    "check_option",
    "check_options",
    "defaults",
    "option",
]
