"""Hardening round 2: agents never see what the owner hid. Each test reproduces a break found
by the second adversarial pass (stale privacy, a front block that does not parse, Unicode
paths and tags, a vault nested in another's excluded folder, secrets in tags, cosine scores
that confirm a redacted secret) through a real MCP client session and the Python API, on both
stores. Logic-level: the `hash:` embedder stands in for the model (a real-model check of the
cosine leak is marked slow)."""
import json
import unicodedata

import anyio
import numpy as np
import pytest
from click.testing import CliRunner
from helpers import ALL_STORES, write
from mcp import Client
from mcp_types import Implementation
from secrets_fixtures import fake_secrets

from hybrid.faces.mcp import build_server
from hybrid.retrieval.result import answer_passages

STORES = ALL_STORES
GITHUB = next(c for c in fake_secrets() if c["name"].startswith("github"))


def call(h, tool, args):
    async def main():
        async with Client(build_server(h), client_info=Implementation(name="probe", version="1")) as c:
            return await c.call_tool(tool, args)
    return anyio.run(main)


def agent_paths(h, query, **kw):
    res = call(h, "search", {"query": query, "top_k": 20, **kw})
    assert not res.is_error, res.content[0].text
    return {x["path"] for x in answer_passages(res.structured_content)}


def vault_option(h, name, key, value):
    """Set a per-vault option in the config file (the handle reloads it)."""
    import tomllib

    import tomlkit
    data = tomllib.loads(h.config.path.read_text())
    data["vaults"][name][key] = value
    h.config.path.write_text(tomlkit.dumps(data))
    h.refresh()


def refused(h, path):
    res = call(h, "get_note", {"path": path})
    return res.is_error and "is not a note you can read" in res.content[0].text


@pytest.fixture
def home(tmp_path, open_h):
    def make(notes: dict[str, str], **settings):
        v = tmp_path / "vault"
        for rel, text in notes.items():
            write(v, rel, text)
        h = open_h(tmp_path / "home", **{"embedder": "hash:64", **settings})
        h.add_vault(v, "v")
        h.index()
        return h, v
    return make


# --- stale privacy: the file that is read is judged -------------------------------------------
@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_a_note_made_private_after_indexing_is_hidden_at_once(home):
    h, v = home({"plans.md": "# Plans\n\nquokka garden plans\n", "other.md": "# Other\n\nquokka notes\n"})
    assert "plans.md" in agent_paths(h, "quokka garden")
    write(v, "plans.md", "---\nprivate: true\n---\n# Plans\n\nquokka garden plans and the zorvatrex dose\n")
    # no index run since (the stdio server of the README's setup has no watcher)
    res = call(h, "get_note", {"path": "plans.md"})
    assert res.is_error and "zorvatrex" not in res.content[0].text
    assert refused(h, "plans.md") and refused(h, "Plans")  # by path and by title
    for mode in ("lexical", "vector", "hybrid"):
        assert "plans.md" not in agent_paths(h, "quokka garden", mode=mode)
    assert "other.md" in agent_paths(h, "quokka")
    assert [x.path for x in h.search("quokka garden", mode="lexical")][0] == "plans.md"  # the owner


def test_a_new_private_tag_or_deleted_file_is_judged_as_it_is_now(home):
    h, v = home({"a.md": "# A\n\nquokka alpha\n", "b.md": "# B\n\nquokka beta\n"})
    write(v, "a.md", "# A\n\nquokka alpha #private/health\n")
    (v / "b.md").unlink()
    assert agent_paths(h, "quokka") == set()
    assert refused(h, "a.md")


