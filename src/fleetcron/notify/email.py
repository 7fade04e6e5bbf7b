"""Email channels: one plain-text message per notification, over SMTP.

An email channel keeps ``{"host", "port", "starttls", "username", "sender", "to"}`` and,
with a login, a password (kept apart, encrypted by the caller).

With ``starttls`` the session is upgraded before anything else is said and the server's
certificate is verified against the system's CAs; a server that does not offer STARTTLS is
a failure, never a silent fallback to plain text. Credentials are sent only after that
upgrade (the service refuses to store a password for a plain-text session except to a
loopback relay).
"""

from __future__ import annotations

import re
import smtplib
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from typing import Any

from fleetcron.core import validation as v
from fleetcron.crypto import Secret
from fleetcron.errors import InvalidInput
from fleetcron.notify import ChannelKind, ChannelSpec, Config, DeliveryFailed, Sending
from fleetcron.notify.channels import MAX_SECRET_LENGTH, is_loopback
from fleetcron.tls import verifying_context

MAX_RECIPIENTS = 50
_ADDRESS = re.compile(r"[^@\s<>()\[\],;:\"]+@[^@\s<>()\[\],;:\"]+")


@dataclass(frozen=True)
class EmailSpec(ChannelSpec):
    """An email channel: plain-text mail from ``sender`` to ``to`` through an SMTP server."""

    host: str
    sender: str
    to: Sequence[str]
    port: int = 25
    starttls: bool = False
    username: str | None = None
    password: str | None = field(default=None, repr=False)


def validate(spec: EmailSpec) -> tuple[Config, str | None]:
    host = _valid_host(spec.host)
    v.validate_int(spec.port, field="smtp_port", low=1, high=65535)
    sender = _valid_address(spec.sender, field_name="from")
    recipients = _valid_recipients(spec.to)
    username, password = _valid_login(spec.username or None, spec.password or None)
    if password is not None and not spec.starttls and not is_loopback(host):
        raise InvalidInput(
            "starttls: a password is sent only over STARTTLS (add --starttls), "
            "or in plain text to a relay on this host",
            field="starttls",
            value=False,
            allowed="--starttls, or --smtp-host localhost",
        )
    config = {
        "host": host,
        "port": spec.port,
        "starttls": spec.starttls,
        "username": username,
        "sender": sender,
        "to": recipients,
    }
    return config, password


def _valid_host(host: str) -> str:
    if not host or len(host) > 255 or any(ch.isspace() or ch in "@/" for ch in host):
        raise InvalidInput(
            f"smtp_host: {host!r} is not a host name or address",
            field="smtp_host",
            value=host,
            allowed="a DNS name or an IP address",
        )
    return host


def _valid_recipients(addresses: Sequence[str]) -> list[str]:
    """The recipients, each once, in the order given."""
    recipients = list(dict.fromkeys(_valid_address(a, field_name="to") for a in addresses))
    if not 1 <= len(recipients) <= MAX_RECIPIENTS:
        raise InvalidInput(
            f"to: {len(recipients)} recipients; give 1 to {MAX_RECIPIENTS}",
            field="to",
            value=recipients,
            allowed=f"1 to {MAX_RECIPIENTS} addresses",
        )
    return recipients


def _valid_login(username: str | None, password: str | None) -> tuple[str | None, str | None]:
    """An SMTP login: both a user name and a password, or neither."""
    if username is not None and (
        len(username) > 255 or any(ch.isspace() or ord(ch) < 32 for ch in username)
    ):
        raise InvalidInput(
            "username: must be at most 255 characters without spaces",
            field="username",
            value=username,
            allowed="at most 255 characters without spaces",
        )
    if (username is None) != (password is None):
        missing = "password" if password is None else "username"
        raise InvalidInput(
            f"{missing}: an SMTP login needs both --username and --password",
            field=missing,
            value=None,
            allowed="both or neither",
        )
    if password is not None and len(password) > MAX_SECRET_LENGTH:
        raise InvalidInput(
            f"password: at most {MAX_SECRET_LENGTH} characters",
            field="password",
            value="**********",
            allowed=f"at most {MAX_SECRET_LENGTH} characters",
        )
    return username, password


def _valid_address(address: str, *, field_name: str) -> str:
    if not _ADDRESS.fullmatch(address) or len(address) > 254:
        raise InvalidInput(
            f"{field_name}: {address!r} is not an email address",
            field=field_name,
            value=address,
            allowed="user@domain",
        )
    return address


def shown(config: Config) -> Config:
    return config


def summary(config: Config, has_secret: bool) -> str:
    login = f" as {config['username']}" if config.get("username") else ""
    tls = " starttls" if config.get("starttls") else ""
    return (
        f"{config['host']}:{config['port']}{tls}{login} "
        f"from {config['sender']} to {', '.join(config['to'])}"
    )


def audit(config: Config, signed: bool) -> dict[str, Any]:
    return {
        "host": config["host"],
        "port": config["port"],
        "starttls": config["starttls"],
        "recipients": len(config["to"]),
    }


