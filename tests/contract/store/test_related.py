"""Related notes (issue #30, part 1) on every backend: the signals and their evidence, the agent
view, and bad input. Hash embedder (logic: its vectors are structured by shared words), real
tantivy / FAISS / PostgreSQL + pgvector."""

from __future__ import annotations

import anyio
import pytest
from helpers import ALL_STORES, write, write_pdf
from mcp import Client
from mcp_types import Implementation
from secrets_fixtures import fake_secrets

from hybrid.core.errors import PathRefused, VaultError
from hybrid.faces.mcp import build_server
from hybrid.retrieval.limits import BadSearchArgs

STORES = ALL_STORES
GITHUB = next(c for c in fake_secrets() if c["name"] == "github-pat")

NOTES = {
    "kafka.md": "---\ntags: [streaming, ops]\n---\n# Kafka\n\nKafka brokers keep partitions of topics; "
                "consumers in a group read partitions. See [[Consumer lag]].\n",
    "Consumer lag.md": "---\ntags: [streaming]\n---\n# Consumer lag\n\nWhen consumers fall behind, lag "
                       "grows on every partition of the topic.\n",
    "hub.md": "# Hub\n\nReading list: [[kafka]], [[Schema registry]].\n",
    "Schema registry.md": "---\ntags: [streaming]\n---\n# Schema registry\n\nAvro schemas for topics.\n",
    "garden.md": "# Garden\n\nTomatoes need six hours of sun and deep watering.\n",
    "orchard.md": "# Orchard\n\nApple trees need sun, pruning and deep watering in summer.\n",
    "private/diary.md": "---\ntags: [private]\n---\n# Diary\n\nKafka partitions of my feelings. [[kafka]]\n",
}


@pytest.fixture
def h(fake, tmp_path):
    vault = tmp_path / "vault"
    for rel, text in NOTES.items():
        write(vault, rel, text)
    fake.add_vault(vault, "v")
    assert fake.index()[0].error is None
    yield fake
    fake.close()


def by_path(result):
    return {n.path: n for n in result.notes}


def test_every_signal_with_its_evidence(h):
    r = h.related("kafka")
    assert r.path == "kafka.md" and r.meaning
    got = by_path(r)
    lag = got["Consumer lag.md"]
    assert lag.links == ["links to"] and lag.shared_tags == ["streaming"]
    assert lag.similarity is not None and lag.similarity > 0
    assert lag.citation.startswith("v:Consumer lag.md:")
    assert got["hub.md"].links == ["linked from"]
    assert got["private/diary.md"].links == ["linked from"]  # the owner sees every note
    schema = got["Schema registry.md"]  # co-cited with kafka by hub, and tagged alike
    assert schema.co_cited_by == ["hub.md"] and schema.shared_tags == ["streaming"] and not schema.links
    assert any("co-cited by 1 note: hub.md" == w for w in schema.why)
    assert r.notes[0].links and r.notes[1].links  # a link outweighs words in common alone
    assert [n.score for n in r.notes] == sorted((n.score for n in r.notes), reverse=True)
    assert "kafka.md" not in got  # never itself


def test_any_reference_get_accepts(h):
    want = [n.path for n in h.related("kafka.md").notes]
    for ref in ("kafka", "Kafka", "[[kafka]]", "v:kafka.md:1-5", "obsidian://open?vault=vault&file=kafka"):
        assert [n.path for n in h.related(ref).notes] == want, ref


def test_meaning_alone_answers_a_note_with_no_links_or_tags(h):
    r = h.related("garden", top_k=3)
    assert r.notes[0].path == "orchard.md"
    first = r.notes[0]
    assert not first.links and not first.shared_tags and not first.co_cited_by
    assert first.why == [f"similar in meaning (cosine {first.similarity:.2f})"]


def test_bad_input(h):
    with pytest.raises(PathRefused) as missing:
        h.related("no such note")
    with pytest.raises(PathRefused) as by_get:
        h.get("no such note")
    assert str(missing.value) == str(by_get.value)
    with pytest.raises(BadSearchArgs, match="top_k"):
        h.related("kafka", top_k=0)
    with pytest.raises(PathRefused, match="empty note reference"):
        h.related("  ")


