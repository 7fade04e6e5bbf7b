"""Reading a password or another secret for the CLI without putting it on the command line.

Where a password comes from, first found wins: ``--password-file FILE`` (``-`` for stdin;
one line, the trailing newline dropped), the legacy ``--password`` option (visible to every
user of the host in ``ps``: kept for scripts, not advertised), the environment variable, and
an interactive prompt with confirmation when stdin is a terminal. Other secrets (webhook
keys, SMTP passwords, connection strings with a password) come the same way from
:func:`get_secret`, without the prompt. A secret given on the command line still works,
with a warning on stderr (:func:`warn_command_line_secret`) naming the alternatives.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from fleetcron.errors import InvalidInput

F = TypeVar("F", bound=Callable[..., Any])
ALLOWED = "at least 8 characters"
MAX_FILE_BYTES = 4096


def password_file_option(name: str = "--password-file") -> Callable[[F], F]:
    return click.option(
        name,
        "password_file",
        metavar="FILE",
        default=None,
        help="Read the password from FILE (its first line), or from stdin with '-'.",
    )


def secret_file_option(name: str, what: str) -> Callable[[F], F]:
    """``--NAME-file FILE``: a secret read from FILE (its first line), or stdin with ``-``."""
    return click.option(
        name,
        metavar="FILE",
        default=None,
        help=f"Read {what} from FILE (its first line), or from stdin with '-'.",
    )


def warn_command_line_secret(option: str, *alternatives: str) -> None:
    """Warn on stderr that ``option`` put a secret on the command line, and where it
    belongs instead. The one wording of that warning, for every option that takes one."""
    instead = " or ".join(alternatives)
    click.echo(
        f"warning: {option} puts a secret on the command line, where every user of this "
        f"host sees it (ps, /proc) and the shell history keeps it; use {instead} instead",
        err=True,
    )


def get_secret(
    *,
    given: str | None,
    option: str,
    file: str | None,
    file_option: str,
    env: str | None = None,
    field: str,
    is_secret: Callable[[str], bool] = bool,
) -> str | None:
    """A secret from ``file_option`` (a file, or ``-`` for stdin), the command line
    (warned about when ``is_secret`` says it holds one) or ``env``; None when none has it.
    Given both on the command line and as a file, it is refused: which one was meant?"""
    if given is not None and file is not None:
        raise InvalidInput(
            f"{field}: given both as {option} and as {file_option}",
            field=field,
            value=None,
            allowed=f"one of {option} or {file_option}",
        )
    if file is not None:
        return read_password_file(file, field=field)
    if given:
        if is_secret(given):
            alternatives = [f"{file_option} FILE (or - for stdin)"]
            if env:
                alternatives.append(env)
            warn_command_line_secret(option, *alternatives)
        return given
    return (os.environ.get(env) if env else None) or None


def read_password_file(path: str, *, field: str) -> str:
    """The first line of ``path`` (``-``: stdin), without its newline."""
    try:
        if path == "-":
            text = sys.stdin.read(MAX_FILE_BYTES + 1)
        else:
            with Path(path).open(encoding="utf-8") as handle:
                text = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise InvalidInput(
            f"{field}: cannot read {path}: {exc.strerror or exc}",
            field=field,
            value=path,
            allowed="a readable file, or - for stdin",
        ) from None
    except UnicodeDecodeError:
        raise InvalidInput(
            f"{field}: {path} is not UTF-8 text",
            field=field,
            value=path,
            allowed="a text file holding the password",
        ) from None
    if len(text) > MAX_FILE_BYTES:
        raise InvalidInput(
            f"{field}: {path} is larger than {MAX_FILE_BYTES} bytes; it holds one password",
            field=field,
            value=path,
            allowed="a file with the password on its first line",
        )
    lines = text.splitlines()
    password = lines[0] if lines else ""
    if not password:
        raise InvalidInput(
            f"{field}: {path} is empty", field=field, value=path, allowed="the password"
        )
    return password


def get_password(
    *,
    file: str | None,
    given: str | None,
    env: str,
    field: str,
    prompt: str = "Password",
    required: bool = True,
    option: str = "--password",
    file_option: str = "--password-file",
    stdin_option: str | None = None,
) -> str | None:
    """The password from the first source that has one (see the module docstring)."""
    password = get_secret(
        given=given, option=option, file=file, file_option=file_option, env=env, field=field
    )
    if password:
        return password
    if sys.stdin.isatty():
        return str(click.prompt(prompt, hide_input=True, confirmation_prompt=True))
    if not required:
        return None
    raise InvalidInput(
        f"{field}: required: use {stdin_option + ', ' if stdin_option else ''}"
        f"{file_option} FILE (or - for stdin), set {env}, "
        "or run in a terminal to be asked",
        field=field,
        value=None,
        allowed=ALLOWED,
    )
