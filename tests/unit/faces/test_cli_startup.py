"""What `hybrid --help`, Tab completion and `import hybrid` load (issue #48): the command list
and completion show each lazily loaded command by its declared summary, which must be the
command's own short help, and none of them imports the engine."""

import os
import subprocess
import sys

import click
import pytest

from hybrid.faces.cli.eval import eval_cmd
from hybrid.faces.cli.main import main

ENGINE = ("hybrid.app.api", "hybrid.indexing.indexer", "hybrid.retrieval.pipeline", "urllib.request",
          "numpy", "tantivy", "faiss", "onnxruntime", "sqlite3", "hybrid.core.config")


@pytest.mark.parametrize("group", [main, eval_cmd], ids=["hybrid", "eval"])
def test_lazy_summaries_are_the_commands_own(group):
    ctx = click.Context(group)
    for name, (_target, summary) in group.lazy_commands.items():
        real = click.Group.get_command(group, ctx, name) or group.get_command(ctx, name)
        for limit in (45, 80, 10**6):
            stand_in = click.Command(name, help=summary)
            assert stand_in.get_short_help_str(limit) == real.get_short_help_str(limit), name


def _loaded(env: dict, *args: str) -> tuple[str, list[str]]:
    code = ("import sys, runpy\n"
            f"sys.argv = ['hybrid', *{list(args)!r}]\n"
            "try:\n    runpy.run_module('hybrid.cli', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            f"print('LOADED', sorted(m for m in {ENGINE!r} if m in sys.modules))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env={**os.environ, **env})
    out, _, loaded = r.stdout.rpartition("LOADED ")
    return out, eval(loaded)  # a list literal printed above


def test_help_lists_every_command_without_importing_the_engine(tmp_path):
    out, loaded = _loaded({"HYBRID_HOME": str(tmp_path)}, "--help")
    assert loaded == []
    for name in ("audit", "eval", "query", "ui", "status", "related", "tags"):
        assert f"\n  {name} " in out
    assert "Open the search page in the browser" in out


def test_completion_of_a_command_name_imports_nothing_of_the_engine(tmp_path):
    out, loaded = _loaded({"HYBRID_HOME": str(tmp_path), "_HYBRID_COMPLETE": "bash_complete",
                           "COMP_WORDS": "hybrid s", "COMP_CWORD": "1"})
    assert loaded == []
    assert out.split() == ["plain,search", "plain,serve", "plain,service", "plain,source", "plain,status"]


def test_import_hybrid_is_lazy_and_whole():
    code = ("import sys, hybrid\n"
            "lazy = 'hybrid.app.api' not in sys.modules\n"
            "from hybrid import Hybrid, Hit, SearchRequest, open\n"
            "print(lazy, Hybrid.__module__, Hit.__module__, sorted(hybrid.__all__) == sorted(n for n in hybrid.__all__ "
            "if hasattr(hybrid, n)))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert r.stdout.split() == ["True", "hybrid.app.api", "hybrid.retrieval.hits", "True"]
    import hybrid
    with pytest.raises(AttributeError):
        hybrid.no_such_name  # noqa: B018
