"""`hybrid config` (list, get, set, unset) and shell completion (`hybrid completion SHELL`): every
setting round-trips, the user's file keeps its comments, a refused change leaves it byte for
byte, the lock is `vault add`'s, and completion answers click's protocol in bash, zsh and fish."""
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import write

import hybrid
from hybrid.core import setting_text
from hybrid.core.config import VAULT_SETTINGS, load_config
from hybrid.core.errors import ConfigError
from hybrid.core.settings import NAMES, REINDEX, SETTINGS, Settings
from hybrid.faces.cli.main import main

DEFAULTS = {s.name: s.default for s in SETTINGS}
REPO = Path(hybrid.__file__).resolve().parents[1]


def run(*args, ok=True):
    result = CliRunner().invoke(main, list(args), prog_name="hybrid")
    if ok:
        assert result.exit_code == 0, result.output
    return result


def valid_other(name):
    """A value of setting ``name`` other than its default that the settings table accepts:
    made from the table (its type, choices and check), so a new setting is covered as it lands."""
    default, kind = DEFAULTS[name], setting_text.kind(name)
    candidates = {
        "bool": lambda: [not default],
        "int": lambda: [default + 1, default * 2, 7],
        "float": lambda: [default / 2, default * 2, default + 1.5, 0.5],
        "list": lambda: [["de"], ["x/**", "y/*.md"]],
        "str": lambda: [*setting_text.choices(name), "hash:32", "postgresql", "agent_notes", "http://127.0.0.1:8000/v1",
                        "MY_API_KEY"],
    }[kind]()
    for value in candidates:
        try:
            checked = Settings.from_mapping({name: value}, "test").as_dict()[name]
        except ConfigError:
            continue
        if checked != default:
            return checked
    raise AssertionError(f"no valid non-default value found for {name}: add a candidate")


