"""docs/web.md carries the permission matrix; it must say what core/permissions.MATRIX says."""

from __future__ import annotations

from pathlib import Path

from fleetcron.core.permissions import MATRIX, ROLE_RANK, SCOPE_NEEDED, allowed

GUIDE = Path(__file__).resolve().parents[3] / "docs" / "web.md"
BEGIN = "<!-- permission matrix: generated from fleetcron.core.permissions.MATRIX -->"
END = "<!-- end of permission matrix -->"


def matrix_table() -> str:
    """The Markdown table of MATRIX: one row per action, one column per role, and the
    token scope the action needs (SCOPE_NEEDED)."""
    roles = sorted(ROLE_RANK, key=ROLE_RANK.__getitem__)
    width = max(len(f"`{action}`") for action in MATRIX)
    lines = [
        f"| {'action':<{width}} | "
        + " | ".join(f"{r:<8}" for r in [*roles, "scope"])
        + " |",
        f"|{'-' * (width + 2)}|" + "|".join("-" * 10 for _ in [*roles, "scope"]) + "|",
    ]
    for action in MATRIX:
        marks = [("yes" if allowed(role, action) else "—") for role in roles]
        marks.append(SCOPE_NEEDED[action])
        lines.append(f"| {f'`{action}`':<{width}} | " + " | ".join(f"{m:<8}" for m in marks) + " |")
    return "\n".join(lines)


def test_the_web_guide_shows_the_permission_matrix_of_the_code() -> None:
    text = GUIDE.read_text()
    documented = text.split(BEGIN, 1)[1].split(END, 1)[0].strip()

    assert documented == matrix_table(), (
        "docs/web.md is out of date; replace its matrix with the output of "
        "`python -c 'import test_web_guide as t; print(t.matrix_table())'` "
        "(run in tests/e2e/browser with tests/ on PYTHONPATH)"
    )