def test_a_note_not_indexed_yet(h, tmp_path):
    write(tmp_path / "vault", "new.md", "# New\n\nKafka topics.\n")
    with pytest.raises(PathRefused, match=r"'new.md' is not indexed yet; run `hybrid index --vault v`"):
        h.related("new.md")
    assert h.index()[0].error is None
    assert h.related("new.md").notes  # found once indexed: the graph follows the ledger


def test_an_empty_vault_and_a_vault_not_indexed(fake, tmp_path):
    (tmp_path / "empty").mkdir()
    fake.add_vault(tmp_path / "empty", "e")
    with pytest.raises(VaultError, match="not indexed"):
        fake.related("anything", "e")
    assert fake.index()[0].error is None
    with pytest.raises(PathRefused, match="no such note"):
        fake.related("anything.md", "e")
    fake.close()


def test_a_pdf_as_the_source(h, tmp_path):
    write_pdf(tmp_path / "vault" / "brokers.pdf", ["Kafka brokers keep partitions of topics for consumers."])
    assert h.index()[0].error is None
    r = h.related("brokers.pdf")
    assert r.path == "brokers.pdf" and r.meaning
    assert r.notes[0].path == "kafka.md" and r.notes[0].similarity is not None
    assert "brokers.pdf" in {n.path for n in h.related("kafka", top_k=20).notes}


def test_agents_see_only_what_the_agent_view_allows(h):
    owner = by_path(h.related("kafka", top_k=20))
    agent = by_path(h.related("kafka", top_k=20, agent=True))
    assert "private/diary.md" in owner and "private/diary.md" not in agent
    assert set(agent) <= set(owner) - {"private/diary.md"}
    with pytest.raises(PathRefused) as hidden:
        h.related("private/diary.md", agent=True)
    with pytest.raises(PathRefused) as absent:
        h.related("private/nothing.md", agent=True)
    with pytest.raises(PathRefused) as by_get:
        h.get("private/diary.md", agent=True)
    assert str(hidden.value) == str(by_get.value) == str(absent.value).replace("nothing", "diary")


def test_a_co_citing_note_made_private_is_not_named_to_agents(h, tmp_path):
    write(tmp_path / "vault", "hub.md", "---\ntags: [private]\n---\n# Hub\n\nReading list: [[kafka]], "
                                        "[[Schema registry]].\n")  # on disk only: not indexed again
    agent = by_path(h.related("kafka", top_k=20, agent=True))
    assert "hub.md" not in agent
    assert all("hub.md" not in n.co_cited_by and not any("hub.md" in w for w in n.why) for n in agent.values())
    assert "hub.md" in by_path(h.related("kafka", top_k=20))  # the owner still sees it


def test_secrets_are_redacted_for_agents(fake, tmp_path):
    vault = tmp_path / "vault"
    write(vault, "a.md", "# Deploy\n\nDeploy the service with the deploy token.\n")
    write(vault, "b.md", f"# Deploy keys\n\nDeploy the service with the deploy token:\n{GITHUB['line']}\n")
    fake.add_vault(vault, "v")
    assert fake.index()[0].error is None
    owner = by_path(fake.related("a", top_k=5))
    agent = by_path(fake.related("a", top_k=5, agent=True))
    assert GITHUB['secret'] in owner["b.md"].snippet
    assert GITHUB['secret'] not in agent["b.md"].snippet and "[redacted secret]" in agent["b.md"].snippet
    fake.close()


def test_the_mcp_tool(h):
    async def main(args):
        async with Client(build_server(h), client_info=Implementation(name="probe", version="1")) as c:
            return await c.call_tool("related", args)
    res = anyio.run(main, {"note": "kafka"})
    assert not res.is_error, res.content[0].text
    paths = [n["path"] for n in res.structured_content["notes"]]
    assert paths and "private/diary.md" not in paths
    assert "Notes related to v:kafka.md" in res.content[0].text and "why: " in res.content[0].text
    refused = anyio.run(main, {"note": "private/diary.md"})
    assert refused.is_error and "is not a note you can read" in refused.content[0].text
    bad = anyio.run(main, {"note": "kafka", "top_k": 500})
    assert bad.is_error and "top_k" in bad.content[0].text
