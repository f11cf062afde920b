"""CJK text as the lexical arm reads it (hybrid/core/tokens.py, hybrid/store/lexicon.py): each
run of Han, Hiragana, Katakana or Hangul becomes its overlapping character bigrams, in
documents and queries alike; text of spaced scripts is left exactly as it was."""
import re
import sys
import unicodedata

import pytest

from hybrid.core.tokens import (
    CJK_CHARS,
    CJK_RE,
    bigrams,
    has_cjk,
    ident_tokens,
    identifiers,
    split_cjk,
)
from hybrid.store.lexicon import spellable, stem_analyzer

STEM = stem_analyzer()


@pytest.mark.parametrize("run, grams", [
    ("保管庫", ["保管", "管庫"]),
    ("同步", ["同步"]),
    ("庫", ["庫"]),  # a single character stays a unigram
    ("보관소를", ["보관", "관소", "소를"]),
])
def test_bigrams_overlap_and_a_single_character_stays_whole(run, grams):
    assert bigrams(run) == grams


def test_analyzer_reads_cjk_runs_as_bigrams_and_the_words_around_them_as_before():
    assert STEM.analyze("保管庫をOneDriveに置いている") == [
        "保管", "管庫", "庫を", *STEM.tokenizer.analyze("OneDrive"), "に置", "置い", "いて", "てい", "いる"]
    assert STEM.analyze("文件同步。2024年") == ["文件", "件同", "同步", "2024", "年"]  # 。 separates


def test_text_without_cjk_is_untouched():
    text = "Tomatoes need six hours of sun; `orders-created` has 12 partitions — café."
    assert split_cjk(text) is text
    assert STEM.analyze(text) == STEM.tokenizer.analyze(text)


def test_every_cjk_character_is_a_letter_or_digit_for_tantivy_too():
    """A character of the class that tantivy's tokenizer took for punctuation would shift the
    bigrams' positions (and break phrases): every assigned one must be alphanumeric."""
    for lo, hi in re.findall(r"(.)-(.)", CJK_CHARS, re.S):
        for cp in range(ord(lo), min(ord(hi), 0x2FFFF) + 1):
            c = chr(cp)
            if unicodedata.category(c) != "Cn":
                assert c.isalnum(), (hex(cp), unicodedata.name(c, "?"))
    assert not CJK_RE.search("・、。「」゠ abc Ωμέγα Привет") and sys.maxunicode > 0xFFFF


def test_identifiers_stop_at_cjk_and_cjk_words_are_never_identifiers():
    assert identifiers("pg_dumpを使う error[E0502]が出る") == ["pg_dump", "error[E0502]"]
    assert ident_tokens("保管庫をOneDriveに置いている") == ["onedrive"]
    assert identifiers("保管庫") == []


def test_cjk_words_are_never_judged_for_typos():
    assert not spellable("保管庫をどこに") and not spellable("보관소를찾다")
    assert spellable("tomatos") and not spellable("toma")
    assert has_cjk("OneDriveの") and not has_cjk("OneDrive")