def as_text(value):
    """How a person types ``value`` on the command line (lists both ways, switches as words)."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, list):
        return ", ".join(value) if len(value) > 1 else setting_text.show(value)
    return str(value)


@pytest.fixture
def notes(tmp_path):
    folder = tmp_path / "notes"
    write(folder, "a.md", "# A\n\nwords\n")
    return folder


# --- every setting round-trips --------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_every_setting_round_trips(hybrid_home, name):
    value = valid_other(name)
    out = run("config", "set", name, as_text(value))
    assert f"set {name} = {setting_text.show(value)}" in out.stderr
    assert json.loads(run("config", "get", name, "--json").stdout) == value
    assert run("config", "get", name).stdout.strip() == setting_text.show(value)
    row = {r["key"]: r for r in json.loads(run("config", "list", "--json").stdout)}[name]
    assert (row["value"], row["source"], row["default"]) == (value, "config", DEFAULTS[name])
    assert load_config().settings.as_dict()[name] == value
    h = hybrid.open()
    assert h.config.settings.as_dict()[name] == value
    h.close()

    out = run("config", "unset", name)
    assert f"unset {name}" in out.stderr and "the default" in out.stderr
    assert json.loads(run("config", "get", name, "--json").stdout) == DEFAULTS[name]
    row = {r["key"]: r for r in json.loads(run("config", "list", "--json").stdout)}[name]
    assert row["source"] == "default"
    assert name not in (hybrid_home / "config.toml").read_text()


@pytest.mark.parametrize("name", VAULT_SETTINGS)
def test_every_vault_setting_round_trips(hybrid_home, notes, name):
    run("vault", "add", str(notes), "--name", "notes")
    value = valid_other(name)
    run("config", "set", name, as_text(value), "--vault", "notes")
    raw = load_config().vaults["notes"]
    assert raw[name] == value and name not in load_config().file_keys
    row = json.loads(run("config", "get", name, "--vault", "notes", "--json").stdout)
    vault = load_config().vault("notes")
    want = {"include": value, "exclude": value, "agent_exclude": value, "embedder": value,
            "store": value, "exclude_sections": value, "exclude_blocks": value, "ocr": value,
            "ocr_languages": value}[name]
    assert row == want and getattr(vault, name) == (value if name != "include" else value)
    listed = {r["key"]: r for r in json.loads(run("config", "list", "--vault", "notes", "--json").stdout)}
    assert listed[name]["source"] == "vault" and listed[name]["value"] == want
    everyone = {r["key"]: r for r in json.loads(run("config", "list", "--json").stdout)}
    assert everyone[name]["vaults"] == {"notes": value} and everyone[name]["source"] == "default"

    run("config", "unset", name, "--vault", "notes")
    assert name not in load_config().vaults["notes"]
    assert load_config().vaults["notes"]["path"] == str(notes.resolve())


def test_a_vaults_exclude_adds_to_the_setting(hybrid_home, notes):
    run("vault", "add", str(notes), "--name", "notes")
    run("config", "set", "exclude", "drafts/**")
    run("config", "set", "exclude", '["archive/**"]', "--vault", "notes")
    assert json.loads(run("config", "get", "exclude", "--vault", "notes", "--json").stdout) == \
        ["drafts/**", "archive/**"] == load_config().vault("notes").exclude


def test_a_vaults_exclude_sections_add_to_the_setting(hybrid_home, notes):
    run("vault", "add", str(notes), "--name", "notes")
    run("config", "set", "exclude_sections", "Journal prompts, Template*")
    out = run("config", "set", "exclude_sections", "Habit tracker", "--vault", "notes")
    assert "re-chunks every note" in out.stderr
    assert json.loads(run("config", "get", "exclude_sections", "--vault", "notes", "--json").stdout) == \
        ["Journal prompts", "Template*", "Habit tracker"] == load_config().vault("notes").exclude_sections
    bad = run("config", "set", "exclude_blocks", "two words", "--vault", "notes", ok=False)
    assert bad.exit_code == 1 and "one word each" in bad.output


def test_list_shows_each_source(hybrid_home, notes):
    run("vault", "add", str(notes), "--name", "notes")
    run("config", "set", "rrf_k", "10")  # the default, written: the file holds it
    run("config", "set", "embedder", "hash:64", "--vault", "notes")
    text = run("config", "list").stdout
    lines = {line.split(" =")[0]: line for line in text.splitlines()[1:]}
    assert lines["rrf_k"].endswith("# config file")
    assert lines["chunk_tokens"].endswith("# default")
    assert lines["embedder"].endswith('# default; vault notes has "hash:64"')
    assert set(lines) == set(NAMES)


# --- values are read by type and checked by the table -----------------------------------------
@pytest.mark.parametrize("name, text, value", [
    ("fuzzy", "no", False), ("fuzzy", "ON", True), ("context_header", "false", False),
    ("chunk_tokens", "5_000", 5000), ("rrf_k", "60", 60), ("rrf_k", "2.5", 2.5),
    ("exclude", "", []), ("exclude", "a/**, b/**", ["a/**", "b/**"]),
    ("exclude", '["a/**", "b, c"]', ["a/**", "b, c"]), ("spell_languages", "en,de", ["en", "de"]),
    ("lexical_unit", "chunk", "chunk"),
])
def test_values_are_read_by_type(hybrid_home, name, text, value):
    run("config", "set", name, text)
    assert load_config().settings.as_dict()[name] == value


@pytest.mark.parametrize("name", ["OPENAI_API_KEY", "HF_TOKEN", "JINA_API_KEY", "AWS_SECRET_ACCESS_KEY",
                                  "MY_LLM_KEY", "openai_api_key", "GITHUB_PAT", "DB_PASSWORD", "OPENAI_APIKEY",
                                  "OPENAI_API_KEY_2", "NPM_AUTH", "MY_CREDENTIALS", "TOKEN"])
def test_a_key_variable_is_named_by_its_last_word(hybrid_home, name):
    run("config", "set", "openai_api_key_env", name)
    assert load_config().settings.openai_api_key_env == name


@pytest.mark.parametrize("folder", ["agent_learnings", "Inbox/agent notes", "console", "comms", "com10",
                                    "con-tacts", "v1.2/inbox", "Входящие", "été (agents)"])
def test_a_proposals_folder_obsidian_and_every_system_take(hybrid_home, folder):
    run("config", "set", "proposals_folder", folder)
    assert load_config().settings.proposals_folder == folder


@pytest.mark.parametrize("args, message", [
    (["set", "chunk_tokenz", "3"], "unknown setting 'chunk_tokenz' (did you mean 'chunk_tokens'?)"),
    (["get", "rerank_modle"], "unknown setting 'rerank_modle' (did you mean 'rerank_model'?)"),
    (["set", "zzz", "3"], "unknown setting 'zzz' (`hybrid config list` shows them all)"),
    (["set", "rrf_k", "-1"], "setting 'rrf_k' must be like 10 (a number, 0 or more), got -1"),
    (["set", "chunk_tokens", "12.5"], "setting 'chunk_tokens' must be like 128 (a whole number, 0 or more)"),
    (["set", "chunk_tokens", "big"], "got 'big'"),
    (["set", "ann_recall", "1.5"], "must be like 0.99 (a fraction above 0, at most 1), got 1.5"),
    (["set", "convert_timeout", "0"], "must be a number of seconds, more than 0"),
    (["set", "fuzzy", "maybe"], "setting 'fuzzy' must be like True (true or false), got 'maybe'"),
    (["set", "vector_storage", "int4"], "must be one of float32, float16, sq8, got 'int4'"),
    (["set", "spell_languages", "en, xx"], "must be a list like [\"en\", \"de\"]"),
    (["set", "exclude", "[a"], "is not a TOML or JSON array"),
    (["set", "embedder", ""], "setting 'embedder' must be like"),
    (["set", "store", "postgresql://me:hunter2@db/kb"], "holds a password"),
    (["set", "proposals_folder", "../out"], "a folder inside the vault"),
    (["set", "proposals_folder", "inbox\n\"x"], "a folder inside the vault"),   # a newline and a quote
    (["set", "proposals_folder", "in|box"], "a folder inside the vault"),
    # characters that break an Obsidian link to a note in it, names Windows reserves, and a
    # trailing dot or space (Windows drops them): the folder would not sync to every system
    (["set", "proposals_folder", "in#box"], "a folder inside the vault"),
    (["set", "proposals_folder", "in^box"], "a folder inside the vault"),
    (["set", "proposals_folder", "in[box]"], "a folder inside the vault"),
    (["set", "proposals_folder", "con"], "a folder inside the vault"),
    (["set", "proposals_folder", "inbox/NUL"], "a folder inside the vault"),
    (["set", "proposals_folder", "aux.d"], "a folder inside the vault"),
    (["set", "proposals_folder", "Com1"], "a folder inside the vault"),
    (["set", "proposals_folder", "lpt9/x"], "a folder inside the vault"),
    (["set", "proposals_folder", "inbox."], "a folder inside the vault"),
    (["set", "proposals_folder", "inbox /agents"], "a folder inside the vault"),
    (["set", "openai_api_key_env", "PATH"], "a variable name like OPENAI_API_KEY"),  # $PATH sent as the key
    (["set", "rerank_api_key_env", "HOME"], "a variable name like JINA_API_KEY"),
    # KEY, TOKEN, AUTH … inside a word, or a word before the last, is not a name saying it holds a key
    (["set", "openai_api_key_env", "monkey"], "a variable name like OPENAI_API_KEY"),
    (["set", "openai_api_key_env", "KEYBOARD"], "a variable name like OPENAI_API_KEY"),
    (["set", "openai_api_key_env", "SSH_AUTH_SOCK"], "a variable name like OPENAI_API_KEY"),  # a socket's path
    (["set", "openai_api_key_env", "SSL_KEY_FILE"], "a variable name like OPENAI_API_KEY"),
    (["set", "openai_api_key_env", "PASSWORD_STORE_DIR"], "a variable name like OPENAI_API_KEY"),
    (["set", "openai_api_key_env", "GOOGLE_APPLICATION_CREDENTIALS_FILE"], "a variable name like OPENAI_API_KEY"),
    (["set", "rerank_api_key_env", "GIT_ASKPASS"], "a variable name like JINA_API_KEY"),  # a program's path
    (["set", "rerank_api_key_env", "TOKENIZERS_PARALLELISM"], "a variable name like JINA_API_KEY"),
    (["set", "rrf_k", "3", "--vault", "notes"], "'rrf_k' is not a per-vault setting; a vault may hold"),
    (["set", "path", "/elsewhere", "--vault", "notes"], "`hybrid vault move NAME PATH` changes it"),
    (["set", "path", "/elsewhere"], "`hybrid vault move NAME PATH` changes it"),
    (["set", "kind", "slack", "--vault", "notes"], "'kind' is a vault's, not a setting"),
    (["set", "include", "x/**", "--vault", "nope"], "unknown vault 'nope' (known: notes)"),
    (["set", "store", "mysql://x", "--vault", "notes"], "store"),
    (["unset", "rrf_k", "--vault", "notes"], "'rrf_k' is not a per-vault setting"),
])
def test_a_refused_change_is_one_line_and_leaves_the_file_byte_identical(hybrid_home, notes, args, message):
    run("vault", "add", str(notes), "--name", "notes")
    write(hybrid_home, "config.toml", (hybrid_home / "config.toml").read_text() + "\n# mine\n")
    before = (hybrid_home / "config.toml").read_bytes()
    stat = os.stat(hybrid_home / "config.toml")
    result = run("config", *args, ok=False)
    assert result.exit_code == 1
    assert result.stderr.startswith("error: ") and len(result.stderr.strip().splitlines()) == 1
    assert message in result.stderr
    assert (hybrid_home / "config.toml").read_bytes() == before
    assert os.stat(hybrid_home / "config.toml").st_mtime_ns == stat.st_mtime_ns  # not even rewritten


@pytest.mark.parametrize("text", ["[settings\nrrf_k = 3\n", "[settings]\nrrf_k = 'big'\n",
                                  "\xff\xfe not text", "[vaults]\nnotes = 3\n"])
@pytest.mark.parametrize("args", [["set", "rrf_k", "4"], ["unset", "rrf_k"], ["list"], ["get", "rrf_k"]])
def test_a_broken_config_file_is_a_clear_error_and_stays_untouched(hybrid_home, text, args):
    path = hybrid_home / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8", "surrogateescape") if "\xff" not in text else b"\xff\xfe not")
    before = path.read_bytes()
    result = run("config", *args, ok=False)
    assert result.exit_code == 1 and result.stderr.startswith("error: ")
    assert str(path) in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert path.read_bytes() == before


# --- the user's file keeps its comments -----------------------------------------------------------
HAND_WRITTEN = """\
# my hybrid config: written by hand

