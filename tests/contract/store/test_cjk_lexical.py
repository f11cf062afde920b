"""BM25 over text written without spaces (issue #29), on every backend: a Chinese, a Japanese and
a Korean note are found by a two-character word of them, a query mixing scripts finds both
halves, a CJK phrase matches only its characters in order, typo repair leaves CJK words alone,
and the hit marks the CJK word it holds. Real tantivy / PostgreSQL, hash embedder, lexical mode."""

from __future__ import annotations

import pytest
from conftest import store_param
from helpers import ALL_STORES, index_on_backend, set_chunking_version, write

from hybrid.store import open_store

STORES = ALL_STORES
NOTES = {
    "ja/sync.md": "# 同期の設定\n\n保管庫をOneDriveに置いている。スマートフォンとパソコンの間で自動的に同期される。\n",
    "zh/backup.md": "# 备份\n\n我们每天晚上把文件同步到服务器，并保留三十天的快照。\n",
    "ko/vault.md": "# 보관소\n\n보관소를 클라우드에 백업한다.\n",
    "en/onedrive.md": "# OneDrive\n\nThe vault lives in a OneDrive folder; sync conflicts create duplicate files.\n",
    "en/garden.md": "# Garden\n\nTomatoes need six hours of sun.\n",
}


@pytest.fixture(scope="module", params=[store_param(k) for k in ALL_STORES])
def h(request, tmp_path_factory):
    handle = index_on_backend(request, tmp_path_factory, NOTES)
    assert handle.index()[0].added == len(NOTES)
    yield handle
    handle.close()


def _paths(h, query, **kw) -> list[str]:
    return [x.path for x in h.search(query, mode="lexical", top_k=10, **kw)]


@pytest.mark.parametrize("query, path", [("保管", "ja/sync.md"), ("同期", "ja/sync.md"),
                                         ("同步", "zh/backup.md"), ("快照", "zh/backup.md"),
                                         ("보관소", "ko/vault.md")])
def test_a_cjk_note_is_found_by_a_two_character_word_of_it(h, query, path):
    assert _paths(h, query) == [path]


def test_the_agent_view_reads_cjk_alike(h):
    assert _paths(h, "同步", agent=True) == ["zh/backup.md"]


def test_a_query_mixing_scripts_finds_each_part(h):
    """`OneDrive 保管庫`: the Japanese note holds both words, the English one only the name."""
    assert sorted(_paths(h, "OneDrive 保管庫")) == ["en/onedrive.md", "ja/sync.md"]
    assert _paths(h, '"保管庫" OneDrive') == ["ja/sync.md"]
    # a Japanese question glued to an English product name still meets the English note
    assert "en/onedrive.md" in _paths(h, "OneDriveの使い方")


def test_a_cjk_phrase_matches_its_characters_in_order_only(h):
    assert _paths(h, '"文件同步"') == ["zh/backup.md"]
    assert _paths(h, '"同步文件"') == []          # the same characters, not in that order
    assert _paths(h, "同步文件") == ["zh/backup.md"]  # as free words, any of its bigrams
    assert _paths(h, '"保管庫" -"同步"') == ["ja/sync.md"]


def test_cjk_words_are_never_typos(h):
    r = h.search("保管庫をどこに置くか", mode="lexical")
    assert r.corrections == {} and r.suggestions == {} and r[0].path == "ja/sync.md"
    r = h.search("クラウドサービス", mode="lexical")  # no note holds it: still no "maybe you meant"
    assert r.corrections == {} and r.suggestions == {}
    store = open_store(h.config.vault("v"))
    try:
        assert store.lexical.corrections(["保管庫をどこに", "同步到服务器吧"]) == {}
        assert store.lexical.known(["保管庫", "同步", "クラウドサービス"]) == {"保管庫", "同步"}
    finally:
        store.close()


def test_the_hit_marks_the_cjk_words_it_holds(h):
    r = h.search("OneDrive 保管庫はどこ", mode="lexical")
    assert {x.path: x.marks for x in r}["ja/sync.md"] == ["onedrive", "保管庫"]


def test_an_index_written_before_cjk_bigrams_is_rebuilt_on_the_next_run(open_h, tmp_path, monkeypatch):
    """An index of chunking version 5 holds a CJK run as one token: the next `hybrid index`
    re-reads each note once and writes its lexical documents anew, embedding nothing."""
    import hybrid.store.lexicon as lexicon
    root = tmp_path / "vault"
    for rel in ("ja/sync.md", "zh/backup.md", "en/garden.md"):
        write(root, rel, NOTES[rel])
    handle = open_h(tmp_path / "home", embedder="hash:64")
    try:
        with monkeypatch.context() as m:
            m.setattr(lexicon, "split_cjk", lambda text: text)  # the tokens of version 5
            handle.add_vault(root, "v")
            handle.index()
        assert _paths(handle, "同步") == []  # the old tokens: `我们每天晚上把文件同步到服务器`
        set_chunking_version(handle.config.vault("v"), 5)
        assert handle.status()[0].changes.changed == 3  # what the next run will do
        report = handle.index()[0]
        assert (report.updated, report.chunks_embedded) == (3, 0)
        assert _paths(handle, "同步") == ["zh/backup.md"] and _paths(handle, "保管") == ["ja/sync.md"]
    finally:
        handle.close()