# --- a front block that cannot be read fails closed -------------------------------------------
BROKEN = {
    "quote.md": '---\ntitle: "unclosed\nprivate: true\n---\n# Diary\n\nquokka diary one\n',
    "tab.md": "---\ntitle: x\n\tprivate: true\n---\n# Diary\n\nquokka diary two\n",
    "huge.md": "---\nprivate: true\nblob: " + "x" * (70 * 1024) + "\n---\n# Diary\n\nquokka diary three\n",
    "late.md": "---\nprivate: true\n" + "k: v\n" * 2100 + "---\n# Diary\n\nquokka diary four\n",
    "open.md": "---\nprivate: true\n\n# Diary\n\nquokka diary five\n",
}


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_an_unreadable_front_block_hides_the_note_from_agents(home):
    h, v = home({**BROKEN, "fine.md": "---\ntitle: Fine\n---\n# Fine\n\nquokka diary public\n"})
    assert agent_paths(h, "quokka diary") == {"fine.md"}
    for mode in ("lexical", "vector"):
        assert agent_paths(h, "quokka diary", mode=mode) <= {"fine.md"}
    for path in BROKEN:
        assert refused(h, path), path
    assert call(h, "list_vaults", {}).structured_content["vaults"][0]["notes"] == 1
    # the owner still finds every one of them
    owner = {x.path for x in h.search("quokka diary", top_k=20, mode="lexical")}
    assert owner == {*BROKEN, "fine.md"}
    hidden = h.agent_hidden("v")["front block unreadable"]
    assert sorted(p.split(" ")[0] for p in hidden) == sorted(BROKEN)
    assert any("malformed frontmatter" in p for p in hidden) and any("closes after line" in p for p in hidden)


def test_status_names_the_notes_hidden_for_their_front_block(home, store_kind):
    from hybrid.faces.cli.main import main
    h, v = home({"quote.md": BROKEN["quote.md"], "fine.md": "# Fine\n\nquokka\n"})
    out = CliRunner().invoke(main, ["status"], env={"HYBRID_HOME": str(h.config.path.parent)})
    assert out.exit_code == 0, out.output
    assert "agents see 1 notes (1 hidden: 1 front block unreadable)" in out.stdout
    assert "hidden from agents until their front block is fixed: quote.md (malformed frontmatter" in out.stdout
    js = CliRunner().invoke(main, ["status", "--json"], env={"HYBRID_HOME": str(h.config.path.parent)})
    row = json.loads(js.stdout)[0]
    assert row["agent_hidden"] == {"front block unreadable": 1} and row["front_unreadable"][0].startswith("quote.md")


def test_a_front_block_that_parses_again_is_shown_again(home):
    h, v = home({"quote.md": BROKEN["quote.md"]})
    assert agent_paths(h, "quokka diary") == set()
    write(v, "quote.md", "---\ntitle: Diary\n---\n# Diary\n\nquokka diary one\n")
    h.index()
    assert agent_paths(h, "quokka diary") == {"quote.md"}


def test_a_front_block_cannot_forge_the_reserved_property(home):
    h, v = home({"a.md": "---\nhybrid:front_unreadable: no\n---\n# A\n\nquokka\n"})
    assert agent_paths(h, "quokka") == {"a.md"}


# --- Unicode: paths, globs and tags in NFC, case-folded ----------------------------------------
def test_a_decomposed_folder_is_hidden_by_a_composed_glob(home):
    nfd = unicodedata.normalize("NFD", "Privé")
    assert nfd != "Privé"
    h, v = home({f"{nfd}/journal.md": "# J\n\nquokka secret life\n", "pub.md": "# P\n\nquokka\n"},
                agent_exclude=["Privé/**"])
    assert agent_paths(h, "quokka") == {"pub.md"}
    assert refused(h, f"{nfd}/journal.md")
    h.override(agent_exclude=["PRIVÉ"])  # a bare folder name, another case
    assert agent_paths(h, "quokka") == {"pub.md"}


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
@pytest.mark.parametrize("written", ["#личный", "#Личный", "#ЛИЧНЫЙ/здоровье",
                                     "#" + unicodedata.normalize("NFD", "Личный")])
def test_a_private_tag_in_any_script_and_case(home, written):
    h, v = home({"d.md": f"# D\n\nquokka {written} notes\n", "pub.md": "# P\n\nquokka\n"},
                private_tags=["личный"])
    assert agent_paths(h, "quokka") == {"pub.md"}
    assert refused(h, "d.md")


def test_the_decomposed_form_differs():
    assert unicodedata.normalize("NFD", "Личный") != "Личный"  # й decomposes: the case above is real


