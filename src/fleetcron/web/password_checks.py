"""Every password check the web server makes goes through :func:`checked_password`.

Logging in and proving one's current password (the own-password change, and any future
re-authentication) are the same oracle for whoever guesses: each check passes the one
:class:`~fleetcron.web.ratelimit.LoginLimiter` of the process (the account's failures and
the address's budget, shared by all these routes) and takes one of its hashing slots, so
the argon2 memory stays bounded however many requests arrive at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from fastapi import Request

from fleetcron.app import Actor
from fleetcron.errors import TooManyAttempts
from fleetcron.services.accounts.users import PasswordGuard
from fleetcron.services.audit import AuditNote, record
from fleetcron.web.ratelimit import LoginLimiter, Refusal

T = TypeVar("T")

#: Called with a refusal that is due for the audit log (the 1st, 10th, 100th ...).
AuditRefusal = Callable[[Refusal, str], None]


def client_address(request: Request) -> str:
    """The client's address (a trusted proxy's report, see the middleware)."""
    return request.client.host if request.client else "?"


def _duration(seconds: int) -> str:
    if seconds < 120:
        return f"{seconds} seconds"
    return f"{(seconds + 59) // 60} minutes"


def checked_password(
    request: Request, account: str, check: Callable[[], T], audit_refusal: AuditRefusal
) -> T:
    """Run ``check`` (which verifies a password of ``account`` and raises when it is wrong)
    if the limiter admits it and a hashing slot is free; else raise TooManyAttempts.

    A check that raises stays counted as a failure of the account and the address; one
    that returns gives its place back."""
    app = request.app.state.fleetcron
    limiter: LoginLimiter = request.app.state.login_limiter
    address = client_address(request)
    now = app.now()
    attempt = limiter.reserve(account, address, now)
    if isinstance(attempt, Refusal):
        if attempt.audit_now:
            audit_refusal(attempt, address)
        wait = max(1, int((attempt.retry_at - now).total_seconds() + 0.999))
        raise TooManyAttempts(
            f"Too many failed attempts; try again in {_duration(wait)}.", retry_after_s=wait
        )
    with limiter.hashing() as admitted:
        if not admitted:
            raise TooManyAttempts(
                "Too many password checks at once; try again shortly.", retry_after_s=5
            )
        result = check()
    limiter.succeeded(attempt)
    return result


def own_password_guard(request: Request, actor: Actor) -> PasswordGuard:
    """The guard for a logged-in caller proving their own password: their account's
    failures count with those of the log-in form; refusals are audited under their name
    (the 1st, 10th, 100th ... in a window, as ``user.passwd`` with ``refused``)."""
    app = request.app.state.fleetcron

    def audit_refusal(refusal: Refusal, address: str) -> None:
        detail = {
            "user": actor.name,
            "own": True,
            "address": address,
            "refused": refusal.refused,
            "reason": refusal.reason,
        }
        with app.db.session() as session:
            record(session, app, actor, AuditNote("user.passwd", detail=detail), success=False)

    def guard(check: Callable[[], None]) -> None:
        checked_password(request, actor.name, check, audit_refusal)

    return guard
