"""Every route of the real application against the permission matrix.

The routes are enumerated from ``create_app(...).routes`` at run time, so pages added later
are checked too. A route's action is the one its ``requires(action)`` dependency carries.
Only these may declare none: the log-in and log-out pages, static files, the OpenAPI schema
and docs, the cluster's peer routes (other nodes call them with a signed envelope; their
dependency is marked ``.peer`` and no user's token opens them, whatever its role), the
claim check a running command calls with its run's secret (marked ``.run_secret``), and the
probes and metrics (marked ``.public``), which answer without credentials by design.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import asyncssh
import httpx
import pytest
from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute, RouteContext, iter_route_contexts
from fastapi.testclient import TestClient
from starlette.convertors import IntegerConvertor
from starlette.routing import Mount

from fleetcron.app import App
from fleetcron.core.permissions import MATRIX, allowed
from integration.web.conftest import (
    ACCOUNTS,
    API,
    bearer,
    error_of,
    sqlite_only,
    token_for,
    web_app,
)

# Whether a caller may pass is decided before any query (the token lookup aside), so once on
# SQLite is enough; the API tests run the same routes on both databases.
pytestmark = sqlite_only

UNGUARDED_PAGES = {
    ("GET", "/login"),
    ("POST", "/login"),
    ("POST", "/logout"),
    # single sign-on: the start of a log-in and the provider's callback
    ("GET", "/login/oidc"),
    ("GET", "/login/oidc/callback"),
}
MISSING = "nothing-here"  # a name no object has: allowed callers get a 404, nothing is destroyed
MISSING_ID = 987654
#: A key for an unverified ssh target (a local one needs the admin role, not the route's).
CLIENT_KEY = asyncssh.generate_private_key("ssh-ed25519").export_private_key().decode()

#: Bodies that would succeed for an allowed caller, so that a service-level permission
#: check disagreeing with the route's declared action shows up as a 403 as well.
BODIES: dict[tuple[str, str], dict[str, Any]] = {
    ("POST", f"{API}/targets"): {
        "name": "perm-box",
        "host": "192.0.2.7",
        "user": "root",
        "private_key": CLIENT_KEY,
        "verify": False,
    },
    ("POST", f"{API}/targets/{{name}}/pair"): {},
    ("POST", f"{API}/targets/{{name}}/labels"): {"labels": {"env": "prod"}},
    ("POST", f"{API}/jobs"): {
        "name": "perm-job",
        "schedule": "0 3 * * *",
        "command": "true",
        "bulk": True,
    },
    ("PATCH", f"{API}/jobs/{{name}}"): {"notes": "changed"},
    ("POST", f"{API}/jobs/{{name}}/enable"): {},
    ("POST", f"{API}/jobs/{{name}}/disable"): {},
    ("POST", f"{API}/jobs/{{name}}/run"): {},
    ("POST", f"{API}/users"): {"name": "perm-user", "password": "perm-password"},
    ("PATCH", f"{API}/users/{{name}}"): {"role": "viewer"},
    ("POST", f"{API}/tokens"): {"name": "perm-token"},
    ("POST", f"{API}/silences"): {"reason": "perm", "all": True, "duration_s": 600},
}


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str  # the route's template, e.g. /api/v1/jobs/{name}
    url: str  # with plausible values for its parameters
    action: str | None
    peer: bool  # called by other nodes with a signed envelope, not by users
    run: bool  # called by a running command with its run's own secret, not by users
    public: bool  # probes and metrics: answer without credentials by design

    @property
    def is_api(self) -> bool:
        return self.path.startswith("/api/")

    def __str__(self) -> str:
        return f"{self.method} {self.path}"


def _actions(dependant: Dependant) -> Iterator[str]:
    for dependency in dependant.dependencies:
        action = getattr(dependency.call, "action", None)
        if action is not None:
            yield action
        yield from _actions(dependency)


def _marked(dependant: Dependant, marker: str) -> bool:
    """Whether a dependency carries ``marker``: ``.peer`` (web.api.cluster_peer's
    ``signed_peer``), ``.run_secret`` (web.api.claims's ``run_secret``) or ``.public``
    (web.api.health's ``public``)."""
    return any(
        getattr(dependency.call, marker, False) or _marked(dependency, marker)
        for dependency in dependant.dependencies
    )


def _url(route: RouteContext, dependant: Dependant | None) -> str:
    """The route's path with a plausible value for each parameter."""
    params = dependant.path_params if dependant else []
    int_params = {p.name for p in params if p.field_info.annotation is int}
    values = {
        name: str(MISSING_ID)
        if name in int_params or isinstance(convertor, IntegerConvertor)
        else MISSING
        for name, convertor in route.param_convertors.items()
    }
    # path_format drops the convertor names: "/runs/{run_id:int}" -> "/runs/{run_id}"
    return str(route.path_format).format(**values)


def _is_infrastructure(web: FastAPI, route: RouteContext) -> bool:
    """Static files and the OpenAPI schema and docs: public by design."""
    if isinstance(route.original_route, Mount):
        return True
    served = {web.openapi_url, web.docs_url, web.redoc_url, web.swagger_ui_oauth2_redirect_url}
    return not isinstance(route.original_route, APIRoute) and route.path in served


def endpoints(web: FastAPI) -> list[Endpoint]:
    """Every (method, route) of the application except infrastructure and log-in/out.

    Included routers are resolved to their effective routes (prefix and router-level
    dependencies applied), as the application itself serves them."""
    found = []
    for route in iter_route_contexts(web.routes):
        if _is_infrastructure(web, route):
            continue
        dependant: Dependant | None = getattr(route, "dependant", None)
        actions = sorted(set(_actions(dependant))) if dependant else []
        for method in sorted((route.methods or set()) - {"HEAD", "OPTIONS"}):
            if (method, route.path) in UNGUARDED_PAGES:
                continue
            assert len(actions) <= 1, f"{method} {route.path} declares several actions {actions}"
            action = actions[0] if actions else None
            peer = dependant is not None and _marked(dependant, "peer")
            public = dependant is not None and _marked(dependant, "public")
            run = dependant is not None and _marked(dependant, "run_secret")
            url = _url(route, dependant)
            found.append(Endpoint(method, str(route.path), url, action, peer, run, public))
    return found


def call(client: TestClient, endpoint: Endpoint, headers: dict[str, str]) -> httpx.Response:
    if endpoint.method in ("GET", "DELETE"):
        response: httpx.Response = client.request(endpoint.method, endpoint.url, headers=headers)
        return response
    if endpoint.is_api:
        body = BODIES.get((endpoint.method, endpoint.path), {})
        response = client.request(endpoint.method, endpoint.url, json=body, headers=headers)
        return response
    response = client.request(endpoint.method, endpoint.url, data={}, headers=headers)
    return response


@pytest.fixture
def web(app: App) -> FastAPI:
    return web_app(app)


def test_the_enumeration_finds_the_api_and_the_pages(web: FastAPI) -> None:
    found = {str(e) for e in endpoints(web)}

    assert {
        "GET /",
        f"GET {API}/jobs",
        f"DELETE {API}/tokens/{{token_id}}",
        f"PATCH {API}/users/{{name}}",
        f"POST {API}/jobs/{{name}}/run",
    } <= found
    assert not any("/login" in e or "/static" in e or "openapi" in e for e in found)


def test_every_route_declares_an_action_of_the_permission_matrix(web: FastAPI) -> None:
    undeclared = [
        str(e) for e in endpoints(web) if e.action is None and not (e.peer or e.run or e.public)
    ]
    unknown = [f"{e}: {e.action}" for e in endpoints(web) if e.action and e.action not in MATRIX]

    assert undeclared == [], "routes without requires(action)"
    assert unknown == []


def test_every_route_but_the_public_ones_refuses_an_anonymous_request(web: FastAPI) -> None:
    wrong = []
    with TestClient(web, raise_server_exceptions=False, follow_redirects=False) as client:
        for endpoint in endpoints(web):
            response = call(client, endpoint, {})
            if endpoint.public:
                if response.status_code in (401, 403, 303):
                    wrong.append(f"{endpoint} (public): {response.status_code}")
            elif endpoint.peer or endpoint.run:
                # 404 where the node is not in cluster mode: the route then does not exist
                if response.status_code not in (401, 404):
                    wrong.append(f"{endpoint} (peer): {response.status_code}")
            elif endpoint.is_api:
                if response.status_code != 401 or error_of(response)["code"] != "unauthenticated":
                    wrong.append(f"{endpoint}: {response.status_code}")
            elif response.status_code != 303 or not response.headers.get("location", "").startswith(
                "/login"
            ):
                wrong.append(f"{endpoint}: {response.status_code} {response.headers}")

    assert wrong == []


def test_every_route_refuses_exactly_the_roles_the_matrix_does_not_allow(
    web: FastAPI, app: App
) -> None:
    headers = {role: bearer(token_for(app, role)) for role in ACCOUNTS}
    wrong = []
    with TestClient(web, raise_server_exceptions=False, follow_redirects=False) as client:
        for endpoint in endpoints(web):
            for role in ("viewer", "operator", "admin"):
                status = call(client, endpoint, headers[role]).status_code
                if endpoint.public:
                    if status in (401, 403):
                        wrong.append(f"{endpoint} (public) as {role}: {status}")
                    continue
                if endpoint.peer or endpoint.run:
                    # a user's token is no peer signature nor a run's secret, whatever the role
                    if status not in (401, 404):
                        wrong.append(f"{endpoint} (peer) as {role}: {status}")
                    continue
                assert endpoint.action is not None, f"{endpoint} declares no action"
                if allowed(role, endpoint.action):
                    if status in (401, 403):
                        wrong.append(f"{endpoint} ({endpoint.action}) as {role}: {status}")
                elif status != 403:
                    wrong.append(f"{endpoint} ({endpoint.action}) as {role}: {status}, not 403")

    assert wrong == []
