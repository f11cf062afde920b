"""No module reaches into another's private parts: a name that starts with ``_`` is used only in
the module that defines it (as ``tests/unit/test_layers.py`` holds the layers).

Read from the source, as the layer test reads it: an import of a private name or module, and an
attribute ``x._name`` whose name the module itself never defines (a function, class, assignment
or argument of that name), outside ``self`` and ``cls``. Another package's private parts are
listed below with why each is needed: none of hybrid's own.
"""

from __future__ import annotations

import ast
from pathlib import Path

from helpers import REPO

PACKAGE = REPO / "hybrid"

# (module path, what it reads): another package's private part, each without a public way in
THIRD_PARTY = {
    # tomlkit: a key inserted at its place in a table (the config file keeps the user's order);
    # tomlkit's public API only appends
    ("hybrid/core/config.py", "table.value._insert_at"),
    ("hybrid/core/config.py", "doc._insert_at"),
    # FastMCP keeps its low-level server (whose run() takes the streams) behind this name
    ("hybrid/faces/mcp_stdio.py", "server._lowlevel_server"),
}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _defined(tree: ast.AST) -> set[str]:
    """Every name the module defines: functions, classes, assigned names and attributes, arguments."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            out.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, ast.arg):
            out.add(node.arg)
    return out


def reaches(path: Path) -> set[str]:
    """What module ``path`` reads of other modules' private parts."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    own, found = _defined(tree), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            for alias in node.names:
                if _private(alias.name) or any(_private(p) for p in module.split(".")):
                    found.add(f"from {module} import {alias.name}")
        elif isinstance(node, ast.Import):
            found.update(f"import {a.name}" for a in node.names if any(_private(p) for p in a.name.split(".")))
        elif isinstance(node, ast.Attribute) and _private(node.attr) and node.attr not in own:
            base = ast.unparse(node.value)
            if base not in ("self", "cls"):
                found.add(f"{base}.{node.attr}")
    return found


def _all() -> set[tuple[str, str]]:
    return {(path.relative_to(REPO).as_posix(), what)
            for path in sorted(PACKAGE.rglob("*.py")) for what in reaches(path)}


def test_no_module_uses_another_modules_private_names():
    found = _all() - THIRD_PARTY
    assert not found, "private names used across modules (make them public, or keep them in " \
                      "their module):\n" + "\n".join(f"{p}: {w}" for p, w in sorted(found))


def test_every_listed_third_party_reach_is_still_made():
    """A reach made no more comes off the list (so the list says what is true)."""
    gone = THIRD_PARTY - _all()
    assert not gone, f"no longer read, take off THIRD_PARTY: {sorted(gone)}"


def test_the_check_sees_a_reach(tmp_path):
    """The reader finds each form: a private import, a private module, an attribute the module
    does not define; and leaves alone what the module defines and ``self``'s own."""
    mod = tmp_path / "m.py"
    mod.write_text("from a.b import _helper\nimport c._impl\nfrom d import e\n"
                   "class K:\n    def f(self, h):\n        self._mine = 1\n        return h._store(1), self._x\n"
                   "def g(k):\n    return k._mine\n", encoding="utf-8")
    assert reaches(mod) == {"from a.b import _helper", "import c._impl", "h._store"}
