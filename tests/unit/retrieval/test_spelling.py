"""Typo repair (issue #28): real words are never rewritten (a word of any vault searched, as typed
or by its stem; a word of the shipped word list), a real typo still is, and a repair in doubt
searches the query as typed and only suggests. Real tantivy indexes of small vaults, hash embedder."""
import json
import re

import pytest
from helpers import REPO, SAMPLE_VAULT, write

import hybrid
from hybrid.core import wordlist
from hybrid.retrieval.query import parse_query
from hybrid.retrieval.spelling import words_of
from hybrid.store.lexicon import FUZZY_MIN_LEN

RAFT = {"raft.md": "# Raft\n\nRaft leader election: a follower that hears no heartbeat becomes a "
                   "candidate and asks its peers for votes.\n",
        "coffee.md": "# Espresso\n\nGrind the espresso beans fine; a coarse grind runs fast.\n"}
CREDITS = {"credits.md": "# Credits\n\n## Electron\n\nThe desktop app is built on Electron.\n\n"
                         "## Grid\n\nThe layout uses CSS grid.\n"}


def _vaults(tmp_path, vaults: dict[str, dict[str, str]], **settings):
    h = hybrid.open(tmp_path / "home", embedder="hash:64", **settings)
    for name, notes in vaults.items():
        for rel, text in notes.items():
            write(tmp_path / name, rel, text)
        h.add_vault(tmp_path / name, name)
    h.index()
    return h


def _search(h, q, **kw):
    return h.search(q, mode="lexical", top_k=5, **kw)


@pytest.mark.parametrize("query, answer", [("raft leader election", "raft.md"),
                                           ("espresso grind", "coffee.md")])
def test_a_word_of_one_vault_is_not_rewritten_to_a_neighbour_of_another(tmp_path, query, answer):
    """The issue's cross-vault cases: `election` and `grind` are words of the first vault; the
    second holds `electron` and `grid`, one edit away. Searched over both, nothing is rewritten,
    no near spelling is matched, and the note that answers stays first."""
    h = _vaults(tmp_path, {"notes": RAFT, "credits": CREDITS})
    try:
        r = _search(h, query)
        assert r.corrections == {} and r.suggestions == {} and r.parsed.terms == query.split()
        assert [(x.vault, x.path) for x in r][0] == ("notes", answer)
        assert all(x.vault != "credits" for x in r)  # credits holds no word of the query
    finally:
        h.close()


def test_a_typo_is_repaired_from_the_vault_where_the_rest_of_the_query_occurs(tmp_path):
    """`electon` is one edit from `election` (notes) and from `electron` (credits): the vault
    whose chunks hold the correction with the query's other words wins."""
    h = _vaults(tmp_path, {"credits": CREDITS, "notes": RAFT})
    try:
        r = _search(h, "raft leader electon")
        assert r.corrections == {"electon": "election"} and r.suggestions == {}
        assert r.corrected_query == "raft leader election" and r[0].path == "raft.md"
    finally:
        h.close()


STEMMED = {"art.md": "# Art\n\nTwo drawings of the harbour, in ink.\n",
           "kettle.md": "# Kettle\n\nThe kettle was descaled with citric acid.\n",
           "http.md": "# HTTP client\n\nRetries after timeouts, with backoff.\n",
           "net.md": "# Tailnet\n\nEach subnet route is approved in the admin console; "
                     "`tailscale up --advertise-route` is a typo of the real flag.\n"}


@pytest.mark.parametrize("query, answer", [("drawing", "art.md"), ("descale kettle", "kettle.md"),
                                           ("timeout retries", "http.md"),
                                           ("--advertise-routes", "net.md")])
def test_a_word_the_vault_holds_by_its_stem_is_not_a_typo(tmp_path, query, answer):
    h = _vaults(tmp_path, {"v": STEMMED}, spell_languages=[])  # no word list: the vault decides
    try:
        r = _search(h, query)
        assert r.corrections == {} and r.suggestions == {} and r.parsed.terms == query.split()
        assert r and r[0].path == answer  # the stemmed fields find it as typed
    finally:
        h.close()


def test_a_dictionary_word_absent_from_the_vault_is_left_alone(tmp_path):
    """`bread` is nowhere in the vault but one edit from `break`: a real word, so it is neither
    rewritten nor matched one edit away (the `break` note stays out of the BM25 hits)."""
    notes = {"pomodoro.md": "# Pomodoro\n\nTake a break every half hour.\n",
             "starter.md": "# Sourdough\n\nFeed the sourdough starter daily.\n"}
    h = _vaults(tmp_path, {"v": notes})
    try:
        r = _search(h, "sourdough bread")
        assert r.corrections == {} and r.suggestions == {}
        assert [x.path for x in r] == ["starter.md"]
    finally:
        h.close()
    # without a word list, `bread` is a typo; `break` never meets `sourdough`: only suggested,
    # the query searched as typed (the starter note first) with near spellings included
    h = _vaults(tmp_path / "bare", {"v": notes}, spell_languages=[])
    try:
        r = _search(h, "sourdough bread")
        assert r.corrections == {} and r.suggestions == {"bread": "break"}
        assert r.parsed.terms == ["sourdough", "bread"] and r.suggested_query == "sourdough break"
        assert [x.path for x in r] == ["starter.md", "pomodoro.md"]
    finally:
        h.close()


