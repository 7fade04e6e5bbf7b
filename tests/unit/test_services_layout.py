"""services/ holds one package per concept, and the packages import each other in one
direction only: the order docs/architecture.md gives, read back from that page so the page
and this check cannot drift apart."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ROOT / "src" / "fleetcron" / "services"
ARCHITECTURE = ROOT / "docs" / "architecture.md"


def documented_order() -> list[str]:
    """The packages and modules of services/, from the top down, as the page lists them."""
    page = ARCHITECTURE.read_text()
    start = page.index("\n`setup` · ")
    paragraph = page[start : page.index("\n\n", start)]
    return [name.rstrip("/") for name in re.findall(r"`([a-z_]+/?)`", paragraph)]


def concept_of(path: Path) -> str:
    parts = path.relative_to(SERVICES).parts
    return parts[0] if len(parts) > 1 else parts[0].removesuffix(".py")


def imported_concepts(path: Path) -> set[str]:
    """The services concepts a module imports, at module level or inside a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            parts = node.module.split(".")
            if parts[:2] != ["fleetcron", "services"]:
                continue
            if len(parts) > 2:
                found.add(parts[2])
            else:
                found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[:2] == ["fleetcron", "services"] and len(parts) > 2:
                    found.add(parts[2])
    return found


def upward_imports(order: list[str]) -> list[str]:
    rank = {name: index for index, name in enumerate(order)}
    wrong = []
    for path in sorted(SERVICES.rglob("*.py")):
        if path.parent == SERVICES and path.name == "__init__.py":
            continue
        own = concept_of(path)
        for other in sorted(imported_concepts(path) - {own}):
            if rank[other] <= rank[own]:
                wrong.append(f"{path.relative_to(SERVICES)} imports {other}")
    return wrong


def test_every_concept_of_services_is_in_the_documented_order() -> None:
    present = {concept_of(path) for path in SERVICES.rglob("*.py")} - {"__init__"}

    assert sorted(present) == sorted(documented_order())


def test_no_services_package_imports_one_above_it() -> None:
    assert upward_imports(documented_order()) == []


def test_the_check_sees_an_upward_import() -> None:
    """Negative control: with two neighbours of the order swapped, the check finds imports
    that now run upward (jobs/ imports fleet/, which the swapped order puts above it)."""
    order = documented_order()
    jobs, fleet = order.index("jobs"), order.index("fleet")
    order[jobs], order[fleet] = order[fleet], order[jobs]

    wrong = upward_imports(order)
    assert any(line.startswith("jobs/") and line.endswith("fleet") for line in wrong)


def test_each_package_says_what_it_owns_and_defines_nothing() -> None:
    for init in sorted(SERVICES.glob("*/__init__.py")):
        tree = ast.parse(init.read_text())
        docstring = ast.get_docstring(tree) or ""
        assert "Owns " in docstring, init
        assert all(isinstance(node, ast.Expr) for node in tree.body), init
