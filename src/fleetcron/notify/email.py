"""Email sender: one plain-text message per notification, over SMTP.

With ``starttls`` the session is upgraded before anything else is said and the server's
certificate is verified against the system's CAs; a server that does not offer STARTTLS is
a failure, never a silent fallback to plain text. Credentials are sent only after that
upgrade (the service refuses to store a password for a plain-text session except to a
loopback relay).
"""

from __future__ import annotations

import smtplib
import ssl
from collections.abc import Sequence
from email.message import EmailMessage
from email.utils import formatdate, make_msgid

from fleetcron.crypto import Secret
from fleetcron.notify import DeliveryFailed


def build_message(*, sender: str, to: Sequence[str], subject: str, text: str) -> EmailMessage:
    message = EmailMessage()
    message["From"] = sender
    message["To"] = ", ".join(to)
    message["Subject"] = subject
    message["Date"] = formatdate(localtime=False, usegmt=True)
    message["Message-ID"] = make_msgid(domain=sender.rpartition("@")[2] or None)
    message["Auto-Submitted"] = "auto-generated"
    message.set_content(text)
    return message


def send_mail(
    *,
    host: str,
    port: int,
    starttls: bool,
    username: str | None,
    password: Secret | None,
    sender: str,
    to: Sequence[str],
    subject: str,
    text: str,
    timeout: float,
) -> str | None:
    """Send one message; returns a note naming refused recipients when the server accepted
    the message for the others, raises :class:`DeliveryFailed` when nobody got it."""
    message = build_message(sender=sender, to=to, subject=subject, text=text)
    where = f"SMTP {host}:{port}"
    try:
        with smtplib.SMTP(host, port, timeout=timeout) as smtp:
            smtp.ehlo()
            if starttls:
                smtp.starttls(context=ssl.create_default_context())
                smtp.ehlo()
            if username:
                smtp.login(username, password.reveal().decode() if password else "")
            refused = smtp.send_message(message, from_addr=sender, to_addrs=list(to))
    except smtplib.SMTPNotSupportedError as exc:
        raise DeliveryFailed(f"{where} does not offer STARTTLS") from exc
    except smtplib.SMTPAuthenticationError as exc:
        raise DeliveryFailed(
            f"{where} refused the login of {username}: {_reply(exc.smtp_code, exc.smtp_error)}"
        ) from exc
    except smtplib.SMTPRecipientsRefused as exc:
        raise DeliveryFailed(
            f"{where} refused every recipient: {_refusals(exc.recipients)}"
        ) from exc
    except smtplib.SMTPResponseException as exc:
        raise DeliveryFailed(f"{where}: {_reply(exc.smtp_code, exc.smtp_error)}") from exc
    except TimeoutError as exc:
        raise DeliveryFailed(f"no answer from {where} within {timeout:g} s") from exc
    except ssl.SSLError as exc:
        raise DeliveryFailed(f"{where}: TLS failed: {exc.reason or exc}") from exc
    except (smtplib.SMTPException, OSError) as exc:
        detail = exc.strerror.lower() if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise DeliveryFailed(f"cannot deliver through {where}: {detail}") from exc
    if refused:
        return f"{where} refused {_refusals(refused)}"
    return None


def _reply(code: int, error: bytes | str) -> str:
    text = error.decode(errors="replace") if isinstance(error, bytes) else error
    return f"{code} {text}".strip()


def _refusals(refused: dict[str, tuple[int, bytes]]) -> str:
    return "; ".join(f"{address} ({_reply(*reply)})" for address, reply in sorted(refused.items()))


__all__ = ["build_message", "send_mail"]