def send(
    config: Config, secret: Secret | None, message: Mapping[str, Any], sending: Sending
) -> str | None:
    server = SmtpServer(
        host=str(config["host"]),
        port=int(config["port"]),
        starttls=bool(config.get("starttls")),
        username=config.get("username"),
        password=secret,
    )
    mail = MailMessage(
        sender=str(config["sender"]),
        to=[str(address) for address in config["to"]],
        subject=str(message["subject"]),
        text=str(message["text"]),
        thread=_thread_of(message),
    )
    return send_mail(server, mail, timeout=sending.timeout)


def _thread_of(message: Mapping[str, Any]) -> str | None:
    """Every message about one incident names the same thread, so mail clients that thread
    by ``References`` keep them together (the subjects share their beginning too)."""
    incident = message.get("incident_id")
    return f"fleetcron-incident-{incident}" if isinstance(incident, int) else None


@dataclass(frozen=True)
class SmtpServer:
    """Where a message is handed over, and how: the server, STARTTLS, and the login (a
    ``username`` with its ``password``; none without one)."""

    host: str
    port: int
    starttls: bool = False
    username: str | None = None
    password: Secret | None = field(default=None, repr=False)

    @property
    def where(self) -> str:
        return f"SMTP {self.host}:{self.port}"


@dataclass(frozen=True)
class MailMessage:
    """One plain-text message: from ``sender`` to ``to``, and the ``thread`` (an incident)
    it belongs to, if any."""

    sender: str
    to: Sequence[str]
    subject: str
    text: str
    thread: str | None = None


def build_message(mail: MailMessage) -> EmailMessage:
    sender = mail.sender
    message = EmailMessage()
    message["From"] = sender
    message["To"] = ", ".join(mail.to)
    message["Subject"] = mail.subject
    message["Date"] = formatdate(localtime=False, usegmt=True)
    message["Message-ID"] = make_msgid(domain=sender.rpartition("@")[2] or None)
    message["Auto-Submitted"] = "auto-generated"
    if mail.thread is not None:
        root = f"<{mail.thread}@{sender.rpartition('@')[2] or 'fleetcron'}>"
        message["References"] = root
        message["In-Reply-To"] = root
    message.set_content(mail.text)
    return message


def send_mail(server: SmtpServer, mail: MailMessage, *, timeout: float) -> str | None:
    """Send one message; returns a note naming refused recipients when the server accepted
    the message for the others, raises :class:`DeliveryFailed` when nobody got it."""
    message = build_message(mail)
    try:
        with smtplib.SMTP(server.host, server.port, timeout=timeout) as smtp:
            smtp.ehlo()
            if server.starttls:
                smtp.starttls(context=verifying_context())
                smtp.ehlo()
            if server.username:
                password = server.password
                smtp.login(server.username, password.reveal().decode() if password else "")
            refused = smtp.send_message(message, from_addr=mail.sender, to_addrs=list(mail.to))
    except (smtplib.SMTPException, OSError) as exc:
        raise _failure(exc, server, timeout) from exc
    if refused:
        return f"{server.where} refused {_refusals(refused)}"
    return None


def _failure(
    exc: smtplib.SMTPException | OSError, server: SmtpServer, timeout: float
) -> DeliveryFailed:
    """What went wrong talking to the server, in words (the most specific cause first)."""
    where = server.where
    if isinstance(exc, smtplib.SMTPNotSupportedError):
        return DeliveryFailed(f"{where} does not offer STARTTLS")
    if isinstance(exc, smtplib.SMTPAuthenticationError):
        return DeliveryFailed(
            f"{where} refused the login of {server.username}: "
            f"{_reply(exc.smtp_code, exc.smtp_error)}"
        )
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        return DeliveryFailed(f"{where} refused every recipient: {_refusals(exc.recipients)}")
    if isinstance(exc, smtplib.SMTPResponseException):
        return DeliveryFailed(f"{where}: {_reply(exc.smtp_code, exc.smtp_error)}")
    if isinstance(exc, TimeoutError):
        return DeliveryFailed(f"no answer from {where} within {timeout:g} s")
    if isinstance(exc, ssl.SSLError):
        return DeliveryFailed(f"{where}: TLS failed: {exc.reason or exc}")
    detail = exc.strerror.lower() if isinstance(exc, OSError) and exc.strerror else str(exc)
    return DeliveryFailed(f"cannot deliver through {where}: {detail}")


def _reply(code: int, error: bytes | str) -> str:
    text = error.decode(errors="replace") if isinstance(error, bytes) else error
    return f"{code} {text}".strip()


def _refusals(refused: dict[str, tuple[int, bytes]]) -> str:
    return "; ".join(f"{address} ({_reply(*reply)})" for address, reply in sorted(refused.items()))


KIND = ChannelKind(
    name="email",
    spec_type=EmailSpec,
    validate=validate,
    send=send,
    shown=shown,
    summary=summary,
    audit=audit,
)


__all__ = [
    "KIND",
    "MAX_RECIPIENTS",
    "EmailSpec",
    "MailMessage",
    "SmtpServer",
    "build_message",
    "send_mail",
    "validate",
]
