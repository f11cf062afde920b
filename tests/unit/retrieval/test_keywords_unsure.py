"""Keyword evidence alone cannot say "nothing relevant" near the cut (issue #49): without a
vector arm a first hit's confidence is read from how many of the question's words it holds, and
a right first hit was told "nothing relevant" for 30% of English and 50% of other-language
held-out questions (eval/reports/confidence.md). Such an answer's ``relevant`` is unknown, and
it says why; "nothing relevant" stays where it is sure: the first hit holds almost none of the
question's words, or no hit holds an identifier the question names."""
import pytest
from conftest import store_settings
from helpers import indexed_vault

from hybrid.retrieval import confidence
from hybrid.retrieval.pipeline import KEYWORDS_UNSURE
from hybrid.retrieval.result import SearchResult

NOTES = {
    "garden.md": "# Garden\n\nTomatoes need six hours of sun and deep watering twice a week.\n",
    "bread.md": "# Bread\n\nSourdough at 75% hydration proofs overnight in the fridge.\n",
    "net.md": "# Network\n\nAdvertise a subnet route with tailscale up on the router. FORGE-1533 tracks it.\n",
    **{f"notes/n{i}.md": f"# Note {i}\n\nMeeting notes about the platform roadmap, item {i}.\n" for i in range(8)},
}


@pytest.fixture(scope="module")
def h(tmp_path_factory, new_store):
    handle = indexed_vault(tmp_path_factory.mktemp("unsure"), NOTES, **store_settings(new_store()))
    yield handle
    handle.close()


def top(result):
    return max(x.confidence for x in result)


def test_weak_keyword_hits_are_unknown_and_say_why(h):
    # half the question's words in the first hit: weak, and keywords cannot tell
    result = h.search("watering orchids", top_k=3, mode="lexical")
    assert result[0].path == "garden.md" and confidence.KEYWORDS_NOTHING <= top(result) < 0.4
    assert result.relevant is None and result.keywords_unsure
    assert result.notices == [KEYWORDS_UNSURE]
    answer = result.to_json(text=False)
    assert answer["relevant"] is None and answer["keywords_unsure"] is True
    assert SearchResult.from_response(answer, result.query, result.parsed).relevant is None  # a remote client
    from hybrid.faces.mcp import render_hits
    assert "Nothing relevant" not in render_hits(result.query, answer, notices=result.notices)


def test_nothing_relevant_stays_where_keywords_are_sure(h):
    # one of twelve words: the first hit holds almost none of them
    result = h.search("which violin bow rosin brand suits humid summer concerts outdoors near roadmap",
                      top_k=3, mode="lexical")
    assert result and top(result) < confidence.KEYWORDS_NOTHING
    assert result.relevant is False and not result.keywords_unsure and result.notices == []
    # an identifier no hit holds: the hits hold its word, not it
    result = h.search("FORGE-9999", top_k=3, mode="lexical")
    assert result and top(result) < 0.4
    assert result.relevant is False and not result.keywords_unsure
    # the identifier held: a fair hit, or unknown; never "nothing relevant"
    assert h.search("FORGE-1533", top_k=3, mode="lexical").relevant is not False


def test_a_fair_hit_or_a_vector_arm_is_untouched(h):
    assert h.search("tomatoes sun watering", top_k=3, mode="lexical").relevant is True
    hybrid = h.search("watering orchids", top_k=3, mode="hybrid")
    assert not hybrid.keywords_unsure and KEYWORDS_UNSURE not in hybrid.notices
