"""An answer a filter alone selected is never told "nothing relevant" (issue #49): `recipe
rating>=4` over exactly the four right recipes was, because the word "recipe" says little about
which recipe. When the filters pass no more notes than the answer shows, the answer is every one
of them, and says so."""
import pytest
from conftest import store_settings
from helpers import indexed_vault

RECIPES = {f"recipes/{name}.md": f"---\nrating: {rating}\ntags: [recipe]\n---\n# {name.title()}\n\n{body}\n"
           for name, rating, body in (
               ("shakshuka", 5, "Eggs poached in tomato and pepper sauce with cumin."),
               ("dal", 4, "Red lentils simmered with turmeric, tempered with mustard seeds."),
               ("ramen", 4, "Broth of pork bones simmered for twelve hours, noodles, soft egg."),
               ("focaccia", 5, "High hydration dough, olive oil, rosemary, flaky salt."),
               ("meatloaf", 2, "Ground beef, breadcrumbs, ketchup glaze. Dry, never again."),
               ("risotto", 3, "Arborio rice, stock added a ladle at a time, parmesan."))}
OTHER = {f"notes/n{i}.md": f"# Note {i}\n\nMeeting notes about the platform roadmap, item {i}.\n" for i in range(12)}


@pytest.fixture(scope="module")
def h(tmp_path_factory, new_store):
    handle = indexed_vault(tmp_path_factory.mktemp("selected"), {**RECIPES, **OTHER}, **store_settings(new_store()))
    yield handle
    handle.close()


def test_the_filter_selected_every_note_shown(h):
    result = h.search("recipe rating>=4", top_k=8)
    assert {x.path for x in result} == {"recipes/shakshuka.md", "recipes/dal.md", "recipes/ramen.md",
                                        "recipes/focaccia.md"}
    assert result.relevant is not False  # never "nothing relevant" over the notes asked for
    assert result.notices == ["the filters pass 4 notes: all 4 are shown"]
    answer = result.to_json(text=False)
    assert answer["relevant"] is not False and answer["by_filters"] == 4
    from hybrid.faces.mcp import render_hits
    from hybrid.retrieval.result import SearchResult
    assert SearchResult.from_response(answer, result.query, result.parsed).relevant is not False
    text = render_hits(result.query, answer, notices=result.notices)
    assert "Nothing relevant" not in text and text.startswith("the filters pass 4 notes")


def test_a_filter_that_passes_more_than_is_shown_changes_nothing(h):
    result = h.search("roadmap folder:notes", top_k=3)
    assert len(result.notes) == 3 and result.notices == []
    narrow = h.search("recipe rating>=4", top_k=2)  # 4 pass, 2 shown: the words chose
    assert narrow.notices == []
