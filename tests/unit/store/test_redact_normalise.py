"""hybrid.store.agent.redact: secrets hidden from byte patterns (invisible characters, HTML entities, full-width
letters, a line break inside a token) are found in a normalised copy and redacted in the original;
credential columns of tables; passphrases. The corpus-wide figures are in test_redact_corpus.py."""
import random
import string
import time

import pytest
from secrets_fixtures import B62, fake_secrets, fake_value

from hybrid.store.agent.redact import REDACTED, Redactor
from hybrid.store.agent.redact_copy import View

CASES = {c["name"]: c for c in fake_secrets()}


@pytest.fixture(scope="module")
def rd(kingfisher_cache):
    r = Redactor(kingfisher_cache)
    r.warm()
    return r


def test_view_maps_a_deletion_back():
    view = View("ab\u200bcd", [(2, 3, "")])
    assert view.text == "abcd"
    assert (view.original(1, end=False), view.original(3, end=True)) == (1, 4)  # "bc" covers the ZWSP
    assert (view.original(0, end=False), view.original(2, end=True)) == (0, 2)  # "ab" stops before it
    assert (view.original(2, end=False), view.original(4, end=True)) == (3, 5)  # "cd" starts after it


def test_view_maps_a_replacement_back():
    text = "pw&#58; x"
    view = View(text, [(2, 7, ":")])
    assert view.text == "pw: x"
    assert view.original(4, end=False) == len("pw&#58; ")          # after the entity: shifted by 4
    assert (view.original(2, end=False), view.original(3, end=True)) == (2, 7)  # the ":" is the entity


def test_view_maps_an_insertion_back():
    view = View("key), ok", [(3, 3, " ")])
    assert view.text == "key ), ok"
    assert (view.original(0, end=False), view.original(3, end=True)) == (0, 3)
    assert view.original(5, end=False) == 4  # the "," after the inserted space


def test_view_merges_adjacent_edits():
    view = View("a\u200b\u200bb", [(1, 2, ""), (2, 3, "")])
    assert view.text == "ab"
    assert (view.original(0, end=False), view.original(2, end=True)) == (0, 4)


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
@pytest.mark.parametrize("name", ["token-zero-width-space", "token-soft-hyphen", "keyword-zero-width",
                                  "html-entity-colon-decimal", "html-escaped-json", "fullwidth-aws-key-id",
                                  "fullwidth-keyword", "nbsp-before-value"])
def test_secret_found_in_the_copy_is_redacted_in_the_original(rd, name):
    """The span covers the original characters: the invisible one inside the token too."""
    case = CASES[name]
    text, secret = case["line"], case["secret"]
    start = text.index(secret)
    assert any(s <= start and start + len(secret) <= e for s, e in rd.spans(text))
    out = rd.redact(text)
    assert secret not in out and REDACTED in out
    assert rd.redact(out) == out


def test_wrapped_token_keeps_the_line_count(rd):
    case = CASES["token-split-by-newline"]
    first, second = case["secret"].split("\n")
    out = rd.redact(case["line"])
    assert first not in out and second not in out
    assert out.count("\n") == case["line"].count("\n")
    assert out.splitlines()[-1] == "thanks!"  # the next line is not joined to the token


def test_redact_parts_token_wrapped_at_a_chunk_boundary(rd):
    """Chunks without overlap are joined with a newline; the token cut there is re-joined."""
    case = CASES["token-split-by-newline"]
    first, second = case["secret"].split("\n")
    parts = [f"My token:\n{first}", f"{second}\nthanks!"]
    out = rd.redact_parts(parts)
    assert first not in out[0] and second not in out[1]
    assert [p.count("\n") for p in out] == [p.count("\n") for p in parts]


def test_table_credential_column(rd):
    rnd = random.Random(3)
    pw = "".join(rnd.choice(B62) for _ in range(10)) + "!7"
    table = ("| Service | Login | Password | Notes |\n|:--|---|---|---|\n"
             f"| NAS | alice | `{pw}` | rotated 2024-05 |\n| Router | admin | in the vault | - |\n"
             "| Printer | - | none | |\n\nAfter the table: password policy is 12 characters.")
    out = rd.redact(table)
    assert out == table.replace(pw, REDACTED)  # header, placeholders and notes unchanged
    assert rd.redact(out) == out


def test_table_token_column_needs_random_values(rd):
    """A Token header is also a word of NLP tables: only random-looking cells go."""
    tok = "".join(random.Random(4).choice(B62) for _ in range(24)) + "9"
    table = f"| Token | POS |\n|---|---|\n| running | VERB |\n| {tok} | X |\n| 2024 | NUM |"
    assert rd.redact(table) == table.replace(tok, REDACTED)


