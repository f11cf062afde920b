"""Issue #28: every door answers with notes (best passage, its others under it, top_k counting
notes), passages on request, never two overlapping ranges of one note, and confidence that
never rises down the list as shown. Real tantivy and FAISS indexes; the hash embedder."""
import pytest
from helpers import write

import hybrid
from hybrid.retrieval.hits import Hit
from hybrid.retrieval.notes import PER_NOTE, group_by_note, monotone, monotone_notes, overlaps, select, violations

# --- selection ------------------------------------------------------------------------------


def cand(note, start, end, vault="v"):
    return (None, (vault, note), (start, end))


def test_select_counts_notes_and_keeps_a_notes_passages_together():
    ranked = [cand("a", 1, 10), cand("b", 1, 5), cand("a", 20, 30), cand("c", 1, 4), cand("b", 9, 12)]
    assert select(ranked, 2, by_note=True) == [0, 2, 1, 4]  # a, its 2nd; b, its 2nd; c is the 3rd note
    assert select(ranked, 2, by_note=False) == [0, 1]


def test_select_drops_a_passage_overlapping_a_better_one_of_its_note():
    ranked = [cand("a", 18, 30), cand("a", 28, 34), cand("b", 28, 34), cand("a", 31, 40)]
    assert select(ranked, 5, by_note=True) == [0, 3, 2]
    assert select(ranked, 3, by_note=False) == [0, 2, 3]  # passages: the next one takes its place
    assert select([cand("a", 1, 5, "v"), cand("a", 1, 5, "w")], 5, by_note=True) == [0, 1]  # other vault


def test_select_caps_the_passages_of_one_note():
    ranked = [cand("a", 10 * i, 10 * i + 5) for i in range(PER_NOTE + 3)] + [cand("b", 1, 2)]
    chosen = select(ranked, 2, by_note=True)
    assert chosen == [*range(PER_NOTE), PER_NOTE + 3]


@pytest.mark.parametrize("a, b, want", [((1, 5), (5, 9), True), ((1, 5), (6, 9), False), ((3, 4), (1, 9), True)])
def test_overlaps(a, b, want):
    assert overlaps(a, b) is want and overlaps(b, a) is want


# --- monotone confidence --------------------------------------------------------------------

def test_monotone_pools_rising_runs_and_keeps_falling_ones():
    assert monotone([0.9, 0.46, 0.61, 0.66, 0.2]) == [0.9, 0.577, 0.577, 0.577, 0.2]
    assert monotone([0.8, 0.5, 0.3]) == [0.8, 0.5, 0.3]
    assert monotone([0.3, 0.5]) == [0.4, 0.4]  # the order says 1st, the model 2nd: between
    assert monotone([0.5, None, 0.7]) == [0.6, None, 0.6]
    assert monotone([]) == []


@pytest.mark.parametrize("seed", range(20))
def test_monotone_is_non_increasing_and_keeps_the_mean(seed):
    import random
    rnd = random.Random(seed)
    values = [round(rnd.random(), 3) for _ in range(rnd.randint(1, 30))]
    out = monotone(values)
    assert violations(out) == (0, len(values) - 1)
    assert sum(out) == pytest.approx(sum(values), abs=0.001 * len(values))


def test_a_notes_weak_passages_do_not_drag_down_the_next_note():
    hits = [Hit("v", p, "T", [], s, s + 1, "x", 0.5, confidence=c)
            for p, s, c in [("a", 1, 0.8), ("a", 9, 0.05), ("b", 1, 0.6), ("b", 9, 0.7), ("c", 1, 0.9)]]
    monotone_notes(hits)
    # b's passages pooled (0.65), then b's headline with c's (0.775); a's weak 0.05 changes neither
    assert [h.confidence for h in hits] == [0.8, 0.05, 0.775, 0.65, 0.775]
    notes = group_by_note(hits)
    assert violations([n.confidence for n in notes])[0] == 0
    assert all(n.best.confidence == n.confidence for n in notes)


def test_violations_counts_adjacent_rises():
    assert violations([0.46, 0.61, 0.66, 0.5]) == (2, 3)
    assert violations([None, 0.4]) == (0, 0)


