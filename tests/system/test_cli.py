"""The command line as a user runs it: real subprocesses, stdout/stderr discipline."""
import json
import os
import subprocess
import sys

import pytest
from helpers import hybrid_cmd, write

pytestmark = pytest.mark.slow


@pytest.fixture
def home(hybrid_home, vault):
    write(hybrid_home, "config.toml", '[settings]\nembedder = "hash:64"\n')
    r = hybrid_cmd(hybrid_home, "index", str(vault), "--name", "vault")
    assert r.returncode == 0, r.stderr
    return hybrid_home


def test_lazy_imports():
    code = ("import sys, hybrid.faces.cli.main, hybrid; "
            "heavy = [m for m in ('torch', 'sentence_transformers', 'faiss', 'numpy', 'transformers') "
            "if m in sys.modules]; "
            "print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_lexical_query_does_not_load_the_model(home):
    code = ("import sys; from hybrid.faces.cli.main import main\n"
            "try:\n    main(['query', 'tailscale', '--mode', 'lexical', '--json'])\n"
            "except SystemExit:\n    pass\n"
            "print('TORCH' if 'torch' in sys.modules else 'NO-TORCH', file=sys.stderr)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, HYBRID_HOME=str(home)))
    assert "NO-TORCH" in r.stderr
    assert json.loads(r.stdout)[0]["path"] == "home/network.md"


def test_subcommand_modules_load_when_used(home):
    """`hybrid query` does not import `eval`, `audit` or `proposals`; help still lists them and
    each runs when named."""
    code = ("import sys; from hybrid.faces.cli.main import main\n"
            "try:\n    main(['query', 'tailscale', '--mode', 'lexical', '--json'])\n"
            "except SystemExit:\n    pass\n"
            "print([m for m in ('hybrid.faces.cli.eval', 'hybrid.faces.cli.audit', 'hybrid.faces.cli.proposals') "
            "if m in sys.modules], file=sys.stderr)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, HYBRID_HOME=str(home)))
    assert r.stderr.strip().splitlines()[-1] == "[]" and json.loads(r.stdout)
    listed = hybrid_cmd(home, "--help").stdout
    assert all(f"  {name} " in listed for name in ("eval", "audit", "proposals", "query"))
    assert hybrid_cmd(home, "proposals", "--help").returncode == 0
    assert "Measure retrieval quality" in hybrid_cmd(home, "eval", "--help").stdout


def test_index_report_and_json_stdout_only(home, vault):
    r = hybrid_cmd(home, "index", "--json")
    assert r.returncode == 0
    report = json.loads(r.stdout)  # nothing but JSON on stdout
    assert report[0]["unchanged"] == 4 and report[0]["chunks_embedded"] == 0
    r = hybrid_cmd(home, "index")
    assert "4 unchanged" in r.stdout and "0 embedded" in r.stdout


def test_query_json_has_citations(home):
    r = hybrid_cmd(home, "query", '"orders-created"', "--mode", "lexical", "--json")
    notes = json.loads(r.stdout)  # notes, each with its passages
    top = notes[0]["passages"][0]
    assert notes[0]["citation"] == top["citation"]
    assert top["path"] == "work/orders.md" and top["vault"] == "vault"
    assert top["heading_path"] == ["Orders pipeline"] and top["start_line"] == 4
    assert top["lexical_rank"] == 1 and top["uri"].startswith("obsidian://open?vault=vault&file=work%2Forders")
    assert "orders-created" in top["snippet"]


def test_human_output(home):
    r = hybrid_cmd(home, "query", "tailscale", "-n", "1")
    assert r.returncode == 0
    assert "vault:home/network.md:1-" in r.stdout


@pytest.mark.parametrize("args, message", [
    (["query", 'foo "bar'], "unbalanced quote"),
    (["query", "x", "--vault", "nope"], "unknown vault 'nope' (known: vault)"),
    (["query", "x", "--since", "last tuesday"], "bad date"),
    (["get", "../../etc/passwd"], "outside vault"),
    (["get", "missing.md"], "no such note"),
    (["index", "/definitely/not/here"], "does not exist"),
    (["index", "--vault", "nope"], "unknown vault"),
])
def test_bad_input_is_one_clear_line(home, args, message):
    r = hybrid_cmd(home, *args)
    assert r.returncode != 0
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, r.stderr
    assert message in lines[0] and "Traceback" not in r.stderr
    assert r.stdout == ""


def test_get_prints_lines(home):
    r = hybrid_cmd(home, "get", "work/orders.md:4-4")
    assert r.stdout == "# Orders pipeline\n"
    r = hybrid_cmd(home, "get", "work/orders.md:4-6", "--json")
    assert json.loads(r.stdout)["end_line"] == 6


def test_status_and_vault_list(home):
    st = json.loads(hybrid_cmd(home, "status", "--json").stdout)[0]
    assert st["name"] == "vault" and st["notes"] == 4 and st["chunks"] > 0 and st["embedder"] == "hash:64"
    assert st["pending"] == 0 and st["disk_bytes"] > 0
    assert json.loads(hybrid_cmd(home, "vault", "list", "--json").stdout)[0]["name"] == "vault"
    r = hybrid_cmd(home, "vault", "remove", "vault")
    assert r.returncode == 0 and "untouched" in r.stderr
    assert json.loads(hybrid_cmd(home, "status", "--json").stdout) == []


def test_bad_config_file_is_one_line(hybrid_home):
    write(hybrid_home, "config.toml", "[settings]\nchunk_tokens = 'big'\n")
    r = hybrid_cmd(hybrid_home, "status")
    assert r.returncode == 1 and "chunk_tokens" in r.stderr and "Traceback" not in r.stderr
    write(hybrid_home, "config.toml", "[settings\n")
    r = hybrid_cmd(hybrid_home, "status")
    assert r.returncode == 1 and "not valid TOML" in r.stderr


def test_index_path_again_reuses_its_registration(home, vault):
    r = hybrid_cmd(home, "index", str(vault), "--json")
    assert r.returncode == 0 and json.loads(r.stdout)[0]["vault"] == "vault"
    r = hybrid_cmd(home, "index", str(vault), "--name", "other")
    assert r.returncode == 1 and "already registered as vault 'vault'" in r.stderr
