"""A document kind is declared once, in one record of ``hybrid.core.kinds``, and everything else
derives from it (issue #51): the kinds a filter takes and how a path is classed, how each is
read, what a folder indexes by default, the vault kinds a config file may name. A record added
to that one list shows up in every one of those places, and no other module lists kinds."""

from __future__ import annotations

import ast
import json
import subprocess
import sys

from helpers import REPO

from hybrid.core import kinds
from hybrid.core.config import VAULT_KINDS
from hybrid.core.settings import Settings
from hybrid.sources import KIND, SOURCES, worker
from hybrid.sources.convert import READERS, READINGS, TEXT_PARSERS
from hybrid.sources.entries import EXPORTS

# Loads hybrid.core.kinds with two more records at the end of KIND_LIST, as a developer would
# add them, before anything reads it; then reports what each derived place holds.
_ADDED = '''
    Kind("memo", (".memo",), "memos, as markdown", "markdown", aliases=("memos",), owner_fields=True),
    Kind("log", (".log",), "logs, line for line", "text", included=False),
'''
_PROBE = '''
import importlib.util, json, sys
path = sys.argv[1]
src = open(path, encoding="utf-8").read()
start = src.index("KIND_LIST = (")
end = src.index("\\n)\\n", start)
src = src[:end] + sys.argv[2] + src[end:]
assert "hybrid.core.kinds" not in sys.modules
import hybrid.core
module = importlib.util.module_from_spec(importlib.util.spec_from_loader("hybrid.core.kinds", loader=None))
module.__file__ = path
sys.modules["hybrid.core.kinds"] = module
exec(compile(src, path, "exec"), module.__dict__)
hybrid.core.kinds = module

from hybrid.core.config import VAULT_KINDS
from hybrid.core.settings import Settings
from hybrid.sources import KINDS, SOURCES, check_kinds, include_help, kind_of
from hybrid.sources.convert import READERS, READINGS, judged_fields, to_note

note = to_note("a/b.memo", b"---\\ntags: [x]\\n---\\n# Heading\\nbody\\n")
print(json.dumps({
    "kinds": KINDS, "kind_of": kind_of("a/b.memo"), "alias": check_kinds("memos"),
    "notes_source": SOURCES["notes"].kinds, "vault_kinds": VAULT_KINDS,
    "memo_reader": READERS["memo"] is READINGS["markdown"], "log_reader": READERS["log"] is READINGS["text"],
    "note_tags": note.tags, "judged": judged_fields("a/b.memo", "#y\\n")[0],
    "include": Settings().include, "include_help": include_help(),
}))
'''


def _with_added_records() -> dict:
    r = subprocess.run([sys.executable, "-c", _PROBE, kinds.__file__, _ADDED], capture_output=True,
                       text=True, timeout=60, cwd=REPO)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_a_kind_declared_once_shows_up_in_every_derived_place():
    got = _with_added_records()
    assert got["kinds"][-2:] == ["memo", "log"]
    assert got["kind_of"] == "memo" and got["alias"] == ["memo"]
    assert got["notes_source"][-2:] == ["memo", "log"]
    assert got["memo_reader"] and got["log_reader"]
    assert got["note_tags"] == ["x"] and got["judged"] == ["y"]  # the owner's fields, judged
    assert got["include"] == [*Settings().include, "**/*.memo"]  # not the log: not included
    assert "**/*.memo" in got["include_help"] and "memos" in got["include_help"]
    assert "**/*.log" not in got["include_help"]
    assert got["vault_kinds"] == list(VAULT_KINDS)


def test_the_vault_kinds_are_the_sources():
    assert VAULT_KINDS == tuple(SOURCES) == tuple(s.name for s in kinds.SOURCE_LIST)
    assert Settings().include == kinds.folder_globs()


def test_every_binding_by_name_is_bound_and_used():
    """A record names its reader, its converter operation, its source; the tables holding
    those implementations are keyed by exactly the names the records use."""
    assert {k.reads for k in kinds.KIND_LIST} == set(READINGS)
    assert all(READERS[k.name] is READINGS[k.reads] for k in kinds.KIND_LIST)
    # the owner's tags and frontmatter are judged from the text the kind was indexed as
    assert all(k.reads in TEXT_PARSERS for k in kinds.KIND_LIST if k.owner_fields)
    # the worker imports nothing of hybrid: its operations are checked against the records here
    # (and pdf_ocr: one scanned page of a PDF, asked by hybrid.sources.pdf)
    assert {k.op for k in kinds.KIND_LIST if k.op} | {"pdf_ocr"} == set(worker._OPS)
    assert {s.name for s in kinds.SOURCE_LIST if not s.folder} == set(EXPORTS)
    assert all(k.source in SOURCES for k in kinds.KIND_LIST)
    assert set(KIND) == {k.name for k in kinds.KIND_LIST}


# the tables of implementations keyed by the names the records bind (checked just above)
BINDINGS = {("hybrid/sources/convert.py", "TEXT_PARSERS"), ("hybrid/sources/convert.py", "READINGS"),
            ("hybrid/sources/worker.py", "_OPS"), ("hybrid/sources/entries.py", "EXPORTS")}
# known leftovers owned elsewhere: (file, line's text) -> why
KNOWN: dict[tuple[str, str], str] = {}


def _literals(tree: ast.AST):
    """(node, the assigned name or "") of every tuple, list, set and dict literal."""
    named = {id(n.value): t.id for n in ast.walk(tree) if isinstance(n, ast.Assign | ast.AnnAssign)
             and n.value is not None for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
             if isinstance(t, ast.Name)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Tuple | ast.List | ast.Set | ast.Dict):
            yield node, named.get(id(node), "")


def test_no_second_list_of_kinds():
    """No module but hybrid.core.kinds spells out two or more kinds, sources or include globs
    in one literal: such a list would have to be kept in step with the records by hand."""
    names = {k.name for k in kinds.KIND_LIST} | set(SOURCES)
    found = []
    for path in sorted((REPO / "hybrid").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel == "hybrid/core/kinds.py":
            continue
        text = path.read_text(encoding="utf-8")
        if sum(f'"{n}"' in text or f"'{n}'" in text for n in names) < 2 and "**/*." not in text:
            continue  # cannot hold such a literal: spare the parse
        lines = text.splitlines()
        for node, name in _literals(ast.parse(text)):
            items = node.keys if isinstance(node, ast.Dict) else node.elts
            words = {e.value for e in items if isinstance(e, ast.Constant) and isinstance(e.value, str)}
            if len(words & names) < 2 and len({w for w in words if w.startswith("**/*.")}) < 2:
                continue
            if (rel, name) in BINDINGS or (rel, lines[node.lineno - 1].strip()) in KNOWN:
                continue
            found.append(f"{rel}:{node.lineno} {sorted(words & names)}")
    assert not found, "kinds listed outside hybrid.core.kinds:\n" + "\n".join(found)
