"""The package's layers: imports run one way, and no module imports itself back in a circle.

Each folder of ``hybrid/`` is a layer (docs/internals.md draws them); a module may import its
own layer and the layers below, never one above. Imports made inside functions and under
``TYPE_CHECKING`` count too: a lazy import upward is still a dependency upward.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from helpers import REPO

PACKAGE = REPO / "hybrid"

# lowest first; a module may import from its own layer and every layer before it
LAYERS = ["core", "embedders", "sources", "store", "indexing", "retrieval", "app", "eval", "faces"]
# rooms inside a layer that must not see each other, (importer, imported): a backend knows no
# other backend, the agent view is typed against the store's base, a source knows no store
FORBIDDEN = [
    ("hybrid.store.pg", "hybrid.store.local"),
    ("hybrid.store.local", "hybrid.store.pg"),
    ("hybrid.store.agent", "hybrid.store.local"),
    ("hybrid.store.agent", "hybrid.store.pg"),
    ("hybrid.store.base", "hybrid.store.local"),
    ("hybrid.store.base", "hybrid.store.pg"),
    ("hybrid.store.base", "hybrid.store.agent"),
]


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """The hybrid modules ``name`` imports (a package's name when a name of it is imported)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                full = f"{target}.{alias.name}"
                found.add(full if full in MODULES else target)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {m for m in found if m == "hybrid" or m.startswith("hybrid.")} - {name}


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _layer(module: str) -> int | None:
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else None


def test_every_module_lives_in_a_layer():
    loose = [m for m in MODULES if m not in ("hybrid", "hybrid.__main__", "hybrid.cli") and _layer(m) is None]
    assert not loose, f"modules outside the layers {LAYERS}: {loose}"


def test_imports_run_downward():
    upward = []
    for module, targets in GRAPH.items():
        mine = _layer(module)
        for target in targets:
            theirs = _layer(target)
            if target == "hybrid" and module != "hybrid":
                upward.append(f"{module} -> hybrid (the public package sits on top)")
            elif mine is not None and theirs is not None and theirs > mine:
                upward.append(f"{module} ({LAYERS[mine]}) -> {target} ({LAYERS[theirs]})")
    assert not upward, "imports running back up:\n" + "\n".join(sorted(upward))


@pytest.mark.parametrize("importer,imported", FORBIDDEN)
def test_rooms_that_must_not_meet(importer, imported):
    bad = sorted(f"{m} -> {t}" for m, ts in GRAPH.items() if m.startswith(importer)
                 for t in ts if t.startswith(imported))
    assert not bad, "\n".join(bad)


# what the layers above the store may import of it: never a backend
STORE_FACE = ("hybrid.store", "hybrid.store.port", "hybrid.store.base", "hybrid.store.agent", "hybrid.store.props",
              "hybrid.store.lexicon", "hybrid.store.graph")


def test_nothing_above_the_store_names_a_backend():
    """Only ``hybrid.store`` picks a backend (from the vault's ``store`` setting); the layers
    above ask it through the port, so the facade never branches on the backend."""
    bad = sorted(f"{m} -> {t}" for m, ts in GRAPH.items()
                 if (_layer(m) or 0) > LAYERS.index("store")
                 for t in ts if t.startswith("hybrid.store")
                 and not any(t == f or t.startswith(f + ".") for f in STORE_FACE[1:]) and t != "hybrid.store")
    assert not bad, "\n".join(bad)


def test_no_sql_outside_the_store_backends():
    """SQL is written by the store's backends only: the layers above ask named queries."""
    import re
    sql = re.compile(r"\b(SELECT\s+[\w*(]|INSERT\s+INTO|DELETE\s+FROM|UPDATE\s+\w+\s+SET)\b")
    bad = sorted(m for m, path in MODULES.items()
                 if not m.startswith(("hybrid.store.local", "hybrid.store.pg", "hybrid.store.sql"))
                 and sql.search(path.read_text(encoding="utf-8")))
    assert not bad, f"SQL outside the store backends: {bad}"


def test_no_import_circles():
    """No module reaches itself through the modules it imports (a package's ``__init__`` counts
    as the package; importing a name from a package is an edge to it)."""
    circles: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for t in sorted(GRAPH.get(m, ())):
            if t not in GRAPH:
                continue
            if state.get(t) == 1:
                circles.append(stack[stack.index(t):] + [t])
            elif t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(GRAPH):
        if m not in state:
            visit(m)
    assert not circles, "import circles:\n" + "\n".join(" -> ".join(c) for c in circles)
