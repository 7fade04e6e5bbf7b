"""Schemathesis against the real application's OpenAPI schema: no generated request, valid or
not, gets a server error.

The application runs on a scratch SQLite database (a copy of the seeded template) with a
local target, a bulk and an individual job and a few runs, and every request carries an
operator's API token. Only ``not_a_server_error`` is checked: the other checks flag design
choices (undocumented 401/403/404/409 answers, business rules the schema does not express).

Generation is derandomized and bounded (positive and negative cases per operation, no
shrinking) so the test is repeatable and stays within seconds on a shared machine. An
operation with nothing a request could get wrong (see :func:`nothing_to_get_wrong`) runs in
positive mode only: its negative mode can only find that out, after hundreds of draws.
"""

from __future__ import annotations

import contextlib
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import Failure, FailureGroup
from schemathesis.core.result import Err
from schemathesis.python import asgi
from schemathesis.python.asgi import ASGIClient
from schemathesis.schemas import BaseSchema
from starlette.types import ASGIApp, Receive, Scope, Send

from fixtures.app import FakeClock, make_settings
from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.accounts import users
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.runs import reads as runs
from fleetcron.services.targets import edit as targets
from integration.web.conftest import (
    API,
    CHEAP_HASHER,
    bearer,
    cheap_hashes,
    token_for,
    web_app,
)

if TYPE_CHECKING:
    from schemathesis.specs.openapi.schemas import OpenApiCase, OpenApiOperation

EXAMPLES = 12  # per operation and mode: about 700 requests in all
OPERATOR = Actor("olivia", "operator")


@pytest.fixture
def scratch(
    sqlite_template: Path, tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> Iterator[App]:
    """A scratch SQLite database with the seeded users and a little of everything; their
    passwords hashed with the cheapest argon2id cost, as in the other web tests (the
    password change checks the current password at each request)."""
    database = tmp_path / "fleetcron.db"
    shutil.copyfile(sqlite_template, database)
    app = App.open(make_settings(tmp_path / "data", f"sqlite:///{database}"), clock=clock)
    monkeypatch.setattr(users, "_hasher", CHEAP_HASHER)
    cheap_hashes(app)
    targets.add_target(app, Actor("admin", "admin"), TargetSpec("box", TargetKind.LOCAL))
    jobs.add_job(app, OPERATOR, "nightly", JobSpec("0 3 * * *", "true"), bulk=True)
    jobs.add_job(app, OPERATOR, "hello", JobSpec("*/5 * * * *", "echo hi"), target="box")
    for _ in range(3):
        runs.request_run(app, OPERATOR, "hello")
        clock.advance(minutes=1)
    yield app
    app.close()


class AsServed:
    """The application as a server runs it: an exception that escapes a request has already
    been answered with a 500 by Starlette's error middleware; the server logs it and goes
    on. Kept here, so the report can show it, rather than raised into the test client."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.crashes: list[str] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.app(scope, receive, send)
        except Exception as exc:
            self.crashes.append(f"{scope.get('method')} {scope.get('path')}: {exc!r}")


@pytest.fixture
def served(scratch: App) -> AsServed:
    return AsServed(web_app(scratch))


@pytest.fixture
def api_schema(served: AsServed) -> BaseSchema:
    return schemathesis.openapi.from_asgi(f"{API}/openapi.json", served)


@pytest.fixture
def session(served: AsServed) -> Iterator[ASGIClient]:
    """One in-process client for all requests (schemathesis would start one per request)."""
    # schemathesis types the ASGI messages as dict, Starlette as MutableMapping: the same
    # protocol, which the two libraries spell apart.
    with asgi.get_client(served) as client:  # type: ignore[arg-type]
        yield client


def takes_any_string(schema: object) -> bool:
    """Whether a parameter's schema accepts every string: the form a path, query or header
    value always has, so negative mode has no value that breaks it."""
    if not isinstance(schema, dict):
        return False
    if set(schema) - {"title", "description"} == {"type"}:
        return bool(schema["type"] == "string")
    if set(schema) - {"title", "description"} == {"anyOf"}:
        return any(takes_any_string(branch) for branch in schema["anyOf"])
    return False


def nothing_to_get_wrong(operation: OpenApiOperation) -> bool:
    """No body, and each parameter a string of any value that may also be left out (or sits
    in the path, which cannot be): negative mode has no request to make (hypothesis gives up
    as ``Unsatisfiable`` after some 460 draws, half a second of CPU per operation). Such an
    operation still gets its positive requests."""
    if len(operation.body):
        return False
    return all(
        takes_any_string(parameter.definition.get("schema"))
        and (parameter.location == "path" or not parameter.definition.get("required", False))
        for parameter in operation.iter_parameters()
    )


def fuzz(
    operation: OpenApiOperation,
    mode: GenerationMode,
    session: ASGIClient,
    token: str,
) -> Counter[int]:
    """Send ``EXAMPLES`` generated requests; raises the first server error found."""
    statuses: Counter[int] = Counter()

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.filter_too_much,
            HealthCheck.data_too_large,
        ],
    )
    def send(case: OpenApiCase) -> None:
        response = case.call(session=session, headers=bearer(token))
        statuses[response.status_code] += 1
        case.validate_response(response, checks=[not_a_server_error])

    # Unsatisfiable: negative mode of an operation with nothing to get wrong (no parameters)
    with contextlib.suppress(Unsatisfiable):
        send()
    return statuses


#: The operations are fuzzed in this many parts, each a test of its own (operation N in part
#: N modulo PARTS), so that parallel runs (`make quick`, `make test`) spread the work.
PARTS = 3


def operations(api_schema: BaseSchema) -> list[OpenApiOperation]:
    found = []
    for result in api_schema.get_all_operations():
        if isinstance(result, Err):
            raise result.err()
        found.append(result.ok())
    return found


def test_a_bounded_or_typed_parameter_gives_negative_mode_its_requests(
    api_schema: BaseSchema,
) -> None:
    """A path parameter with a type or bounds, a query or a body: not positive-only."""
    positive_only = {op.label for op in operations(api_schema) if nothing_to_get_wrong(op)}
    assert f"GET {API}/runs/{{run_id}}" not in positive_only
    assert f"GET {API}/calendars/{{name}}" not in positive_only
    assert f"GET {API}/jobs" not in positive_only
    assert f"GET {API}/calendars" in positive_only  # no parameter at all


@pytest.mark.parametrize("part", range(PARTS))
def test_no_generated_request_gets_a_server_error(
    api_schema: BaseSchema, session: ASGIClient, served: AsServed, scratch: App, part: int
) -> None:
    server_errors: dict[str, str] = {}
    unauthenticated: list[str] = []
    mine = operations(api_schema)[part::PARTS]
    assert mine, "every part has operations to fuzz"
    for operation in mine:
        # A fresh token per operation: DELETE /tokens/{id} may revoke the one in use.
        token = token_for(scratch, "operator", "schemathesis")
        modes = [GenerationMode.POSITIVE]
        if not nothing_to_get_wrong(operation):
            modes.append(GenerationMode.NEGATIVE)
        for mode in modes:
            try:
                statuses = fuzz(operation, mode, session, token)
            except (Failure, FailureGroup) as failure:
                server_errors[f"{operation.label} ({mode.value})"] = str(failure)
                continue
            if statuses[401] and operation.label != f"DELETE {API}/tokens/{{token_id}}":
                unauthenticated.append(operation.label)

    assert server_errors == {}, "\n".join(served.crashes)
    # Otherwise the run would only have exercised the authentication dependency.
    assert unauthenticated == [], "requests that should have been authenticated got 401"
