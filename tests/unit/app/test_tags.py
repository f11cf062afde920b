"""Tag suggestions end to end on a real index (hash embedder): suggested from the vault's own
tags into the review queue, nothing written until accepted, rejected tags never again, and the
bad inputs: a note that does not exist, a vault with no tags, a note with nothing to go on, a
front block that cannot be parsed, a file changed between suggestion and approval. An LLM is a
fake Ollama on 127.0.0.1; an agent's tags only ever reach the queue."""
import json

import pytest
from helpers import JsonHandler, indexed_vault, local_server

from hybrid.app.tags import NoSuggestions, TagWriteError
from hybrid.app.tags import suggest as sg
from hybrid.core.errors import PathRefused

KAFKA = "Kafka consumer lag, partitions, offsets and the broker. Kafka topics retain events."
NOTES = {
    "a.md": f"---\ntags: [kafka, work]\n---\n# Consumer lag\n\n{KAFKA}\n",
    "b.md": f"---\ntags: [kafka]\n---\n# Partitions\n\n{KAFKA} More partitions.\n",
    "c.md": "---\ntags: [garden]\n---\n# Tomatoes\n\nTomatoes need sun and water every day.\n",
    "new.md": f"# Broker offsets\n\n{KAFKA} Offsets committed by the consumer.\n",
    "lone.md": "# Zzyzx\n\nQuux flib wombat.\n",
}


@pytest.fixture
def h(tmp_path):
    handle = indexed_vault(tmp_path, NOTES, proposals_folder="inbox")
    yield handle
    handle.close()


def test_pure_parts():
    assert sg.fuse([[1, 2], [2]]) == {1: 1 / 61, 2: 1 / 62 + 1 / 61}
    votes = sg.neighbour_votes({1: 0.2, 2: 0.1, 3: 0.05}, {1: ["x"], 2: ["x", "y"]}, n=2)
    assert votes == {"x": (1.0 + 0.5, 2), "y": (0.5, 1)}
    ph = sg.phrase_scores(["home-assistant", "ai", "kafka"], "Home Assistant setup", "kafka kafka kafka")
    assert ph["home-assistant"][0] == sg.PHRASE_TITLE and "ai" not in ph
    assert ph["kafka"][0] == pytest.approx(sg.PHRASE_BODY)
    ranked = sg.rank({"x": (1.0, 1), "y": (1.0, 1)}, {}, {"x": 1, "y": 5}, set(), 1, 5)
    assert [c.tag for c in ranked] == ["y", "x"]  # a tie goes to the tag more notes carry


def test_suggests_the_neighbours_tags_and_writes_nothing(h, tmp_path):
    before = (tmp_path / "vault" / "new.md").read_bytes()
    [got] = h.tags.suggest("new.md")
    assert got.suggestions[0].tag == "kafka"
    assert "garden" not in [s.tag for s in got.suggestions][:1]
    assert (tmp_path / "vault" / "new.md").read_bytes() == before  # nothing without approval
    [(vault, entry)] = h.tags.pending()
    assert (vault, entry.path) == ("v", "new.md") and entry.tags() == [s.tag for s in got.suggestions]


def test_accept_writes_only_the_front_block_and_reject_is_remembered(h, tmp_path):
    note = tmp_path / "vault" / "new.md"
    before = note.read_text()
    h.tags.suggest("new.md")
    done = h.tags.accept("new.md", ["kafka"])
    assert done.added == ["kafka"] and note.read_text() == "---\ntags:\n  - kafka\n---\n" + before
    with pytest.raises(TagWriteError, match="not waiting for review"):
        h.tags.accept("new.md", ["zebra"])  # never suggested: not written
    h.tags.reject("new.md", ["work"])
    again = h.tags.suggest("new.md")[0]
    assert "work" not in [s.tag for s in again.suggestions]
    assert "kafka" not in [s.tag for s in again.suggestions]  # it has it now


def test_a_file_changed_since_suggested_is_refused(h, tmp_path):
    note = tmp_path / "vault" / "new.md"
    h.tags.suggest("new.md")
    note.write_text(note.read_text() + "\nedited by hand\n")
    edited = note.read_bytes()
    with pytest.raises(TagWriteError, match="changed on disk since.*suggest"):
        h.tags.accept("new.md", ["kafka"])
    assert note.read_bytes() == edited
    h.tags.suggest("new.md")  # suggesting again makes it acceptable
    assert h.tags.accept("new.md", ["kafka"]).added == ["kafka"]