def test_tags_in_any_script_are_found():
    from hybrid.sources.markdown import parse_note
    note = parse_note("a.md", "#日本語 and #Privé/x, #café. #🦊 #1984 #y1984 (#inner) #a.b end")
    assert note.tags == ["日本語", "privé/x", "café", "🦊", "y1984", "a"]


# --- a vault inside another vault's excluded folder --------------------------------------------
@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_a_nested_vault_keeps_the_outer_vaults_exclusions(tmp_path, open_h):
    notes = tmp_path / "notes"
    write(notes, "journal/2026-01-02.md", "# Jan 2\n\nquokka diary entry\n")
    write(notes, "work/plan.md", "# Plan\n\nquokka work plan\n")
    h = open_h(tmp_path / "home", embedder="hash:64")
    h.add_vault(notes, "notes")
    h.add_vault(notes / "journal", "journal")
    vault_option(h, "notes", "agent_exclude", ["journal/**"])
    h.index()
    assert agent_paths(h, "quokka", vaults=["journal"]) == set()
    res = call(h, "get_note", {"path": "2026-01-02.md", "vault": "journal"})
    assert res.is_error
    assert agent_paths(h, "quokka") == {"work/plan.md"}
    assert {x.path for x in h.search("quokka diary", vaults=["journal"])} == {"2026-01-02.md"}  # owner


def test_an_inner_vaults_exclusions_hold_in_the_outer_vault(tmp_path, open_h):
    notes = tmp_path / "notes"
    write(notes, "team/secret/x.md", "# X\n\nquokka inner secret\n")
    write(notes, "team/open.md", "# O\n\nquokka open\n")
    h = open_h(tmp_path / "home", embedder="hash:64")
    h.add_vault(notes, "notes")
    h.add_vault(notes / "team", "team")
    vault_option(h, "team", "agent_exclude", ["secret"])
    h.index()
    assert agent_paths(h, "quokka", vaults=["notes"]) == {"team/open.md"}
    assert agent_paths(h, "quokka", vaults=["team"]) == {"open.md"}


# --- secrets in tags ---------------------------------------------------------------------------
def test_a_secret_in_a_tag_is_redacted_everywhere_an_agent_looks(home):
    tag = GITHUB["secret"]
    h, v = home({"ci.md": f"# CI\n\nquokka runner #{tag} #ops\n", "other.md": "# O\n\n#ghp_notes quokka\n"})
    res = call(h, "search", {"query": "quokka runner", "top_k": 5})
    blob = (json.dumps(res.structured_content) + res.content[0].text).lower()
    assert tag.lower() not in blob and "ops" in blob  # tags are stored lower-cased
    listed = call(h, "search", {"query": "", "tags": ["ops"]})
    assert tag.lower() not in json.dumps(listed.structured_content).lower()
    # filtering by the secret confirms nothing, and the suggestions never show it
    probe = call(h, "search", {"query": "quokka", "tags": [tag.lower()]})
    assert probe.is_error and "no note carries tag" in probe.content[0].text  # as for a tag nobody has
    for part in (tag[:10].lower(), "ghp"):
        near = call(h, "search", {"query": "quokka", "tags": [part]})
        assert near.is_error and tag.lower() not in near.content[0].text.lower()
    assert "ghp_notes" in near.content[0].text  # suggestions still come, from the tags an agent may see
    assert tag.lower() in {t for x in h.search("quokka runner") for t in x.tags}  # the owner sees it
    # nor does a search for it find the note (its tags are indexed for agents redacted too)
    found = call(h, "search", {"query": tag.lower(), "mode": "lexical", "top_k": 5, "passages": True})
    assert all(x["path"] != "ci.md" for x in answer_passages(found.structured_content))


# --- cosine scores do not depend on a redacted secret -----------------------------------------
SECRET_NOTE = "# Wifi\n\nThe router admin login.\npassword: falconorbit77\nChange it yearly.\n"


