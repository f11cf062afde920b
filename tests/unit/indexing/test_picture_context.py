"""A picture found by the words of the notes that show it (hybrid.indexing.context), on every
store: the lines a note lends, read again when they change, and only from notes agents may see.
Real Tesseract (scripts/ocr.sh), real indexes, the hash embedder (this is about which words a
picture holds, not meaning)."""
import shutil

import pytest
from helpers import ALL_STORES, text_image, write

STORES = ALL_STORES
RECEIPT = ["Hardware store receipt 4471", "Galvanised garden hinges x4", "Paid by card on Saturday"]
pytestmark = [pytest.mark.slow,  # starts converter processes and Tesseract
              pytest.mark.skipif(shutil.which("tesseract") is None and not __import__("os").environ.get("CI"),
                                 reason="Tesseract is not installed (bash scripts/ocr.sh)")]


def test_a_picture_is_found_by_the_words_of_the_notes_that_show_it(tmp_path, open_h):
    root = tmp_path / "vault"
    text_image(root / "receipt.png", RECEIPT)
    text_image(root / "att/sketch.png", ["South wall 4.2 m", "Door on the east"])
    text_image(root / "old/receipt.png", ["Old receipt 1999", "Brass hinges"])
    write(root, "home.md", "# Home\n\n## Shed\n\nThe receipt for the shed hinges, kept for the warranty:\n\n"
                           "![[receipt.png]]\n")
    write(root, "plans.md", "# Plans\n\nSketch of the greenhouse: ![greenhouse sketch](att/sketch.png)\n")
    h = open_h(embedder="hash:64")
    h.add_vault(root, "v")
    assert h.index()[0].added == 5

    def paths(q):
        return [x.path for x in h.search(q, mode="lexical", top_k=10)]
    # neither picture holds these words: the notes that show them do
    assert "receipt.png" in paths("warranty shed") and "att/sketch.png" in paths("greenhouse sketch")
    hit = next(x for x in h.search("warranty shed", mode="lexical", top_k=10) if x.path == "receipt.png")
    assert hit.embedded_in == ["home.md"] and "warranty" not in hit.text  # cited by its own lines
    assert "warranty" not in h.get("v:receipt.png").text
    again = h.index()[0]
    assert (again.added, again.updated) == (0, 0)  # nothing changed: nothing read again
    # the note no longer shows it: its words leave the picture, which is read again from the cache
    write(root, "home.md", "# Home\n\n## Shed\n\nThe receipt for the shed hinges, kept for the warranty.\n")
    report = h.index()[0]
    assert report.updated == 2, report  # the note and the picture
    assert "receipt.png" not in paths("warranty shed") and "receipt.png" in paths("galvanised hinges")
    # the link resolves to another picture once the nearer one is gone: that one takes the words
    write(root, "home.md", "# Home\n\n## Shed\n\nThe receipt for the shed hinges, kept for the warranty:\n\n"
                           "![[receipt.png]]\n")
    h.index()
    (root / "receipt.png").unlink()
    h.index()
    assert "old/receipt.png" in paths("warranty shed")


def test_only_notes_agents_may_see_lend_a_picture_words(tmp_path, open_h, store_kind):
    root = tmp_path / "vault"
    text_image(root / "receipt.png", RECEIPT)
    write(root, "home.md", "# Home\n\nThe receipt for the shed hinges, kept for the warranty:\n\n![[receipt.png]]\n")
    write(root, "diary.md", "---\ntags: [private]\n---\n# Diary\n\nThe lawyer wants the receipt: ![[receipt.png]]\n")
    h = open_h(embedder="hash:64")
    h.add_vault(root, "v")
    h.index()

    def paths(q, agent=False):
        return [x.path for x in h.search(q, mode="lexical", top_k=10, agent=agent)]
    assert paths("lawyer") == ["diary.md"]  # a private note lends no words, to the owner either
    assert "receipt.png" in paths("warranty shed", agent=True)
    # home.md made private on disk, no index run since: the picture holding its words is not served
    write(root, "home.md", "---\ntags: [private]\n---\n# Home\n\nThe receipt for the shed hinges, kept for "
                           "the warranty:\n\n![[receipt.png]]\n")
    assert "receipt.png" not in paths("warranty shed", agent=True)
    assert "receipt.png" not in paths("galvanised hinges", agent=True)
    assert "receipt.png" in paths("warranty shed")  # the owner still finds it
    h.index()  # the run leaves home.md's words out: the picture is an agent's again, by its own text
    assert "receipt.png" in paths("galvanised hinges", agent=True)
    assert "receipt.png" not in paths("warranty shed", agent=True) + paths("warranty shed")
    # agent_exclude changed: until the view is brought in step, a picture holding words of a note it
    # hides is hidden with it; an agent's first search brings it in step (a run that leaves them out)
    write(root, "home.md", "# Home\n\nThe receipt for the shed hinges, kept for the warranty:\n\n![[receipt.png]]\n")
    h.index()
    assert "receipt.png" in paths("warranty shed", agent=True)
    h2 = open_h(embedder="hash:64", agent_exclude=["home.md"])
    if store_kind == "postgresql":  # the settings the indexer wrote into the shared store rule: an index run here
        h2.index()                  # makes this machine's the vault's (docs/team-mode.md)
    else:
        assert h2.agent_hidden("v")["shown in a hidden note"] == ["receipt.png (home.md)"]
    assert "receipt.png" in [x.path for x in h2.search("galvanised hinges", mode="lexical", agent=True)]
    assert "receipt.png" not in [x.path for x in h2.search("warranty shed", mode="lexical", agent=True)]
    assert "shown in a hidden note" not in h2.agent_hidden("v")


def test_a_secret_in_the_words_a_note_lends_is_redacted_for_agents(tmp_path, open_h):
    root = tmp_path / "vault"
    text_image(root / "router.png", ["The router admin page", "Change it yearly"])
    write(root, "home.md", "# Home\n\nThe router card, password: falconorbit77\n\n![[router.png]]\n")
    h = open_h(embedder="hash:64")
    h.add_vault(root, "v")
    h.index()
    owner = [x.path for x in h.search("falconorbit77", mode="lexical", top_k=10)]
    assert "router.png" in owner  # the owner's picture holds the note's words as written
    shown = h.search("router admin page", mode="hybrid", top_k=10, agent=True)
    assert "router.png" in [x.path for x in shown] and "falconorbit77" not in repr([x.to_dict() for x in shown])
    assert not h.search("falconorbit77", mode="lexical", top_k=10, agent=True)