[settings]
# tuned on my notes
rrf_k = 60   # flatter fusion

chunk_tokens = 200

# the main vault
[vaults.notes]
path = "{notes}"   # synced by syncthing
exclude = ["archive/**"]  # old stuff
"""


def test_comments_and_blank_lines_survive_set_unset_and_vault_add(hybrid_home, notes, tmp_path):
    original = HAND_WRITTEN.format(notes=notes.resolve())
    write(hybrid_home, "config.toml", original)
    path = hybrid_home / "config.toml"

    run("config", "set", "fuzzy", "off")
    assert path.read_text() == original.replace("chunk_tokens = 200\n", "chunk_tokens = 200\nfuzzy = false\n")
    run("config", "unset", "fuzzy")
    assert path.read_text() == original

    run("config", "set", "rrf_k", "30")
    assert "rrf_k = 30   # flatter fusion\n" in path.read_text()
    run("config", "set", "rrf_k", "60")
    assert path.read_text() == original

    run("config", "set", "exclude", "archive/**, drafts/**", "--vault", "notes")
    assert 'exclude = ["archive/**", "drafts/**"]  # old stuff\n' in path.read_text()
    run("config", "set", "exclude", "archive/**", "--vault", "notes")
    assert path.read_text() == original

    other = tmp_path / "other"
    other.mkdir()
    run("vault", "add", str(other), "--name", "other")
    assert path.read_text() == original + f'\n[vaults.other]\npath = "{other.resolve()}"\n'
    run("vault", "remove", "other")
    assert path.read_text() == original

    run("config", "unset", "chunk_tokens")
    assert path.read_text() == original.replace("chunk_tokens = 200\n", "")
    assert "# tuned on my notes\nrrf_k = 60   # flatter fusion\n" in path.read_text()


def test_settings_table_is_added_above_the_vaults(hybrid_home, notes):
    run("vault", "add", str(notes), "--name", "notes")
    run("config", "set", "rrf_k", "30")
    text = (hybrid_home / "config.toml").read_text()
    assert text.startswith("[settings]\nrrf_k = 30\n\n[vaults.notes]\n")
    assert load_config().settings.rrf_k == 30 and "notes" in load_config().vaults


def test_a_new_config_file_is_plain_toml(hybrid_home):
    run("config", "set", "exclude", "a/**, b/**")
    assert (hybrid_home / "config.toml").read_text() == '[settings]\nexclude = ["a/**", "b/**"]\n'


# --- what a change asks of the indexes ----------------------------------------------------------------
def test_every_setting_that_asks_something_names_a_known_reason():
    codes = {f.metadata["reindex"] for f in dataclasses.fields(Settings)}
    assert codes - {""} == set(REINDEX)  # none unknown, none unused


@pytest.mark.parametrize("name, words", [
    ("embedder", "must be embedded again: run `hybrid index --reembed`"),
    ("chunk_tokens", "re-chunks every note of every vault"),
    ("chunk_overlap", "re-chunks"), ("context_header", "re-chunks"),
    ("vector_storage", "rebuilds the vector index of every vault from the stored vectors"),
    ("ann_threshold", "(no re-embedding)"),
    ("ann_recall", "applies when an approximate (IVF) vector index is next built"),
    ("include", "adds and removes files of every vault"), ("exclude", "adds and removes files"),
    ("max_file_bytes", "those skipped under the old value are tried again"),
    ("agent_exclude", "agents' index of every vault is rebuilt"), ("private_tags", "agents"),
    ("store", "applies to vaults registered from now on"),
])
def test_a_change_that_needs_reindexing_says_so(hybrid_home, notes, tmp_path, name, words):
    run("vault", "add", str(notes), "--name", "notes")
    (tmp_path / "second").mkdir()
    run("vault", "add", str(tmp_path / "second"), "--name", "second")
    out = run("config", "set", name, as_text(valid_other(name))).stderr
    assert "note: " in out and words in out
    again = run("config", "set", name, as_text(valid_other(name))).stderr
    assert "note: " not in again  # nothing changed the second time
    assert "note: " in run("config", "unset", name).stderr


def test_query_time_settings_ask_nothing(hybrid_home, notes):
    run("vault", "add", str(notes), "--name", "notes")
    for name in ("rrf_k", "fuzzy", "snippet_chars", "lexical_unit"):
        assert "note: " not in run("config", "set", name, as_text(valid_other(name))).stderr


def test_the_note_names_the_vaults_a_change_reaches(hybrid_home, notes, tmp_path):
    run("vault", "add", str(notes), "--name", "notes")
    (tmp_path / "second").mkdir()
    run("vault", "add", str(tmp_path / "second"), "--name", "second")
    run("config", "set", "embedder", "hash:64", "--vault", "second")
    out = run("config", "set", "embedder", "hash:32").stderr
    assert "vault notes must be embedded again: run `hybrid index --vault notes --reembed`" in out
    out = run("config", "set", "embedder", "hash:16", "--vault", "second").stderr
    assert "vault second must be embedded again: run `hybrid index --vault second --reembed`" in out
    out = run("config", "set", "store", "postgresql", "--vault", "second").stderr
    assert "vault second now keeps its index in postgresql" in out


# --- the lock: `config set` and `vault add` in other processes ----------------------------------------
@pytest.mark.slow  # subprocesses
def test_concurrent_config_set_and_vault_add_both_land(hybrid_home, tmp_path):
    env = dict(os.environ, HYBRID_HOME=str(hybrid_home))
    folders = [tmp_path / f"v{i}" for i in range(4)]
    for f in folders:
        f.mkdir()
    sets = [("rrf_k", "33"), ("chunk_tokens", "99"), ("fuzzy", "off"), ("exclude", "x/**")]
    cmds = [["vault", "add", str(f), "--name", f.name] for f in folders] + [["config", "set", k, v] for k, v in sets]
    procs = [subprocess.Popen([sys.executable, "-m", "hybrid", *c], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for c in cmds]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    cfg = load_config()
    assert sorted(cfg.vaults) == ["v0", "v1", "v2", "v3"]
    assert (cfg.settings.rrf_k, cfg.settings.chunk_tokens, cfg.settings.fuzzy, cfg.settings.exclude) == \
        (33, 99, False, ("x/**",))


# --- shell completion ----------------------------------------------------------------------------------
def complete(shell, words):
    """What `hybrid` answers click's completion protocol for ``words`` (the last one being
    completed), as a shell's script asks it."""
    env = {"_HYBRID_COMPLETE": f"{shell}_complete", "COMP_WORDS": " ".join(words),
           # zsh's script sends the index of the word completed, fish's the word itself
           "COMP_CWORD": str(len(words) - 1) if shell == "zsh" else words[-1]}
    result = CliRunner().invoke(main, [], prog_name="hybrid", env=env)
    assert result.exit_code == 0, result.output
    return result.stdout


