"""How far a query is not English (hybrid.core.lang): the mix embedder's weights come from it."""

import pytest

from hybrid.core.lang import foreign


@pytest.mark.parametrize("text", [
    "how do I restore an old version of a note",
    "tailscale subnet router",
    "I messed up a note, can I bring back how it looked earlier today?",
    "",
    "12345 --- !!!",
])
def test_english_and_wordless_texts_are_not_foreign(text):
    assert foreign(text) == 0.0


@pytest.mark.parametrize("text", [
    "Как открыть ссылку на другую заметку в новой вкладке?",
    "保管庫をOneDriveに置いていると、ファイルが見つからないのはなぜ",
    "如何同步笔记",
    "كيف أغير لغة الواجهة",
    "Tabelle in Notiz einfügen",
    "notas al pie",
    "raccourcis clavier AZERTY",
    "Kann ich eine Notiz als PDF speichern, damit ich sie ausdrucken kann?",
])
def test_other_languages_are_mostly_foreign(text):
    assert foreign(text) > 0.5


def test_a_mixed_query_is_in_between():
    # an English word beside a Japanese one: both say something
    assert 0.0 < foreign("folder 保管庫") < 1.0
    # a CJK run counts one word per two characters, so a long run outweighs one Latin word
    assert foreign("folder 保管庫に置いているファイル") > foreign("folder 保管庫")
    # a name in no word list says nothing either way
    assert foreign("OneDrive 保管庫") == 1.0 and foreign("OneDrive sync settings") == 0.0


def test_the_share_of_texts_in_other_languages():
    from hybrid.core.lang import other_language_share
    english = "Tomato plants need at least six hours of direct sun a day and deep watering."
    german = "Um einen platten Reifen zu flicken, nimm den Schlauch heraus und suche das Loch."
    russian = "Декларацию о доходах за прошлый год нужно подать в налоговую инспекцию."
    assert other_language_share([]) == 0.0
    assert other_language_share([english] * 3) == 0.0
    assert other_language_share([english, german, russian, english]) == 0.5


def test_the_languages_a_vaults_texts_are_in():
    """Which word lists' languages a vault holds: each text mostly not English is in the
    language whose list holds most of its words (two at least). English, CJK (no list) and a
    text of names say none."""
    from hybrid.core.lang import languages_held
    english = "Tomato plants need at least six hours of direct sun a day and deep watering."
    german = "Um einen platten Reifen zu flicken, nimm den Schlauch heraus und suche das Loch."
    russian = "Декларацию о доходах за прошлый год нужно подать в налоговую инспекцию."
    spanish = "La receta de la abuela lleva tomates, cebolla y un poco de aceite de oliva."
    assert languages_held([]) == [] and languages_held([english] * 3) == []
    assert languages_held([english, german, russian]) == ["de", "ru"]
    assert languages_held([spanish, english]) == ["es"]
    assert languages_held(["我们每天晚上把文件同步到服务器", "OneDrive Tailscale Syncthing"]) == []


def test_unread_script_names_the_script_most_words_are_in_when_none_is_read():
    from hybrid.core.lang import unread_script
    latin = frozenset({"LATIN"})
    assert unread_script("ხაჭაპური ყველი", latin) == "Georgian"
    assert unread_script("μουσακά με μελιτζάνες", latin) == "Greek"
    assert unread_script("दाल मखनी recipe", latin) == "Devanagari"  # two words of three
    assert unread_script("ხაჭაპური recipe", latin) is None  # half is read: the model still helps
    assert unread_script("café crème brûlée", latin) is None  # accents are Latin letters
    assert unread_script("cafe\u0301", latin) is None  # an accent written apart is no script
    assert unread_script("?!? ... 42", latin) is None  # no words at all
    assert unread_script("привет мир", latin) == "Cyrillic"
    assert unread_script("привет мир", latin | {"CYRILLIC"}) is None
