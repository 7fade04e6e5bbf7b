"""What the page handlers share: reading posted forms, flash messages, redirects.

Handlers that change state are plain ``def`` functions (FastAPI runs them in its thread
pool, where the synchronous services belong); the posted form reaches them through the
:data:`Posted` dependency. After a successful POST they redirect (303) and carry a one-line
message to the next page in a short-lived cookie, so no message text ever travels in a URL
that someone else could craft.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from starlette.datastructures import FormData

from fleetcron.errors import Conflict, FleetcronError, InvalidInput
from fleetcron.web.pages.render import render, viewer_zone

FLASH_COOKIE = "fleetcron_flash"
_WHOLE_NUMBER = re.compile(r"[+-]?[0-9]+")
#: More digits than any field's range needs (int() refuses beyond 4300 anyway).
_MAX_NUMBER_CHARS = 30
FLASH_MAX_CHARS = 600
#: A bulk job's target picker posts one field per target; Starlette's default of 1000
#: fields would cap a fleet at a few hundred targets.
MAX_FORM_FIELDS = 50_000


async def posted_form(request: Request) -> FormData:
    """The posted form, parsed once. Declared before the ``requires`` dependency in a
    handler's signature so that this parse (with the larger field limit) is the one cached
    for the CSRF check too."""
    return await request.form(max_fields=MAX_FORM_FIELDS)


Posted = Annotated[FormData, Depends(posted_form)]


def text(form: FormData, name: str, default: str = "") -> str:
    """A text field as posted (never stripped: commands are stored verbatim)."""
    value = form.get(name)
    return value if isinstance(value, str) else default


def texts(form: FormData, name: str) -> list[str]:
    return [value for value in form.getlist(name) if isinstance(value, str)]


def checked(form: FormData, name: str) -> bool:
    return text(form, name) != ""


def whole_number(value: str, *, field: str, default: int | None = None) -> int | None:
    """A whole number typed into a field; empty means ``default``."""
    value = value.strip()
    if not value:
        return default
    # ASCII digits only: int() would also read "1_000" and other scripts' digits ("٣"),
    # turning what was typed into a number the user never saw.
    if not _WHOLE_NUMBER.fullmatch(value):
        raise InvalidInput(
            f"{field}: {value!r} is not a whole number",
            field=field,
            value=value,
            allowed="a whole number",
        )
    if len(value.lstrip("+-0")) > _MAX_NUMBER_CHARS:
        raise InvalidInput(
            f"{field}: {value[:40]!r}… is far too large",
            field=field,
            value=value[:40],
            allowed="a whole number in the field's range",
        )
    return int(value)


def split_items(value: str) -> list[str]:
    """``"env=prod, role=db"`` or one item per line -> ``["env=prod", "role=db"]``."""
    return [item.strip() for item in value.replace("\n", ",").split(",") if item.strip()]


def local_time(request: Request, value: str, *, field: str) -> datetime | None:
    """A ``datetime-local`` input (wall time in the viewer's zone) as an aware datetime."""
    value = value.strip()
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidInput(
            f"{field}: {value!r} is not a date and time",
            field=field,
            value=value,
            allowed="YYYY-MM-DDTHH:MM",
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=viewer_zone(request))
    return parsed


@dataclass(frozen=True)
class FieldErrors:
    """Errors to show next to the fields of a re-rendered form, and one line above it."""

    by_field: dict[str, str]
    summary: str

    def __getitem__(self, field: str) -> str:
        return self.by_field.get(field, "")

    def __bool__(self) -> bool:
        return bool(self.summary)

    @classmethod
    def at(cls, field: str, message: str) -> FieldErrors:
        return cls({field: message}, "The form was not saved; see the marked field.")


NO_ERRORS = FieldErrors({}, "")


def field_errors(error: FleetcronError, names: dict[str, str] | None = None) -> FieldErrors:
    """Place a service error next to its form field; ``names`` maps the service's field
    names to the form's where they differ."""
    field = getattr(error, "field", None) if isinstance(error, InvalidInput | Conflict) else None
    if field is not None:
        return FieldErrors.at((names or {}).get(field, field), error.message)
    return FieldErrors({}, error.message)


#: Signs flash cookies, so a message shown on a page is one this process wrote (a sibling
#: subdomain can set cookies for ours). Per process: a message lives 60 s, and one lost to a
#: restart is only a message.
_FLASH_KEY = secrets.token_bytes(32)
FLASH_MAX_COOKIE = 4096


def _flash_mac(payload: str) -> str:
    return hmac.new(_FLASH_KEY, payload.encode(), hashlib.sha256).hexdigest()[:32]


def _encode_flash(kind: str, message: str) -> str:
    raw = json.dumps([kind, message[:FLASH_MAX_CHARS]]).encode()
    payload = base64.urlsafe_b64encode(raw).decode()
    return f"{payload}.{_flash_mac(payload)}"


def _decode_flash(value: str | None) -> dict[str, str] | None:
    if not value or len(value) > FLASH_MAX_COOKIE:
        return None
    payload, _, mac = value.rpartition(".")
    if not hmac.compare_digest(mac, _flash_mac(payload)):
        return None
    try:
        kind, message = json.loads(base64.urlsafe_b64decode(payload.encode()))
    except (ValueError, TypeError, RecursionError):
        return None
    if kind not in ("ok", "error") or not isinstance(message, str):
        return None
    return {"kind": kind, "text": message}


def redirect(url: str, message: str | None = None, *, error: bool = False) -> RedirectResponse:
    """303 to ``url``; ``message`` is shown once on the page that follows."""
    response = RedirectResponse(url, status_code=303)
    if message:
        response.set_cookie(
            FLASH_COOKIE,
            _encode_flash("error" if error else "ok", message),
            max_age=60,
            httponly=True,
            samesite="strict",
        )
    return response


def page(request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    """Render a page with the pending flash message, if any (and forget it)."""
    flash = _decode_flash(request.cookies.get(FLASH_COOKIE))
    response = render(request, template, status_code, flash=flash, **context)
    if FLASH_COOKIE in request.cookies:
        response.delete_cookie(FLASH_COOKIE, httponly=True, samesite="strict")
    return response


def first_line(value: str) -> str:
    line = value.strip().splitlines()[0] if value.strip() else ""
    return line if len(line) == len(value.strip()) else line + " …"


def plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"