def registered(hybrid_home, notes, tmp_path):
    run("vault", "add", str(notes), "--name", "notes")
    (tmp_path / "work").mkdir()
    run("vault", "add", str(tmp_path / "work"), "--name", "work-kb")


def test_zsh_and_fish_completion_answer_setting_names_values_and_vaults(hybrid_home, notes, tmp_path):
    registered(hybrid_home, notes, tmp_path)
    zsh = complete("zsh", ["hybrid", "config", "get", "chunk_"]).splitlines()
    assert zsh[:3] == ["plain", "chunk_tokens", setting_text.summary("chunk_tokens")]
    assert "chunk_overlap" in zsh
    fish = complete("fish", ["hybrid", "config", "set", "vector_storage", ""]).splitlines()
    assert fish == ["plain,float32", "plain,float16", "plain,sq8"]
    assert complete("fish", ["hybrid", "config", "set", "fuzzy", ""]).splitlines() == ["plain,true", "plain,false"]
    assert complete("zsh", ["hybrid", "query", "--vault", "w"]).splitlines() == ["plain", "work-kb", "_"]
    for words in (["hybrid", "index", "--vault", ""], ["hybrid", "vault", "remove", ""],
                  ["hybrid", "config", "set", "--vault", ""], ["hybrid", "proposals", "list", "--vault", ""],
                  ["hybrid", "get", "x", "--vault", ""]):
        assert complete("fish", words).splitlines() == ["plain,notes", "plain,work-kb"], words
    keys = complete("fish", ["hybrid", "config", "set", "--vault", "notes", ""]).splitlines()
    assert sorted(k.split(",")[1].split("\t")[0] for k in keys) == sorted(VAULT_SETTINGS)


