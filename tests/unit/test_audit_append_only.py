"""The audit log is append-only: no code outside the migrations changes an event, and only
retention (``store/audit.py``'s ``prune_events_older_than``) deletes old ones. The project
of an event (migration 0037) is written with it, never filled in afterwards."""

from __future__ import annotations

import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "fleetcron"
#: a statement that changes or deletes audit events
CHANGES = re.compile(
    r"update\(\s*AuditEvent|UPDATE\s+audit_events|delete\(\s*AuditEvent|DELETE\s+FROM\s+audit_events"
    r"|AuditEvent\)\.(update|delete)",
    re.IGNORECASE,
)


def changers(files: dict[str, str]) -> list[str]:
    """The files (by path) whose text changes or deletes audit events."""
    return sorted(path for path, text in files.items() if CHANGES.search(text))


def sources() -> dict[str, str]:
    return {
        str(path.relative_to(SRC)): path.read_text()
        for path in SRC.rglob("*.py")
        if "migrations" not in path.parts
    }


def test_no_code_changes_or_deletes_an_audit_event() -> None:
    assert changers(sources()) == []


def test_the_check_finds_a_change() -> None:
    """Negative control: an update of an event's project is found."""
    planted = "session.execute(update(AuditEvent).values(project_id=1))"
    assert changers({**sources(), "services/audit.py": planted}) == ["services/audit.py"]
