"""The CLI and the web are adapters: they show the views the services return and never
reach into the store's rows. Read from the imports of every module of cli/ and web/ (at
module level or inside a function), so that a new import of ``fleetcron.store.schema`` fails
here before a page starts to depend on a table's columns."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "fleetcron"
ADAPTERS = ("cli", "web")
SCHEMA = "fleetcron.store.schema"



def is_schema(module: str) -> bool:
    return module == SCHEMA or module.startswith(SCHEMA + ".")


def imports_rows(source: str) -> bool:
    """Whether the module imports the store's schema, in any spelling."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import) and any(is_schema(a.name) for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.module:
            if is_schema(node.module):
                return True
            if node.module == "fleetcron.store" and any(a.name == "schema" for a in node.names):
                return True
    return False


def modules_importing_rows(package: Path) -> set[str]:
    """The modules of the adapters under ``package`` that import the store's rows, as
    paths relative to it."""
    found: set[str] = set()
    for adapter in ADAPTERS:
        for path in sorted((package / adapter).rglob("*.py")):
            if imports_rows(path.read_text()):
                found.add(path.relative_to(package).as_posix())
    return found


def test_no_adapter_imports_the_store_schema() -> None:
    assert modules_importing_rows(PACKAGE) == set()


def test_the_check_finds_a_planted_import_of_the_rows(tmp_path: Path) -> None:
    """Negative control: a copy of a clean adapter module with one import of a row added,
    in each spelling, is found."""
    clean = (PACKAGE / "cli" / "target_cmd.py").read_text()
    assert not imports_rows(clean)
    (tmp_path / "web").mkdir()
    (tmp_path / "cli").mkdir()
    (tmp_path / "cli" / "target_cmd.py").write_text(clean)
    assert modules_importing_rows(tmp_path) == set()

    for planted in (
        "from fleetcron.store.schema import Target\n",
        "import fleetcron.store.schema\n",
        "from fleetcron.store import schema\n",
        "def rows() -> None:\n    from fleetcron.store.schema import Run  # noqa\n",
    ):
        (tmp_path / "cli" / "target_cmd.py").write_text(clean + "\n" + planted)

        assert modules_importing_rows(tmp_path) == {"cli/target_cmd.py"}, planted
