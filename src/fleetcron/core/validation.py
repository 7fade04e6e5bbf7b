"""Rules for the fields operators type: names, commands, timeouts and job options.

Each check raises :class:`InvalidInput` naming the field, the value and what is allowed.
"""

from __future__ import annotations

import re
import unicodedata

from fleetcron.errors import InvalidInput

#: The longest name of a job, target, user or token (the columns are 64 characters).
NAME_MAX_CHARS = 64
#: Passwords: at least this many characters, and at most (a longer one is refused, never
#: cut, so it cannot make a hash cost more than any other).
PASSWORD_MIN_CHARS = 8
PASSWORD_MAX_CHARS = 1024

NAME_RULE = (
    "lowercase letters, digits, '.', '_' and '-', starting with a letter or digit, at most "
    f"{NAME_MAX_CHARS}"
)
_NAME = re.compile(rf"[a-z0-9][a-z0-9._-]{{0,{NAME_MAX_CHARS - 1}}}")

OVERLAP_POLICIES = ("allow", "forbid")
CATCHUP_POLICIES = ("none", "latest")
RETRY_KINDS = ("connect_error", "failed", "timed_out")
ROLES = ("viewer", "operator", "admin")
MAX_TIMEOUT_S = 7 * 24 * 3600
MAX_JITTER_S = 3600
MAX_RETRIES = 10
MAX_RETRY_BACKOFF_S = 3600

#: Length limits of the free-text fields, in characters: the one declaration the services
#: (the authority), the API models and the web forms all read.
#: A schedule is stored in a 255-character column (the cron engine itself reads up to 1000).
SCHEDULE_MAX_CHARS = 255
#: An IANA time zone name (the column is 64 characters).
TIMEZONE_MAX_CHARS = 64
#: Notes of a job or a target.
NOTES_MAX_CHARS = 10_000
#: The highest value of the ``command_max_length`` setting, which is the limit a job's
#: command is checked against (512 characters by default).
COMMAND_MAX_CHARS = 65_536


def validate_name(value: str, *, field: str = "name") -> str:
    if not _NAME.fullmatch(value):
        raise InvalidInput(
            f"{field}: {value!r} is not a valid name; allowed: {NAME_RULE}",
            field=field,
            value=value,
            allowed=NAME_RULE,
        )
    return value


#: Names a job or a target cannot take, with the page that has the path: the web's own
#: words beside ``/jobs/{name}`` and ``/targets/{name}``, so such a job or target would have
#: no page of its own. (Every other page of one is ``/jobs/{name}/...``, which no word
#: shadows.) One that exists from before is still shown by the CLI and the API, and its edit,
#: delete and versions pages answer.
RESERVED_JOB_NAMES = {"new": "/jobs/new is the form that adds a job"}
RESERVED_TARGET_NAMES = {
    "new": "/targets/new is the form that adds a target",
    "trust": "/api/v1/targets/trust is the list of how each host is trusted",
}


def validate_job_name(value: str, *, field: str = "name") -> str:
    """A job's name when it is created: :func:`validate_name`, and not a reserved word
    (:data:`RESERVED_JOB_NAMES`)."""
    return _validate_unreserved(value, field=field, reserved=RESERVED_JOB_NAMES)


def validate_target_name(value: str, *, field: str = "name") -> str:
    """A target's name when it is added: :func:`validate_name`, and not a reserved word
    (:data:`RESERVED_TARGET_NAMES`)."""
    return _validate_unreserved(value, field=field, reserved=RESERVED_TARGET_NAMES)


def _validate_unreserved(value: str, *, field: str, reserved: dict[str, str]) -> str:
    validate_name(value, field=field)
    why = reserved.get(value)
    if why is not None:
        allowed = f"{NAME_RULE}, other than {', '.join(sorted(reserved))}"
        raise InvalidInput(
            f"{field}: {value!r} is reserved ({why}); allowed: {allowed}",
            field=field,
            value=value,
            allowed=allowed,
        )
    return value


SEARCH_TEXT_RULE = "text without control characters (NUL, escape, newline, tab, ...)"
_CONTROL_NAMES = {
    "\x00": "NUL", "\t": "tab", "\n": "newline", "\r": "carriage return", "\x1b": "escape",
    "\x7f": "DEL",
}  # fmt: skip


def validate_search_text(value: str, *, field: str) -> str:
    """The text of a search (``q=`` of the targets list and of the runs search): no
    control character. A NUL ends a LIKE pattern on SQLite (the search matched everything)
    and is an error on PostgreSQL, so the same text answered differently on the two; the
    other control characters cannot be typed into a search box and are refused alike, in
    this one place, before any database sees the text."""
    bad = next((c for c in value if unicodedata.category(c) == "Cc"), None)
    if bad is not None:
        shown = _CONTROL_NAMES.get(bad, f"U+{ord(bad):04X}")
        raise InvalidInput(
            f"{field}: contains a control character ({shown}); allowed: {SEARCH_TEXT_RULE}",
            field=field,
            value=value,
            allowed=SEARCH_TEXT_RULE,
        )
    return value


def validate_command(value: str, *, max_length: int, field: str = "command") -> str:
    """A command is stored verbatim: never templated, never stripped."""
    if not value.strip():
        raise InvalidInput(
            f"{field}: must not be empty", field=field, value=value, allowed="a shell command"
        )
    if "\x00" in value:
        raise InvalidInput(
            f"{field}: contains a NUL character",
            field=field,
            value=value,
            allowed="text without NUL",
        )
    return validate_length(value, field=field, limit=max_length)


def too_long_message(field: str, length: int, limit: int) -> str:
    """The one wording of a length refusal, shared with the API's request validation."""
    return f"{field}: is {length} characters long; at most {limit} are allowed"


def validate_length(value: str, *, field: str, limit: int) -> str:
    """Refuse (never cut) a text longer than ``limit`` characters."""
    if len(value) > limit:
        raise InvalidInput(
            too_long_message(field, len(value), limit),
            field=field,
            value=value,
            allowed=f"at most {limit} characters",
        )
    return value


def validate_choice(value: str, choices: tuple[str, ...], *, field: str) -> str:
    if value not in choices:
        allowed = ", ".join(choices)
        raise InvalidInput(
            f"{field}: {value!r} is not one of {allowed}", field=field, value=value, allowed=allowed
        )
    return value


def validate_int(value: int, *, field: str, low: int, high: int) -> int:
    if not low <= value <= high:
        raise InvalidInput(
            f"{field}: {value} is out of range {low}-{high}",
            field=field,
            value=value,
            allowed=f"{low}-{high}",
        )
    return value


def validate_port(value: int) -> int:
    return validate_int(value, field="port", low=1, high=65535)


def validate_host(value: str) -> str:
    if not value or len(value) > 255 or any(ch.isspace() for ch in value) or "@" in value:
        raise InvalidInput(
            f"host: {value!r} is not a host name or address",
            field="host",
            value=value,
            allowed="a DNS name or an IP address",
        )
    return value


def validate_user(value: str, *, field: str = "user") -> str:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9._-]{0,31}", value):
        raise InvalidInput(
            f"{field}: {value!r} is not a valid user name",
            field=field,
            value=value,
            allowed="letters, digits, '.', '_', '-' (at most 32, not starting with a digit)",
        )
    return value


def validate_password(value: str) -> str:
    if len(value) < PASSWORD_MIN_CHARS:
        raise InvalidInput(
            f"password: must be at least {PASSWORD_MIN_CHARS} characters long",
            field="password",
            value="**********",
            allowed=f"at least {PASSWORD_MIN_CHARS} characters",
        )
    return value
