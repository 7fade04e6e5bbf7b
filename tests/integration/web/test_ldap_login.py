"""The log-in form against a real LDAP directory (Debian's slapd, ``fixtures.slapd``), over
StartTLS and LDAPS: groups mapped to roles, accounts made on the first log-in, refused
when the directory disables or removes the user, a hung directory a clear message; local
accounts (the break-glass admin) log in with their own password whatever the directory
does."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from fixtures.app import make_settings
from fixtures.slapd import PEOPLE, Slapd, person_dn, start_slapd, stop_slapd
from fleetcron.app import Actor, App
from fleetcron.services.audit import AuditFilter, list_event_views
from fleetcron.store.schema import User
from integration.web.conftest import log_in as password_log_in
from integration.web.conftest import new_client, sqlite_only

pytestmark = sqlite_only
ADMIN = Actor("admin", "admin")


@pytest.fixture(scope="module")
def slapd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Slapd]:
    server = start_slapd(tmp_path_factory.mktemp("slapd"))
    yield server
    stop_slapd(server)


def open_app(database_url: str, directory: Path, slapd: Slapd, url: str) -> App:
    return App.open(make_settings(directory / "data", database_url, **slapd.settings(url)))


@pytest.fixture
def app(database_url: str, tmp_path: Path, slapd: Slapd) -> Iterator[App]:
    the_app = open_app(database_url, tmp_path, slapd, slapd.starttls_url)
    yield the_app
    the_app.close()


def log_in(client: TestClient, login: str, password: str | None = None) -> httpx.Response:
    password = PEOPLE[login][0] if password is None else password
    answer: httpx.Response = client.post("/login", data={"username": login, "password": password})
    return answer


def describe(login: str, description: str) -> str:
    """The LDIF that sets ``login``'s description (``disabled``: left out by the filter)."""
    return (
        f"dn: {person_dn(login)}\nchangetype: modify\nreplace: description\n"
        f"description: {description}\n"
    )


def logged_in(client: TestClient) -> bool:
    status: int = client.get("/", follow_redirects=False).status_code
    return status == 200


def test_an_operator_logs_in_over_starttls_and_gets_an_account(
    app: App, client: TestClient, slapd: Slapd
) -> None:
    assert log_in(client, "lena").status_code == 303
    assert logged_in(client)

    with app.db.read() as session:
        lena = session.scalars(select(User).where(User.name == "lena")).one()
        assert (lena.role, lena.identity_provider, lena.subject) == (
            "operator",
            f"ldap:{slapd.starttls_url}",
            person_dn("lena"),
        )
    events, _ = list_event_views(app, ADMIN, AuditFilter(actor="lena", action="login"))
    assert events[0].detail["provider"] == "Test LDAP"


def test_an_admin_logs_in_over_ldaps_by_a_group_mapped_by_its_dn(
    database_url: str, tmp_path: Path, slapd: Slapd
) -> None:
    app = open_app(database_url, tmp_path, slapd, slapd.ldaps_url)
    try:
        with new_client(app) as client:
            assert log_in(client, "lars").status_code == 303
        with app.db.read() as session:
            assert session.scalars(select(User.role).where(User.name == "lars")).one() == "admin"
    finally:
        app.close()


@pytest.mark.parametrize(
    ("login", "password"),
    [
        ("lena", "not-her-password"),
        ("lena", ""),
        ("nobody", "whatever-1"),
        ("*", "lena-password-1"),
    ],
)
def test_a_wrong_password_or_unknown_user_is_refused_alike(
    app: App, client: TestClient, login: str, password: str
) -> None:
    answer = client.post("/login", data={"username": login, "password": password})

    assert answer.status_code in (401, 422)
    if answer.status_code == 401:
        assert "Unknown user or wrong password" in answer.text
    assert not logged_in(client)
    with app.db.read() as session:
        assert session.scalars(select(User).where(User.name == login)).all() == []


def test_a_user_in_no_mapped_group_is_refused(
    app: App, client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    answer = log_in(client, "lisa")

    assert answer.status_code == 403
    assert "no role for your groups" in answer.text
    assert not logged_in(client)
    assert "sso.no_role" in [getattr(r, "action", None) for r in caplog.records]


def test_a_disabled_user_is_refused(app: App, client: TestClient) -> None:
    answer = log_in(client, "luke")

    assert answer.status_code == 401
    assert not logged_in(client)


def test_a_user_the_directory_disables_is_refused_and_their_session_ends(
    app: App, client: TestClient, slapd: Slapd
) -> None:
    assert log_in(client, "lena").status_code == 303
    assert logged_in(client)  # negative control: the session works
    slapd.modify(describe("lena", "disabled"))
    try:
        with new_client(app) as again:
            assert log_in(again, "lena").status_code == 401
        assert not logged_in(client)
    finally:
        slapd.modify(describe("lena", "staff"))


def test_a_directory_that_does_not_answer_is_a_message_and_local_accounts_still_log_in(
    app: App, client: TestClient, slapd: Slapd, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    with slapd.frozen():
        answer = log_in(client, "lena")
        assert answer.status_code == 503
        assert "did not answer" in answer.text
        with new_client(app) as break_glass:
            password_log_in(break_glass, "admin")
            assert logged_in(break_glass)
    assert "sso.ldap_unreachable" in [getattr(r, "action", None) for r in caplog.records]
    assert log_in(client, "lena").status_code == 303  # negative control: answering again


@pytest.mark.parametrize("tls", ["starttls", "ldaps"])
def test_a_directory_whose_certificate_is_not_trusted_is_refused(
    database_url: str, tmp_path: Path, slapd: Slapd, caplog: pytest.LogCaptureFixture, tls: str
) -> None:
    """Both ways TLS is verified (ldap:// is always upgraded with StartTLS): with the
    system's CAs, which do not know the test's certificate, nothing logs in."""
    caplog.set_level(logging.WARNING)
    url = slapd.ldaps_url if tls == "ldaps" else slapd.starttls_url
    settings = slapd.settings(url, ldap_ca_file=None)
    app = App.open(make_settings(tmp_path / "data", database_url, **settings))
    try:
        with new_client(app) as client:
            answer = log_in(client, "lena")
            assert answer.status_code == 502
            assert "certificate could not be verified" in answer.text
            assert not logged_in(client)
    finally:
        app.close()
    details = [r.getMessage() for r in caplog.records if getattr(r, "action", "") == "sso.ldap_tls"]
    assert any("CERTIFICATE_VERIFY_FAILED" in d for d in details)