def test_a_real_typo_is_still_rewritten(tmp_path):
    h = _vaults(tmp_path, {"notes": RAFT, "credits": CREDITS})
    try:
        r = _search(h, "raft leadr election")
        assert r.corrections == {"leadr": "leader"} and r.parsed.terms == ["raft", "leader", "election"]
        alone = _search(h, "espreso")  # one word: nothing else to meet, the original finds nothing
        assert alone.corrections == {"espreso": "espresso"} and alone[0].path == "coffee.md"
    finally:
        h.close()


def test_the_agent_view_repairs_from_what_an_agent_may_see(tmp_path):
    notes = {"public.md": "# Plans\n\nGarden drawings for spring.\n",
             "diary.md": "---\ntags: [private]\n---\n# Diary\n\nThe zorvatrex dose.\n"}
    h = _vaults(tmp_path, {"v": notes})
    try:
        assert _search(h, "drawing", agent=True).corrections == {}
        assert _search(h, "gardne drawings", agent=True).corrections == {"gardne": "garden"}
        # a word only a private note holds is neither known to the agent nor offered to it
        owner, agent = _search(h, "zorvatrix"), _search(h, "zorvatrix", agent=True)
        assert owner.corrections == {"zorvatrix": "zorvatrex"}
        assert agent.corrections == {} and agent.suggestions == {} and list(agent) == []
    finally:
        h.close()


def test_the_word_list_knows_real_words_and_none_of_the_labelled_typos():
    assert wordlist.is_word("bread", ["en"]) and wordlist.is_word("Descale", ["en"])
    assert not wordlist.is_word("bread", []) and not wordlist.is_word('"bread', ["en"])
    assert wordlist.count("bread", "en") >= wordlist.FLOOR > wordlist.count("schedlue", "en")
    # each sample typo query's misspelling: its word of 5+ letters that no note holds
    vocab = set(re.findall(r"[a-z0-9]+", " ".join(p.read_text(encoding="utf-8").lower()
                                                  for p in SAMPLE_VAULT.rglob("*.md"))))
    lines = (SAMPLE_VAULT.parent / "data" / "sample.queries.jsonl").read_text(encoding="utf-8").splitlines()
    typos = [w for q in map(json.loads, lines) if q["category"] == "typo"
             for w in words_of(parse_query(q["text"])) if len(w) >= FUZZY_MIN_LEN and w not in vocab]
    assert len(typos) == 14 and not [w for w in typos if wordlist.is_word(w, ["en"])]


@pytest.mark.slow  # indexes the sample vault (a few seconds)
def test_correctly_spelled_sample_queries_see_no_rewrite(tmp_path):
    """The sample-vault part of qrels/spelled-right.queries.jsonl: not one rewrite."""
    queries = [json.loads(line) for line in
               (REPO / "qrels" / "spelled-right.queries.jsonl").read_text(encoding="utf-8").splitlines()]
    sample = [q["text"] for q in queries if q["vault"] == "sample"]
    assert len(sample) >= 50
    h = hybrid.open(tmp_path / "home", embedder="hash:64")
    try:
        h.add_vault(SAMPLE_VAULT, "sample")
        h.index()
        rewritten = {q: r.corrections for q in sample if (r := _search(h, q)).corrections}
        assert rewritten == {}
        assert _search(h, "zfs scrub schedlue").corrections == {"schedlue": "schedule"}
    finally:
        h.close()


MIXED = {"salary.md": "# Salary\n\nAsk for a raise in the yearly review; the raise was approved in March.\n",
         "travel.md": "# Travel\n\nBook the flights early and keep the passport in the carry-on.\n",
         "steuer.md": "# Steuererklärung\n\nDie Steuererklärung muss bis Ende Juli beim Finanzamt sein. "
                      "Die Fristen für die Abgabe und die Belege sind wichtig.\n",
         "backup.md": "# Резервное копирование\n\nРезервное копирование делается каждую ночь на внешний "
                      "диск, а раз в неделю в облако.\n"}


def test_a_word_of_a_language_the_vault_holds_is_never_rewritten(tmp_path):
    """A German question in a vault with German notes: "Reise" is a German word, never a typo
    of the English "raise" (which led to a salary note), and "Tokio" is not "tokyo"; a Russian
    word likewise. English typos are still repaired there, and a vault with no German notes
    still repairs "reise" as before."""
    h = _vaults(tmp_path, {"v": MIXED})
    try:
        from hybrid.retrieval.languages import held_languages
        assert held_languages(h.session.store(h.config.vault("v"))) == ["de", "ru"]
        for q in ("Tokio Reise", "Reise", "Fristen Reise", "копирование ночью"):
            r = _search(h, q)
            assert r.corrections == {} and r.suggestions == {}, q
        assert _search(h, "yearly reviw").corrections == {"reviw": "review"}
    finally:
        h.close()
    english = {k: v for k, v in MIXED.items() if k in ("salary.md", "travel.md")}
    h = _vaults(tmp_path / "en", {"v": english})
    try:
        assert h.session.store(h.config.vault("v")).ledger.get_meta("languages") == ""
        assert _search(h, "Reise").corrections == {"reise": "raise"}
    finally:
        h.close()
