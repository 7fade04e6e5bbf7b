"""Log output: readable ``key=value`` lines by default, one JSON object per line as an option.

Code logs with a message and ``extra={"action": ..., <fields>}``; the JSON formatter
emits every extra field, the text formatter only the message (which already names them).
"""

from __future__ import annotations

import json
import logging
import re
import sys
from datetime import UTC, datetime
from typing import Any

_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}
#: C0 and C1 control characters, DEL and the Unicode line separators: a newline in a
#: message that echoes input (a label, a cron field) would otherwise forge a log line.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def escape_controls(text: str) -> str:
    r"""``text`` with control characters written as escapes (``\n``, ``\x1b``): one line."""

    def escaped(match: re.Match[str]) -> str:
        char = match.group()
        named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(char)
        if named:
            return named
        return f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"

    return _CONTROL.sub(escaped, text)


#: The same, but a command's output keeps its lines and tabs.
_OUTPUT_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")


def escape_output_controls(text: str) -> str:
    r"""A command's output as shown on a page: newlines and tabs kept, every other control
    character written as an escape (``\x1b``, ``\r``), so terminal sequences in it are seen
    as text and not carried along when it is copied into a terminal. A Windows line end
    (``\r\n``) is shown as a line end."""
    return _OUTPUT_CONTROL.sub(lambda m: escape_controls(m.group()), text.replace("\r\n", "\n"))


class TextFormatter(logging.Formatter):
    """``time LEVEL message``, the message kept on one line; a traceback, which only the
    program writes, follows on its own lines as usual."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = escape_controls(record.message)
        return super().formatMessage(record)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                data[key] = value
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        return json.dumps(data, default=str)


def configure_logging(fmt: str = "text", level: int = logging.INFO) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter("%(asctime)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("asyncssh", "alembic", "sqlalchemy"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