def test_completion_scripts_for_each_shell(hybrid_home):
    assert "_HYBRID_COMPLETE=bash_complete" in run("completion", "bash").stdout
    assert "compdef _hybrid_completion hybrid" in run("completion", "zsh").stdout
    assert "complete --no-files --command hybrid" in run("completion", "fish").stdout
    assert run("completion", "tcsh", ok=False).exit_code == 2


def test_every_vault_name_taken_completes_vault_names():
    """Each --vault option (and each argument that names a registered vault) of every command,
    the lazily loaded ones included, completes vault names: a new one must too."""
    from hybrid.faces.cli.complete import complete_vault
    named_args = {("vault", "remove", "name"), ("vault", "rename", "old"), ("vault", "move", "name"),
                  ("source", "remove", "name")}
    seen = set()

    def walk(group, path):
        ctx = main.make_context("hybrid", [], resilient_parsing=True)
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            for p in command.params:
                takes_vault = "--vault" in getattr(p, "opts", ()) or (*path, name, p.name) in named_args
                if takes_vault:
                    seen.add((*path, name, p.name))
                    assert p._custom_shell_complete is complete_vault, (*path, name, p.name)
            if hasattr(command, "list_commands"):
                walk(command, (*path, name))

    walk(main, ())
    assert named_args <= seen and len(seen) > 15


