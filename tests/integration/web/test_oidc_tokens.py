"""The ID token's checks, each shown to refuse a token a real provider would never send.

A real provider signs correctly, so these tests stand up an issuer of their own on
loopback (discovery document, key set, token endpoint) whose token endpoint answers with a
token the test makes: signed with a key the key set lacks, for another audience, expired,
with another nonce, from another issuer, unsigned, or MACed with the client's secret. The
first case, a token made right, is the negative control: the same path logs in.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from fastapi.testclient import TestClient
from joserfc import jwt
from joserfc.jwk import OctKey, RSAKey

from fixtures.app import make_settings
from fleetcron.app import App
from fleetcron.services.identity.oidc import forget_provider
from integration.web.conftest import new_client, sqlite_only

pytestmark = sqlite_only

CALLBACK = "http://testserver/login/oidc/callback"
CLIENT_ID = "fleetcron"
SECRET = "stub-client-secret-0123456789abcdef0123"
GOOD = RSAKey.generate_key(2048, parameters={"kid": "good"})
#: a key the issuer never published
STRANGER = RSAKey.generate_key(2048, parameters={"kid": "stranger"})
#: a key under the published key's id, but not the published key
IMPOSTOR = RSAKey.generate_key(2048, parameters={"kid": "good"})

Minter = Callable[[str, str], str]


class StubIssuer(ThreadingHTTPServer):
    issuer: str
    #: (issuer, nonce) -> the ID token the token endpoint answers with
    mint: Minter


class Handler(BaseHTTPRequestHandler):
    server: StubIssuer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _json(self, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        issuer = self.server.issuer
        if self.path == "/.well-known/openid-configuration":
            self._json(
                {
                    "issuer": issuer,
                    "authorization_endpoint": issuer + "/authorize",
                    "token_endpoint": issuer + "/token",
                    "jwks_uri": issuer + "/jwks",
                }
            )
        elif self.path == "/jwks":
            self._json({"keys": [GOOD.as_dict(private=False)]})
        else:
            self.send_error(404)

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", "0"))
        form = parse_qs(self.rfile.read(length).decode())
        # The code the test hands back is the nonce of the log-in (see log_in_with).
        self._json({"id_token": self.server.mint(self.server.issuer, form["code"][0])})


@pytest.fixture(scope="module")
def stub() -> Iterator[StubIssuer]:
    server = StubIssuer(("127.0.0.1", 0), Handler)
    server.issuer = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(10)
    forget_provider(server.issuer)


@pytest.fixture
def app(database_url: str, tmp_path: Path, stub: StubIssuer) -> Iterator[App]:
    settings = make_settings(
        tmp_path / "data",
        database_url,
        oidc_issuer=stub.issuer,
        oidc_client_id=CLIENT_ID,
        oidc_client_secret=SECRET,
        oidc_redirect_uri=CALLBACK,
        oidc_role_mapping=[{"group": "ops", "role": "operator"}],
    )
    the_app = App.open(settings)
    yield the_app
    the_app.close()


def claims(issuer: str, their_nonce: str, **changed: Any) -> dict[str, Any]:
    now = int(time.time())
    values = {
        "iss": issuer,
        "sub": "sub-olga",
        "aud": CLIENT_ID,
        "exp": now + 300,
        "iat": now,
        "nonce": their_nonce,
        "preferred_username": "olga",
        "groups": ["ops"],
    }
    values.update(changed)
    return values


def signed(key: RSAKey, **changed: Any) -> Minter:
    def mint(issuer: str, nonce: str) -> str:
        header = {"alg": "RS256", "kid": key.kid}
        return jwt.encode(header, claims(issuer, nonce, **changed), key)

    return mint


def unsigned(issuer: str, nonce: str) -> str:
    import base64

    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none'})}.{part(claims(issuer, nonce))}."


def maced_with_the_client_secret(issuer: str, nonce: str) -> str:
    key = OctKey.import_key(SECRET)
    return jwt.encode({"alg": "HS256"}, claims(issuer, nonce), key, algorithms=["HS256"])


def log_in_with(client: TestClient) -> Any:
    started = client.get("/login/oidc")
    assert started.status_code == 303, started.text
    query = parse_qs(urlsplit(started.headers["location"]).query)
    state, nonce = query["state"][0], query["nonce"][0]
    assert query["code_challenge_method"] == ["S256"]
    return client.get("/login/oidc/callback", params={"state": state, "code": nonce})


CASES: dict[str, tuple[Minter, str]] = {
    "signed with a key the issuer never published": (signed(STRANGER), "token_signature"),
    "signed with another key under the published key's id": (
        signed(IMPOSTOR),
        "token_signature",
    ),
    "for another audience": (signed(GOOD, aud="another-client"), "token_audience"),
    "for several audiences, authorized for another": (
        signed(GOOD, aud=[CLIENT_ID, "another-client"], azp="another-client"),
        "token_audience",
    ),
    "expired": (signed(GOOD, exp=int(time.time()) - 3600), "token_expired"),
    "with another log-in's nonce": (signed(GOOD, nonce="replayed-nonce"), "nonce_mismatch"),
    "from another issuer": (signed(GOOD, iss="http://127.0.0.1:1"), "token_issuer"),
    "unsigned (alg none)": (unsigned, "token_algorithm"),
    "MACed with the client's secret": (maced_with_the_client_secret, "token_algorithm"),
}


def test_a_token_made_right_logs_in(app: App, stub: StubIssuer) -> None:
    """The negative control of the cases below: only the defect differs."""
    stub.mint = signed(GOOD)
    with new_client(app) as client:
        answer = log_in_with(client)
        assert answer.status_code == 303, answer.text
        assert client.get("/", follow_redirects=False).status_code == 200


@pytest.mark.parametrize("case", list(CASES))
def test_a_token_that_fails_a_check_logs_nobody_in(
    case: str, app: App, stub: StubIssuer, caplog: pytest.LogCaptureFixture
) -> None:
    stub.mint, reason = CASES[case]
    caplog.set_level(logging.WARNING)
    with new_client(app) as client:
        answer = log_in_with(client)

        assert answer.status_code == 401, answer.text
        assert "could not be verified" in answer.text
        assert client.get("/", follow_redirects=False).status_code == 303
    actions = [getattr(r, "action", None) for r in caplog.records]
    assert f"sso.{reason}" in actions
