"""Turning fleetcron errors into HTTP answers: JSON for the API, a page for browsers."""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from sqlalchemy.exc import StatementError
from starlette.exceptions import HTTPException as StarletteHTTPException

from fleetcron.core.validation import too_long_message
from fleetcron.errors import (
    AuthenticationFailed,
    Conflict,
    CoordinationError,
    ExecutionError,
    FleetcronError,
    HostKeyMismatch,
    InvalidInput,
    NotFound,
    PermissionDenied,
    StoreError,
    TooManyAttempts,
)

STATUS = (
    (AuthenticationFailed, 401, "unauthenticated"),
    (TooManyAttempts, 429, "too_many_attempts"),
    (PermissionDenied, 403, "forbidden"),
    (NotFound, 404, "not_found"),
    (Conflict, 409, "conflict"),
    (InvalidInput, 422, "invalid"),
    (CoordinationError, 503, "not_owner"),
    # The pinned key conflicts with what the target presents: the operator must decide.
    (HostKeyMismatch, 409, "host_key_mismatch"),
    (ExecutionError, 502, "target_unreachable"),
    (StoreError, 503, "unavailable"),
)


def status_for(error: FleetcronError) -> tuple[int, str]:
    for kind, status, code in STATUS:
        if isinstance(error, kind):
            return status, code
    return 500, "error"


def error_body(code: str, message: str, field: str | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "field": field}}


def wants_json(request: Request) -> bool:
    return request.url.path.startswith("/api/") or "application/json" in request.headers.get(
        "accept", ""
    )


async def fleetcron_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, FleetcronError)
    status, code = status_for(exc)
    field = getattr(exc, "field", None)
    if not wants_json(request):
        from fleetcron.web.pages.render import error_page

        return error_page(request, status, exc.message)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    if isinstance(exc, TooManyAttempts):
        headers = {"Retry-After": str(exc.retry_after_s)}
    return JSONResponse(error_body(code, exc.message, field), status_code=status, headers=headers)


async def validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
    loc = [str(part) for part in first.get("loc", ()) if part not in ("body", "query", "path")]
    field = ".".join(loc) or None
    message = f"{field}: {first.get('msg')}" if field else str(first.get("msg"))
    ctx = first.get("ctx")
    limit = ctx.get("max_length") if isinstance(ctx, dict) else None
    sent = first.get("input")
    if first.get("type") == "string_too_long" and field and isinstance(sent, str) and limit:
        # The services' own wording, with the length sent (core.validation declares the limits).
        message = too_long_message(field, len(sent), int(limit))
    elif first.get("type") == "int_type" and field:
        # A strict integer (the job options): true, "10" or 10.0 is not taken as a number.
        message = f"{field}: must be a whole number (got {json.dumps(sent, default=str)})"
    elif first.get("type") == "json_invalid":
        # pydantic's location of a JSON error is the character position, not a field.
        where = f" (at character {loc[0]})" if loc and loc[0].isdigit() else ""
        field, message = None, f"the request body is not valid JSON{where}"
    if not wants_json(request):
        from fleetcron.web.pages.render import error_page

        return error_page(request, 422, message)
    return JSONResponse(error_body("invalid", message, field), status_code=422)


async def http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    codes = {
        401: "unauthenticated",
        403: "forbidden",
        404: "not_found",
        405: "method_not_allowed",
        413: "too_large",
        429: "rate_limited",
    }
    code = codes.get(exc.status_code, "error")
    if not wants_json(request):
        from fleetcron.web.pages.render import error_page

        return error_page(request, exc.status_code, str(exc.detail))
    return JSONResponse(
        error_body(code, str(exc.detail)), status_code=exc.status_code, headers=exc.headers
    )


async def out_of_range(request: Request, exc: Exception) -> Response:
    """A number or a date too large for the database or for ``datetime`` (an id beyond
    64 bits, ``since=9999-12-31T23:59-11:00``): the caller's input, so a 422, never a 500.
    Routes bound their parameters where they can; this answers for the rest."""
    if isinstance(exc, StatementError) and not isinstance(exc.orig, OverflowError):
        raise exc  # a real server error: the error middleware answers 500 and logs it
    message = "a number or a date in the request is out of range"
    if not wants_json(request):
        from fleetcron.web.pages.render import error_page

        return error_page(request, 422, message)
    return JSONResponse(error_body("invalid", message), status_code=422)
