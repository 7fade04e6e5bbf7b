"""Real receivers for notifications: an HTTP server and an SMTP server on 127.0.0.1.

``webhook`` records every request and answers with the statuses it is told to (204 by
default); ``smtp`` is an aiosmtpd server recording every message it accepts, with an
optional login. The ``app`` here is the usual one (SQLite and PostgreSQL) with three
attempts, so retry tests stay quick, and a delivery timeout no answering receiver comes
near, however loaded the machine (a receiver is a thread of the test process, which may
not be scheduled for a second or more); the test of the timeout sets a short one itself.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session

from fixtures.app import FakeClock, make_settings
from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.executors.fake import FakeExecutor
from fleetcron.scheduler.service import Scheduler, TickStats
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets

MAX_ATTEMPTS = 3
BACKOFF_S = 30.0
TIMEOUT_S = 30.0


@pytest.fixture
def app(database_url: str, tmp_path: Path, clock: FakeClock) -> Iterator[App]:
    settings = make_settings(
        tmp_path / "data",
        database_url,
        notify_max_attempts=MAX_ATTEMPTS,
        notify_backoff_s=BACKOFF_S,
        notify_timeout_s=TIMEOUT_S,
    )
    the_app = App.open(settings, clock=clock)
    yield the_app
    the_app.close()


def free_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# -- HTTP --------------------------------------------------------------------------------


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class WebhookReceiver:
    """A real HTTP server in a thread that records POSTs."""

    requests: list[Request] = field(default_factory=list)
    statuses: deque[int] = field(default_factory=deque)
    delay_s: float = 0.0
    server: ThreadingHTTPServer | None = None
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/fleetcron?token=abc"

    def answer(self, *statuses: int) -> None:
        self.statuses.extend(statuses)

    def close(self) -> None:
        """Stop listening: from now on connections to the port are refused."""
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


def _handler(receiver: WebhookReceiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            receiver.requests.append(Request(self.path, dict(self.headers.items()), body))
            time.sleep(receiver.delay_s)
            status = receiver.statuses.popleft() if receiver.statuses else 204
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return None

    return Handler


@contextmanager
def receiving() -> Iterator[WebhookReceiver]:
    """A webhook receiver listening on a loopback port of its own until the block ends."""
    receiver = WebhookReceiver()
    receiver.server = server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(receiver))
    receiver.port = int(server.server_address[1])
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
    )
    thread.start()
    try:
        yield receiver
    finally:
        receiver.close()
        thread.join(timeout=5)


@pytest.fixture
def webhook() -> Iterator[WebhookReceiver]:
    with receiving() as receiver:
        yield receiver


@pytest.fixture
def pager() -> Iterator[WebhookReceiver]:
    """A second receiver, for a second channel told of the same incidents."""
    with receiving() as receiver:
        yield receiver


@dataclass
class HeldReceiver:
    """A receiver that takes one request and says nothing until :meth:`release`; then it
    answers ``503 Service Unavailable``. Held, it keeps a sender waiting for as long as the
    sender's read timeout allows: a test that must see the sender still waiting, however
    long the machine takes to get there, gives its sender a long timeout; a test of the
    timeout never releases it."""

    port: int = 0
    got_request: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)
    #: How long it stays silent at most without a release (a wait that never ends is no
    #: test): a sender whose timeout is longer than this gets the answer anyway.
    hold_s: float = 120.0

    def release(self) -> None:
        self.released.set()


_UNAVAILABLE = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


def _hold(receiver: HeldReceiver, listener: socket.socket) -> None:
    connection, _ = listener.accept()
    with connection:
        request = b""
        while b"\r\n\r\n" not in request:
            chunk = connection.recv(65536)
            if not chunk:
                return
            request += chunk
        receiver.got_request.set()
        receiver.released.wait(receiver.hold_s)
        with contextlib.suppress(OSError):  # the sender may have given up and closed
            connection.sendall(_UNAVAILABLE)


@pytest.fixture
def held_receiver() -> Iterator[HeldReceiver]:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        receiver = HeldReceiver(port=int(listener.getsockname()[1]))
        thread = threading.Thread(target=_hold, args=(receiver, listener), daemon=True)
        thread.start()
        try:
            yield receiver
        finally:
            receiver.release()
            if not receiver.got_request.is_set():
                # Nobody came: unblock the accept with a connection of our own.
                socket.create_connection(("127.0.0.1", receiver.port)).close()
            thread.join(timeout=30)


# -- SMTP --------------------------------------------------------------------------------


@dataclass
class Mail:
    sender: str
    recipients: list[str]
    content: bytes


@dataclass
class SmtpReceiver:
    port: int
    mails: list[Mail] = field(default_factory=list)
    logins: list[tuple[str, str]] = field(default_factory=list)

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        assert envelope.mail_from is not None and envelope.content is not None
        content = envelope.content
        self.mails.append(
            Mail(
                envelope.mail_from,
                list(envelope.rcpt_tos),
                content if isinstance(content, bytes) else content.encode(),
            )
        )
        return "250 OK"

    def authenticate(
        self, server: SMTP, session: Session, envelope: Envelope, mechanism: str, data: Any
    ) -> AuthResult:
        assert isinstance(data, LoginPassword)
        login, password = data.login.decode(), data.password.decode()
        self.logins.append((login, password))
        return AuthResult(success=(login, password) == ("alerts", "relay-password-1"))


@pytest.fixture
def smtp() -> Iterator[SmtpReceiver]:
    receiver = SmtpReceiver(port=free_port())
    controller = Controller(
        receiver,
        hostname="127.0.0.1",
        port=receiver.port,
        authenticator=receiver.authenticate,
        auth_require_tls=False,
    )
    controller.start()
    yield receiver
    controller.stop()


# -- jobs --------------------------------------------------------------------------------

FAILING = "echo 'disk full' >&2; echo 'giving up' >&2; exit 3"


@pytest.fixture
def box(app: App, operator: Actor) -> str:
    targets.add_target(app, Actor("admin", "admin"), TargetSpec("box", TargetKind.LOCAL))
    return "box"


def add_job(app: App, actor: Actor, name: str, command: str, schedule: str = "* * * * *") -> None:
    jobs.add_job(app, actor, name, JobSpec(schedule=schedule, command=command), target="box")


@pytest.fixture
async def scheduler(app: App, clock: FakeClock) -> AsyncIterator[Scheduler]:
    the_scheduler = Scheduler(app, clock=clock)
    await the_scheduler.start()
    yield the_scheduler
    await the_scheduler.shutdown()


async def next_minute(scheduler: Scheduler, clock: FakeClock) -> TickStats:
    """Move to the next minute's slot (30 s after it), fire it and wait for the outcome."""
    clock.advance(minutes=1)
    stats = await scheduler.tick()
    await scheduler.idle()
    return stats


@pytest.fixture
def fake(clock: FakeClock) -> FakeExecutor:
    return FakeExecutor(clock=clock)


@pytest.fixture
async def fake_scheduler(
    app: App, clock: FakeClock, fake: FakeExecutor
) -> AsyncIterator[Scheduler]:
    the_scheduler = Scheduler(app, clock=clock, executors={"local": fake})
    await the_scheduler.start()
    yield the_scheduler
    await the_scheduler.shutdown()
