"""Log lines stay one line per event whatever the message echoes (log-line injection)."""

from __future__ import annotations

import logging

from fleetcron.logs import JsonFormatter, TextFormatter


def test_text_log_lines_escape_echoed_control_characters() -> None:
    record = logging.makeLogRecord(
        {"msg": "label %s is not valid", "args": ('a\n2026-12-01 WARNING forged\x1b]52;c;x\x07',)}
    )
    text = TextFormatter("%(levelname)s %(message)s").format(record)
    as_json = JsonFormatter().format(record)

    assert "\n" not in text and "\x1b" not in text
    assert "a\\n2026-12-01 WARNING forged\\x1b]52;c;x\\x07" in text
    assert "\n" not in as_json
    # negative control: the standard formatter lets the forged line through
    assert "\n2026-12-01 WARNING forged" in logging.Formatter("%(message)s").format(record)
