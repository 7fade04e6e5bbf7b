"""Reading a password for the CLI without putting it on the command line.

Where a password comes from, first found wins: ``--password-file FILE`` (``-`` for stdin;
one line, the trailing newline dropped), the legacy ``--password`` option (visible to every
user of the host in ``ps``: kept for scripts, not advertised), the environment variable, and
an interactive prompt with confirmation when stdin is a terminal.
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
) -> str | None:
    """The password from the first source that has one (see the module docstring)."""
    if file is not None:
        return read_password_file(file, field=field)
    password = given or os.environ.get(env)
    if password:
        return password
    if sys.stdin.isatty():
        return str(click.prompt(prompt, hide_input=True, confirmation_prompt=True))
    if not required:
        return None
    raise InvalidInput(
        f"{field}: required: use --password-file FILE (or - for stdin), set {env}, "
        "or run in a terminal to be asked",
        field=field,
        value=None,
        allowed=ALLOWED,
    )