def test_an_unparseable_front_block_is_never_rewritten(tmp_path):
    h = indexed_vault(tmp_path, {**NOTES, "bad.md": f"---\ntags: [kafka\n---\n{KAFKA}\n"})
    h.tags.suggest("bad.md")
    data = (tmp_path / "vault" / "bad.md").read_bytes()
    with pytest.raises(TagWriteError, match="cannot be parsed"):
        h.tags.accept("bad.md", [h.tags.pending(note="bad.md")[0][1].tags()[0]])
    assert (tmp_path / "vault" / "bad.md").read_bytes() == data
    h.close()


def test_bad_input(h, tmp_path):
    with pytest.raises(PathRefused, match="no such note"):
        h.tags.suggest("nope.md")
    untagged = indexed_vault(tmp_path / "plain", {"x.md": "# X\n\ntext\n", "y.md": "# Y\n\nmore\n"})
    with pytest.raises(NoSuggestions, match="no tags at all"):
        untagged.tags.suggest("x.md")
    untagged.close()


def test_nothing_to_go_on_says_so(tmp_path):
    h = indexed_vault(tmp_path, {"t.md": "---\ntags: [only]\n---\n# T\n\nalpha\n", "u.md": "# U\n\nbeta\n"})
    h.tags.reject("u.md", ["only"])
    [got] = h.tags.suggest("u.md")
    assert got.suggestions == [] and "no suggestion" in got.message
    h.close()


class FakeOllama(JsonHandler):
    answer = {"tags": ["kafka", "brand-new", "not a tag!"]}
    prompts: list = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path != "/api/generate":
            return self._send(404, {"error": "not found"})
        FakeOllama.prompts.append(body)
        self._send(200, {"model": body["model"], "response": json.dumps(self.answer), "done": True})


def test_an_llm_is_held_to_the_vocabulary_unless_new_tags_are_asked_for(h):
    with local_server(FakeOllama) as server:
        h.override(ollama_host=server.url)
        [got] = h.tags.suggest("new.md", llm="ollama:tiny")
        assert got.suggestions[0].tag == "kafka" and got.suggestions[0].by == "ollama:tiny"
        assert "brand-new" not in [s.tag for s in got.suggestions]
        [got] = h.tags.suggest("new.md", llm="ollama:tiny", new_tags=True)
        new = [s for s in got.suggestions if s.tag == "brand-new"]
        assert new and new[0].new
        assert "kafka" in FakeOllama.prompts[-1]["prompt"] and FakeOllama.prompts[-1]["format"]["required"] == ["tags"]
    with pytest.raises(Exception, match="ollama:MODEL"):
        h.tags.suggest("new.md", llm="openai:gpt")


def test_an_agent_proposes_into_the_queue_and_never_sees_private_notes(tmp_path):
    notes = {**NOTES, "secret.md": f"---\ntags: [private, kafka]\n---\n{KAFKA}\n"}
    h = indexed_vault(tmp_path, notes, proposals_folder="inbox")
    before = (tmp_path / "vault" / "new.md").read_bytes()
    assert h.tags.propose("new.md", ["kafka", "ideas"], None, "claude") == ["kafka", "ideas"]
    assert (tmp_path / "vault" / "new.md").read_bytes() == before
    [(_, e)] = h.tags.pending()
    assert [s.by for s in e.pending] == ["agent:claude"] * 2 and [s.new for s in e.pending] == [False, True]
    with pytest.raises(PathRefused) as private:
        h.tags.propose("secret.md", ["x"], None, "claude")
    with pytest.raises(PathRefused) as absent:
        h.tags.propose("absent.md", ["x"], None, "claude")
    assert str(private.value).replace("secret", "absent") == str(absent.value)
    with pytest.raises(TagWriteError):
        h.tags.propose("new.md", ["x"] * 11, None, "claude")
    h.close()


def test_agents_cannot_propose_when_proposals_are_off(tmp_path):
    h = indexed_vault(tmp_path, NOTES)
    with pytest.raises(Exception, match="proposals"):
        h.tags.propose("new.md", ["kafka"], None, "claude")
    h.close()