@pytest.mark.parametrize(("line", "kept"), [
    ("passphrase: quartz violin lantern meadow", False),
    ("password: correct horse battery staple", False),
    ("password: see the vault entry", True),        # words of a sentence
    ("password: same as the wifi one", True),
    ("password: 12 chars minimum", True),           # a number first
    ("passphrase: (none)", True),
])
def test_passphrase_runs_to_the_end_of_the_line(rd, line, kept):
    value = line.split(": ", 1)[1]
    out = rd.redact(line)
    assert out == (line if kept else line.replace(value, REDACTED))


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_many_findings_in_one_long_non_ascii_line_stay_linear(rd):
    """Offsets are converted in one pass and a passphrase is looked for in a window: a note of one
    long line with thousands of values took minutes when each finding re-read the text."""
    rnd = random.Random(5)
    text = " ".join(f"пароль: {''.join(rnd.choice(string.ascii_letters) for _ in range(8))}7!" for _ in range(10_000))
    start = time.perf_counter()
    spans = rd.spans(text)
    assert len(spans) == 10_000
    assert time.perf_counter() - start < 5  # about 0.5 s; the quadratic version took over 20 s


# A token with one letter written in Cyrillic or Greek (a homoglyph) reads the same and fools every
# byte pattern; the copy folds such letters to Latin inside a run that mixes the scripts.
@pytest.mark.parametrize("kind", ["homoglyph-ghp", "homoglyph-stripe-sk", "homoglyph-aws-akid",
                                  "homoglyph-slack-bot", "homoglyph-gitlab", "homoglyph-openai-proj"])
@pytest.mark.parametrize("context", ["{}", "Мой токен: {} (не трогать)", "Το κλειδί είναι {} εδώ", "`{}`"])
def test_token_with_a_homoglyph_is_redacted_whole(rd, kind, context):
    token = fake_value(kind, seed=len(context))
    assert not token.isascii()
    text = context.format(token)
    assert rd.redact(text) == context.format(REDACTED)


def test_a_homoglyph_from_the_whole_cyrillic_block_is_folded(rd):
    """U+04BB (һ) lies past U+047F, where the mixed-script hint did not look (re-test of #47)."""
    rnd = random.Random(9)
    token = "ghp_" + "".join(rnd.choice(B62) for _ in range(36))
    for glyph in ("\u04bb", "\u0501"):  # һ, ԁ
        shown = token.replace("h", glyph, 1) if glyph == "\u04bb" else token[:6] + glyph + token[7:]
        assert rd.redact(f"token {shown} here") == f"token {REDACTED} here", glyph


@pytest.mark.parametrize("kind, swap", [("jwt", (".eyJ", ".\u0435yJ")), ("sendgrid", ("1Oo", "1O\u043e")),
                                        ("github-pat", ("ghp_", "gh\u0440_"))])
def test_a_look_alike_after_a_tokens_dot_or_palochka_is_folded(rd, kind, swap):
    """A JWT or SendGrid key with a look-alike just after one of its dots got a space put after
    the dot in the copy (a token then punctuation), which split it (second re-test of #47)."""
    token = CASES[kind]["secret"]
    assert swap[0] in token
    shown = token.replace(*swap, 1)
    assert rd.redact(f"it is {token} here") == f"it is {REDACTED} here"
    assert rd.redact(f"it is {shown} here") == f"it is {REDACTED} here", shown
    for latin, glyph in (("l", "\u04cf"), ("g", "\u050d"), ("S", "\u0405"), ("F", "\u050c")):  # ӏ ԍ Ѕ Ԍ
        shown = "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".replace(latin, glyph, 1)
        assert rd.redact(f"x {shown} y") == f"x {REDACTED} y", glyph



@pytest.mark.parametrize("line", ["p\u0430ssword: {}", "DB_P\u0410SSWORD={}", "api_k\u0435y = '{}'"])
def test_keyword_with_a_homoglyph(rd, line):
    value = "".join(random.Random(8).choice(B62) for _ in range(14)) + "7"
    assert rd.redact(line.format(value)) == line.format(REDACTED)


@pytest.mark.parametrize("text", [
    "Python-скрипт обновляет GitHub-репозиторий каждые 5мин.",   # scripts side by side, not mixed
    "Купил iPhone, пароль поменяю завтра.",
    "Το iPhone 15 και το Wi-Fi 6E δουλεύουν μαζί.",
    "Сервер srv01 в стойке 4А, порт 8080.",                      # a Cyrillic А after a digit
    "ΑΚΙΑ ΒΕΤΑ: Greek capitals that look Latin, in a Greek word.",
])
def test_mixed_scripts_in_ordinary_text_stay(rd, text):
    assert rd.spans(text) == []


def test_no_copy_without_a_run_that_mixes_latin_and_cyrillic_or_greek(rd):
    from hybrid.store.agent.redact_copy import normalised_copy

    plain = "Подготовка к полумарафону: 12 недель, 5км по вторникам, Ζώνη 2."
    assert normalised_copy(plain, rd._scan(rd._get_scanner(), plain)) is None
    mixed = "token ghp_Ab3\u0441def"
    view = normalised_copy(mixed, rd._scan(rd._get_scanner(), mixed))
    assert view is not None and view.text == "token ghp_Ab3cdef"
