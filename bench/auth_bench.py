"""What authenticating a request costs, on SQLite, in this process.

* a bearer token (:func:`fleetcron.services.accounts.users.actor_for_token`): the token
  with its owner, the owner's roles in projects, its last use recorded (the clock moves
  one second per call, so a minute's worth of calls records it once);
* a browser session (:func:`fleetcron.services.accounts.sessions.resolve`);
* an API read through the web application over ASGI in process (``GET /api/v1/targets``
  with a token, FastAPI's routing and dependencies, the in-process client's share
  included) and ``GET /healthz`` (no credentials, nearly nothing but the stack).

Reported per call: CPU time (user + sys) of this process, the median of 5 rounds, on this
machine (a shared machine's wall time says little). Before/after comparisons run the same
file against an older tree: ``PYTHONPATH=<old tree>/src .venv/bin/python bench/auth_bench.py``.

Run by hand: ``.venv/bin/python bench/auth_bench.py [N]``.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable

from _common import loadavg, median, own_cpu, table, work_dir

ROUNDS = 5


def per_call(action: Callable[[], object], count: int) -> float:
    """Milliseconds of CPU per call of ``action``, the median of :data:`ROUNDS` rounds."""
    for _ in range(20):
        action()
    rounds = []
    for _ in range(ROUNDS):
        start = own_cpu()
        for _ in range(count):
            action()
        rounds.append((own_cpu() - start) / count * 1000)
    return median(rounds)


def main(count: int) -> None:
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

    from fixtures.app import CLOCK_START, FakeClock, make_settings, seed
    from fleetcron.app import Actor, App
    from fleetcron.services.accounts import sessions
    from fleetcron.services.accounts.users import actor_for_token, create_token
    from fleetcron.web.app import create_app

    where = work_dir("auth-bench-")
    url = f"sqlite:///{where / 'fleetcron.db'}"
    seed(url, where)
    clock = FakeClock(CLOCK_START)
    app = App.open(make_settings(where / "data", url), clock=clock)
    token, _ = create_token(app, Actor("olivia", "operator"), "olivia", "bench")
    cookie, _ = sessions.open_session(app, Actor("olivia", "operator"), {"address": "bench"})

    def by_token() -> object:
        clock.advance(seconds=1)
        return actor_for_token(app, token)

    def by_cookie() -> object:
        logged_in = sessions.resolve(app, cookie)
        assert logged_in is not None, "the session expired"
        return logged_in

    headers = {"Authorization": f"Bearer {token}"}
    requests = count // 4
    with TestClient(create_app(app)) as client:

        def api_read() -> object:
            return client.get("/api/v1/targets", headers=headers)

        def probe() -> object:
            return client.get("/healthz")

        rows = [
            ("browser session", per_call(by_cookie, count)),
            ("bearer token", per_call(by_token, count)),
            ("GET /api/v1/targets", per_call(api_read, requests)),
            ("GET /healthz", per_call(probe, requests)),
        ]
    app.close()
    print(f"load average {loadavg()}; {count} calls per round ({requests} requests)")
    print(table(["per call", "CPU ms"], [(name, f"{ms:.3f}") for name, ms in rows]))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
