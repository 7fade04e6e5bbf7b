"""E-mail over STARTTLS against a real SMTP server on loopback (aiosmtpd) with a
self-signed certificate: the server's certificate is verified against the system's CAs
(here ``SSL_CERT_FILE``), a server nobody trusts gets no message, and the verifying
context is built once for every message (``fleetcron.tls``), not once per message."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiosmtpd.controller import Controller

from fixtures.certificates import self_signed
from fixtures.oidc_provider import free_port
from fleetcron.notify import DeliveryFailed
from fleetcron.notify.email import MailMessage, SmtpServer, send_mail
from fleetcron.tls import verifying_context
from integration.notify.conftest import SmtpReceiver

MAIL = MailMessage(sender="fleetcron@example.com", to=["ops@example.com"], subject="s", text="t")


@pytest.fixture
def tls_smtp(tmp_path: Path) -> Iterator[tuple[SmtpReceiver, Path]]:
    """An SMTP server that requires STARTTLS, and its certificate."""
    cert, key = self_signed(tmp_path, "fleetcron test SMTP")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    receiver = SmtpReceiver(port=free_port())
    controller = Controller(
        receiver,
        hostname="127.0.0.1",
        port=receiver.port,
        tls_context=context,
        require_starttls=True,
    )
    controller.start()
    yield receiver, cert
    controller.stop()


def test_starttls_verifies_the_server_and_keeps_one_context(
    tls_smtp: tuple[SmtpReceiver, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    receiver, cert = tls_smtp
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # the system's CAs, for this test
    server = SmtpServer("127.0.0.1", receiver.port, starttls=True)
    for _ in range(2):
        assert send_mail(server, MAIL, timeout=5.0) is None
    assert [mail.recipients for mail in receiver.mails] == [["ops@example.com"]] * 2
    assert verifying_context() is verifying_context()


def test_a_server_whose_certificate_nobody_trusts_gets_no_message(
    tls_smtp: tuple[SmtpReceiver, Path],
) -> None:
    receiver, _ = tls_smtp
    server = SmtpServer("127.0.0.1", receiver.port, starttls=True)
    with pytest.raises(DeliveryFailed, match=r"(?i)certificate"):
        send_mail(server, MAIL, timeout=5.0)
    assert receiver.mails == []