# --- through a real index -------------------------------------------------------------------

LONG = "# Refunds\n\n" + "\n\n".join(  # many short paragraphs: the chunker's overlap shares them
    f"## Case {i}\n\n" + "\n\n".join(f"- refund {j} for order {i}: check the refund policy." for j in range(14))
    for i in range(4))


@pytest.fixture(scope="module")
def shop(tmp_path_factory):
    root = tmp_path_factory.mktemp("shop")
    vault = root / "vault"
    write(vault, "support/refunds.md", LONG)
    write(vault, "policy.md", "# Policy\n\nRefund within 30 days of delivery. No refund for opened software.\n")
    write(vault, "faq.md", "# FAQ\n\nHow do I ask for a refund? Write to support with your order number.\n")
    write(vault, "garden.md", "# Garden\n\nTomatoes need sun and water every morning.\n")
    h = hybrid.open(root / "home", embedder="hash:64", chunk_tokens=64, chunk_overlap=16)
    h.add_vault(vault, "v")
    h.index()
    yield h
    h.close()


def test_a_search_answers_notes_with_their_passages_and_top_k_counts_notes(shop):
    r = shop.search("refund", top_k=3)
    assert r.grouped and len(r.notes) == 3
    assert [n.best.path for n in r.notes][0] == "support/refunds.md"
    assert 1 < len(r.notes[0].hits) <= PER_NOTE  # one note, several passages, under it
    assert [h.path for h in r] == [h.path for n in r.notes for h in n.hits]  # the list is by note
    flat = shop.search("refund", top_k=3, passages=True)
    assert not flat.grouped and len(flat) == 3


@pytest.mark.parametrize("passages", [False, True])
def test_no_two_passages_of_a_note_overlap(shop, passages):
    r = shop.search("refund policy order", top_k=20, passages=passages)
    by_note: dict = {}
    for h in r:
        for other in by_note.get((h.vault, h.path), []):
            assert not overlaps((h.start_line, h.end_line), other), (h.citation, other)
        by_note.setdefault((h.vault, h.path), []).append((h.start_line, h.end_line))
    assert max(len(v) for v in by_note.values()) > 1  # the check had something to check


@pytest.mark.parametrize("mode", ["hybrid", "lexical", "vector"])
def test_confidence_never_rises_down_the_answer(shop, mode):
    for q in ("refund", "refund policy", "order history late parcel", "tomatoes sun"):
        for passages in (False, True):
            r = shop.search(q, top_k=10, mode=mode, passages=passages)
            if passages:
                assert violations([h.confidence for h in r])[0] == 0, (q, mode)
                continue
            assert violations([n.confidence for n in r.notes])[0] == 0, (q, mode)
            for n in r.notes:  # the headline is the note's most confident passage, the rest fall
                assert n.best.confidence == n.confidence
                assert violations([h.confidence for h in n.hits])[0] == 0, (q, mode)


def test_min_score_cuts_the_tail_of_the_answer(shop):
    every = shop.search("refund policy", top_k=10)
    floor = sorted({h.confidence for h in every})[len({h.confidence for h in every}) // 2]
    cut = shop.search("refund policy", top_k=10, min_score=floor)
    # the notes kept are the first ones, each with its passages that pass
    assert [n.ref for n in cut.notes] == [n.ref for n in every.notes][:len(cut.notes)]
    assert [h.citation for h in cut] == [h.citation for h in every if h.confidence >= floor]
    assert all(h.confidence >= floor for h in cut) and len(cut) < len(every)


def test_relevant_says_whether_anything_is_fair():
    from hybrid.retrieval.hits import Hit
    from hybrid.retrieval.result import SearchResult

    def result(*conf):
        return SearchResult([Hit("v", f"{i}.md", "T", [], 1, 2, "s", 0.5, confidence=c) for i, c in enumerate(conf)])
    assert result(0.2, 0.39).relevant is False and result(0.4, 0.1).relevant is True
    assert result(None).relevant is None and SearchResult().relevant is False