@pytest.mark.slow  # a real bash and subprocesses
def test_bash_completion_really_works(hybrid_home, notes, tmp_path):
    registered(hybrid_home, notes, tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "hybrid"  # the console script, pointing at this checkout
    exe.write_text(f"#!/bin/sh\nexec '{sys.executable}' -c 'from hybrid.faces.cli.main import main; "
                   f"main(prog_name=\"hybrid\")' \"$@\"\n")
    exe.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", HYBRID_HOME=str(hybrid_home),
               PYTHONPATH=str(REPO))

    def tab(line):
        script = ('source <(hybrid completion bash)\n'
                  f'COMP_LINE="{line}"; COMP_POINT=${{#COMP_LINE}}\n'
                  f'read -ra COMP_WORDS <<< "$COMP_LINE"\n'
                  + ('COMP_WORDS+=("")\n' if line.endswith(" ") else "")
                  + 'COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))\n'
                  '_hybrid_completion hybrid\n'
                  'printf "%s\\n" "${COMPREPLY[@]}"\n')
        r = subprocess.run(["bash", "--norc", "-c", script], env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return r.stdout.split()

    assert {"config", "completion", "index", "query", "vault"} <= set(tab("hybrid "))
    assert tab("hybrid con") == ["config"]
    assert tab("hybrid config ") == ["get", "list", "set", "unset"]
    assert tab("hybrid config set chunk_") == ["chunk_tokens", "chunk_overlap"]
    assert tab("hybrid config set lexical_unit ") == ["chunk", "section", "both"]
    assert tab("hybrid index --vault ") == ["notes", "work-kb"]
    assert tab("hybrid vault remove wo") == ["work-kb"]


@pytest.mark.slow  # a subprocess
def test_completion_opens_no_index_and_loads_no_model(hybrid_home, notes, tmp_path):
    registered(hybrid_home, notes, tmp_path)
    code = ("import os, sys\n"
            "os.environ.update(_HYBRID_COMPLETE='bash_complete', COMP_WORDS='hybrid index --vault ', "
            "COMP_CWORD='3')\n"
            "from hybrid.faces.cli.main import main\n"
            "try:\n    main(prog_name='hybrid')\nexcept SystemExit:\n    pass\n"
            "heavy = ('faiss', 'tantivy', 'onnxruntime', 'torch', 'sqlite3', 'psycopg', 'numpy')\n"
            "print('LOADED', [m for m in heavy if m in sys.modules])\n")
    r = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, HYBRID_HOME=str(hybrid_home)),
                       capture_output=True, text=True, timeout=60, cwd=REPO)
    assert "plain,notes" in r.stdout and "plain,work-kb" in r.stdout
    assert "LOADED []" in r.stdout
    assert not (hybrid_home / "data").exists() or not any((hybrid_home / "data").rglob("*.sqlite"))