def test_an_agents_vector_scores_ignore_the_redacted_secret(home):
    h, v = home({"wifi.md": SECRET_NOTE, "other.md": "# Other\n\npassword policy for guests\n"})
    emb = h.embedder("hash:64")
    wifi = [x for x in h.search("falconorbit77", mode="vector", top_k=5) if x.path == "wifi.md"][0]
    rows = answer_passages(call(h, "search", {"query": "falconorbit77", "mode": "vector", "top_k": 5,
                                              "passages": True}).structured_content)
    shown = next(x for x in rows if x["path"] == "wifi.md")
    assert "falconorbit77" not in json.dumps(rows)
    redacted = call(h, "get_note", {"path": "wifi.md"}).structured_content["text"]
    assert "falconorbit77" not in redacted and "[redacted secret]" in redacted
    # the agent's cosine is that of the query with the redacted text, not with the secret's
    text = "Wifi\n" + redacted.strip("\n")  # the note is one chunk, embedded under its title
    expect = float(emb.embed_query("falconorbit77") @ emb.embed_documents([text])[0])
    assert shown["vector_score"] == pytest.approx(expect, abs=1e-5)
    assert wifi.vector_score > shown["vector_score"]  # the owner's vector holds the secret's word
    for guess in ("falconorbit77", "falconorbit76", "hunter2"):
        got = call(h, "search", {"query": f"password: {guess}", "mode": "vector", "top_k": 5, "passages": True})
        score = {x["path"]: x["vector_score"] for x in answer_passages(got.structured_content)}["wifi.md"]
        q = emb.embed_query(f"password: {guess}")
        assert score == pytest.approx(float(q @ emb.embed_documents([text])[0]), abs=1e-5)


def test_a_redacted_chunk_without_its_vector_gets_no_vector_score(home, store_kind):
    """Until the redacted text is embedded, the chunk is left out of the agent's vector arm
    (fail closed), and still found by its redacted words."""
    h, v = home({"wifi.md": SECRET_NOTE})
    store = h.session.store(h.config.vault("v"))
    model = store.embedder_id
    assert store.catalog.redacted_ids() and store.catalog.redacted_vectors(model)
    missing = [i for i, _, _ in store.catalog.redacted_vectors(model)]
    if store_kind != "postgresql":  # the SQLite ledger (a local or a Milvus vault)
        store.catalog.db.execute("DELETE FROM embeddings WHERE text_hash IN (SELECT embed_hash FROM agent_redacted)")
    else:
        store.catalog.q("DELETE FROM hybrid_embeddings WHERE text_hash IN (SELECT agent_embed_hash FROM "
                        "hybrid_chunks WHERE agent_embed_hash IS NOT NULL)")
    h.session._hidden = type(h.session._hidden)()  # forget what was loaded (a test edited the ledger)
    got = answer_passages(call(h, "search", {"query": "router admin login", "mode": "vector", "top_k": 5,
                                             "passages": True}).structured_content)
    assert not any(x["chunk_id"] in missing for x in got)
    assert "wifi.md" in agent_paths(h, "router admin login", mode="lexical")


@pytest.mark.slow
def test_near_guesses_of_a_redacted_password_score_like_any_guess(tmp_path, minilm):
    """The reported leak, with the real model: the owner's cosine ranks near-guesses of the
    password above common passwords; the agent's scores are those of the redacted text, so they
    say nothing about which guess is closer."""
    import hybrid
    v = tmp_path / "vault"
    write(v, "wifi.md", SECRET_NOTE)
    write(v, "other.md", "# Garden\n\nTomatoes need sun and water.\n")
    h = hybrid.open(tmp_path / "home", embedders=[minilm], embedder="minilm")
    h.add_vault(v, "v")
    h.index()
    guesses = ["falconorbit77", "falconorbit76", "falconorbit", "hunter2", "password123", "letmein"]

    def scores(agent):
        out = {}
        for g in guesses:
            hits = h.search(f"password: {g}", mode="vector", top_k=2, agent=agent)
            out[g] = next(x.vector_score for x in hits if x.path == "wifi.md")
        return out
    owner, agent = scores(False), scores(True)
    assert min(owner[g] for g in guesses[:3]) > max(owner[g] for g in guesses[3:])  # the leak exists
    shown = h.get("wifi.md", agent=True).text
    doc = minilm.embed_documents(["Wifi\n" + shown.strip("\n")])[0]  # the one chunk, under its title
    for g in guesses:
        assert agent[g] == pytest.approx(float(np.dot(minilm.embed_query(f"password: {g}"), doc)), abs=1e-4)
    h.close()
