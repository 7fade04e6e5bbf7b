"""The web tests' applications share one route table (``web_app`` in conftest.py) and
nothing else: each has its own state, middleware and settings, and the shared table holds
every route a freshly built application declares."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.routing import iter_route_contexts
from fastapi.testclient import TestClient

from fleetcron.app import App
from fleetcron.web.app import create_app
from integration.web.conftest import API, bearer, sqlite_only, token_for, web_app
from integration.web.live import with_settings

JOB = {"name": "shared", "schedule": "0 3 * * *", "command": "true", "target": "nowhere"}


def routes_of(web: FastAPI) -> set[tuple[str, frozenset[str]]]:
    return {
        (str(getattr(route, "path", "")), frozenset(getattr(route, "methods", None) or ()))
        for route in iter_route_contexts(web.routes)
    }


@sqlite_only
def test_each_application_keeps_its_own_state_and_settings_over_the_shared_routes(
    app: App,
) -> None:
    small = with_settings(app, max_body_bytes=2048)
    first, second = web_app(app), web_app(small)
    assert first.router is second.router
    assert first.state.fleetcron is app and second.state.fleetcron is small
    assert first.state.login_limiter is not second.state.login_limiter
    assert first.state.refusals is not second.state.refusals
    assert first.state.metrics is not second.state.metrics

    body = {**JOB, "notes": "x" * 3000}
    headers = bearer(token_for(app, "operator"))
    answers = []
    for web in (second, first):
        with TestClient(web, raise_server_exceptions=False, follow_redirects=False) as client:
            answers.append(client.post(f"{API}/jobs", json=body, headers=headers).status_code)
    # The limit is the second application's own: the first one's route spoke (no such target).
    assert answers[0] == 413
    assert answers[1] not in {413, 500}


@sqlite_only
def test_the_shared_routes_are_those_a_fresh_application_declares(app: App) -> None:
    fresh = create_app(app)
    shared = web_app(app)
    assert fresh.router is not shared.router
    assert routes_of(shared) == routes_of(fresh)
    # The comparison sees a difference when there is one.
    assert routes_of(shared) != routes_of(fresh) - {next(iter(routes_of(fresh)))}
