"""Table-driven tests of the pure IR functions: query literals, one-edit matching, snippets,
exact-first promotion and rank fusion. Expected values are derived (``1 / (60 + 1)``, a
reference edit distance, the flattened text) rather than pasted, and every case asserts the
current behaviour, quirks included, so a change to any of them is a visible decision."""
import itertools
import random

import pytest

from hybrid.core.tokens import literals, within_one_edit
from hybrid.retrieval.exact import exact_first
from hybrid.retrieval.fuse import demote, merge_by_score, ranks, rrf
from hybrid.retrieval.hits import snippet
from hybrid.store.base import ChunkRow


def case(id, *values):
    return pytest.param(*values, id=id)


def assert_ranked(got, expected):
    """Same keys in the same order, scores equal up to float rounding."""
    assert [key for key, _ in got] == [key for key, _ in expected]
    assert [s for _, s in got] == pytest.approx([s for _, s in expected])


# --- literals -------------------------------------------------------------------------------

@pytest.mark.parametrize("words, expected", [
    case("empty-query", [], []),
    case("empty-word", [""], []),
    case("plain-word", ["Kafka"], []),
    case("plain-words", ["restic", "retention", "policy"], []),
    case("ticket-id", ["FORGE-1533"], ["FORGE-1533"]),
    case("letter-digit-code", ["K7QX2M"], ["K7QX2M"]),
    case("lowercase-letter-digit-code", ["abc1"], ["abc1"]),
    case("digits-first-code", ["1234abcd"], ["1234abcd"]),
    case("code-too-short", ["ab1"], []),
    case("two-char-code-too-short", ["x2"], []),
    case("all-caps-name", ["GOMEMLIMIT"], ["GOMEMLIMIT"]),
    case("all-caps-four-letters", ["ABCD"], ["ABCD"]),
    case("all-caps-three-letters-too-short", ["ABC"], []),
    case("caps-and-digit", ["HTTP2"], ["HTTP2"]),
    case("bare-number-is-not-a-code", ["2024"], []),
    case("dashed-identifier", ["orders-created"], ["orders-created"]),
    case("single-letter-dash-pair", ["a-b"], ["a-b"]),
    case("cli-flag", ["--advertise-routes"], ["--advertise-routes"]),
    case("short-flag-quirk", ["-x"], ["-x"]),
    case("cidr", ["10.0.0.0/24"], ["10.0.0.0/24"]),
    case("dotted-version", ["v1.2.3"], ["v1.2.3"]),
    case("dotted-acronym", ["U.S.A"], ["U.S.A"]),
    case("trailing-dot-dropped", ["e.g."], ["e.g"]),
    case("sentence-dot-is-not-inner", ["foo.", "bar"], []),
    case("uri", ["obsidian://open"], ["obsidian://open"]),
    case("email", ["user@example.com"], ["user@example.com"]),
    case("snake-case", ["snake_case"], ["snake_case"]),
    case("rust-error-code", ["error[E0502]"], ["error[E0502]"]),
    case("call-with-argument", ["pg_try_advisory_lock(42001)"], ["pg_try_advisory_lock(42001)"]),
    case("prose-parentheses", ["(see", "x)"], []),
    case("dashes-only", ["---"], ["---"]),  # punctuation alone is named verbatim
    case("markdown-comment", ["%%", "comments"], ["%%"]),
    case("one-symbol-is-not-a-run", ["+", "x"], []),
    case("unicode-compound", ["café-bar"], ["café-bar"]),
    case("unicode-caps-four", ["ÉTÉS"], ["ÉTÉS"]),
    case("unicode-caps-three-too-short", ["ÉTÉ"], []),
    case("sharp-s-is-lowercase", ["ÄÖÜß"], []),
    case("unicode-plain-word", ["naïve"], []),
    case("duplicates-collapse", ["FORGE-1533", "FORGE-1533"], ["FORGE-1533"]),
    case("case-variants-kept-apart", ["k7qx2m", "K7QX2M"], ["k7qx2m", "K7QX2M"]),
    case("mixed-query-keeps-order", ["ABCD", "tailscale", "K7QX2M"], ["ABCD", "K7QX2M"]),
])
def test_literals(words, expected):
    assert literals(words) == expected


# --- within_one_edit ------------------------------------------------------------------------

def osa_distance(a: str, b: str) -> int:
    """Reference: optimal-string-alignment distance (Damerau-Levenshtein with transpositions of
    neighbours only), by the textbook dynamic programme."""
    d = [[i + j if i * j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i, j in itertools.product(range(1, len(a) + 1), range(1, len(b) + 1)):
        d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
        if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
            d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[len(a)][len(b)]


EDIT_PAIRS = [
    case("both-empty", "", ""),
    case("empty-vs-one", "", "a"),
    case("empty-vs-two", "", "ab"),
    case("equal", "kafka", "kafka"),
    case("substitution", "kafka", "kaxka"),
    case("two-substitutions", "kafka", "kxfxa"),
    case("insertion-at-end", "kafka", "kafkaa"),
    case("deletion-at-start", "kafka", "afka"),
    case("deletion-at-end", "kafka", "kafk"),
    case("transposition-at-end", "kafka", "kafak"),
    case("transposition-at-start", "kafka", "akfka"),
    case("transposition-inside", "tailscale", "tailsclae"),
    case("two-letter-swap", "ab", "ba"),
    case("reversal-is-not-one-edit", "abc", "cba"),
    case("two-transpositions", "abcd", "badc"),
    case("length-differs-by-two", "abc", "abcde"),
    case("single-chars", "a", "b"),
    case("case-is-a-substitution", "Kafka", "kafka"),
    case("dash-vs-underscore", "orders-created", "orders_created"),
    case("dash-dropped", "orders-created", "orderscreated"),
    case("cidr-last-digit", "10.0.0.0/24", "10.0.0.0/25"),
    case("accent-substituted", "café", "cafe"),
    case("accent-kept-letter-dropped", "café", "caé"),
    case("diaeresis", "naïve", "naive"),
    case("sharp-s-vs-ss", "ß", "ss"),
    # Code points, not user-perceived characters: NFC é against NFD e + combining acute.
    case("nfc-vs-nfd", "café", "cafe\u0301"),
]


@pytest.mark.parametrize("a, b", EDIT_PAIRS)
def test_within_one_edit_matches_the_reference_distance(a, b):
    assert within_one_edit(a, b) is within_one_edit(b, a) is (osa_distance(a, b) <= 1)


@pytest.mark.parametrize("a, b, expected", [
    case("transposition", "kafka", "kafak", True),
    case("two-substitutions", "kafka", "kxfxa", False),
    case("nfc-vs-nfd", "café", "cafe\u0301", False),
])
def test_within_one_edit_spot_checks(a, b, expected):
    """The reference distance itself, pinned on a few pairs."""
    assert within_one_edit(a, b) is expected


def test_within_one_edit_agrees_with_the_reference_on_random_words():
    rng = random.Random(10)
    for _ in range(3000):
        a = "".join(rng.choice("abé") for _ in range(rng.randint(0, 5)))
        b = "".join(rng.choice("abé") for _ in range(rng.randint(0, 5)))
        assert within_one_edit(a, b) is (osa_distance(a, b) <= 1), (a, b)


# --- snippet --------------------------------------------------------------------------------

WORDS = " ".join(f"w{i:03d}" for i in range(200))  # 200 five-character words, 999 characters
W = 40


def flat(text: str) -> str:
    return " ".join(text.split())


def window(text: str, first: int, last: int) -> str:
    """The words w<first>..w<last> of WORDS."""
    return " ".join(f"w{i:03d}" for i in range(first, last + 1))


@pytest.mark.parametrize("text, needles, width, expected", [
    case("empty-text", "", ["x"], W, ""),
    case("short-text-whitespace-flattened", "  a\n\n b\tc  ", [], W, flat("  a\n\n b\tc  ")),
    case("text-exactly-width", "x" * W, [], W, "x" * W),
    case("no-needles-keeps-the-start", WORDS, [], W, WORDS[:WORDS.rfind(" ", 0, W)] + "…"),
    case("needle-absent-keeps-the-start", WORDS, ["zz"], W, WORDS[:WORDS.rfind(" ", 0, W)] + "…"),
    case("one-char-needles-ignored", WORDS, ["w"], W, WORDS[:WORDS.rfind(" ", 0, W)] + "…"),
    # needles are matched against the lowercased text: callers pass them lowercased
    case("uppercase-needle-does-not-match", WORDS, ["W150"], W, WORDS[:WORDS.rfind(" ", 0, W)] + "…"),
    # the window opens width // 6 characters before the hit, at the next word boundary
    case("needle-in-the-middle", WORDS, ["w150"], W, "…" + window(WORDS, 149, 156) + "…"),
    case("needle-at-the-end", WORDS, ["w199"], W, "…" + window(WORDS, 192, 199)),
    case("no-space-to-cut-at", "a" * 100, ["zz"], W, "a" * W + "…"),
])
def test_snippet(text, needles, width, expected):
    assert snippet(text, needles, width) == expected


@pytest.mark.parametrize("needles, expect_in", [
    case("dashed-identifier", ["orders-created"], "orders-created"),
    case("unicode-words", ["straße", "café-bar"], "Straße café-bar"),
    case("densest-cluster-wins", ["alpha", "beta"], "alpha beta"),
])
def test_snippet_centres_on_the_query_words(needles, expect_in):
    text = ("filler " * 40 + "alpha " + "filler " * 40 + "Straße café-bar orders-created alpha beta "
            + "filler " * 40)
    out = snippet(text, needles, 60)
    assert expect_in in out
    body = out.strip("…")
    assert body in flat(text) and len(body) <= 60
    assert out.startswith("…") and out.endswith("…")


def test_snippet_ignores_a_needle_inside_a_longer_word():
    text = "filler " * 50 + "xorders-created orders-created " + "filler " * 50
    out = snippet(text, ["orders-created"], 40)
    assert out.startswith("…orders-created ")


# --- exact_first ----------------------------------------------------------------------------

def row(text: str, title: str = "", heading: str = "") -> ChunkRow:
    return ChunkRow(id=0, path="n.md", title=title, heading=heading, start_line=1, end_line=1,
                    text=text, tags=[], aliases=[], modified=0.0, embed_hash="")


ROWS = {
    "plain": row("nothing to see"),
    "ticket": row("fixed in FORGE-1533 last week"),
    "ticket-title": row("the fix", title="FORGE-1533 post-mortem"),
    "ticket-heading": row("the fix", heading="Notes > forge-1533"),
    "both": row("FORGE-1533 and K7QX2M"),
}
FUSED = [("plain", 0.5), ("ticket", 0.4), ("both", 0.3), ("ticket-title", 0.2), ("ticket-heading", 0.1)]
S = dict(FUSED)


@pytest.mark.parametrize("fused, lex_keys, lits, lookup, expected", [
    case("no-literals-is-identity", FUSED, list(ROWS), [], False, FUSED),
    case("no-lexical-hits", FUSED, [], ["FORGE-1533"], False, FUSED),
    case("no-row-contains-the-literal", FUSED, list(ROWS), ["ZZZ-9"], False, FUSED),
    case("empty-fusion", [], list(ROWS), ["FORGE-1533"], False, []),
    # found in text, title and heading alike; the note named for it (its title) first
    case("text-title-heading-case-insensitive", FUSED, list(ROWS), ["forge-1533"], False,
         [("ticket-title", 1.5 + S["ticket-title"]), ("ticket", 1 + S["ticket"]), ("both", 1 + S["both"]),
          ("ticket-heading", 1 + S["ticket-heading"]), ("plain", S["plain"])]),
    case("every-literal-must-occur", FUSED, list(ROWS), ["FORGE-1533", "K7QX2M"], False,
         [("both", 1 + S["both"])] + [kv for kv in FUSED if kv[0] != "both"]),
    case("only-lexical-hits-are-promoted", FUSED, ["plain", "both"], ["FORGE-1533"], False,
         [("both", 1 + S["both"])] + [kv for kv in FUSED if kv[0] != "both"]),
    case("lookup-takes-bm25-order", FUSED, ["ticket-heading", "both", "ticket"], ["FORGE-1533"], True,
         [("ticket-heading", 1 + S["ticket-heading"]), ("both", 1 + S["both"]), ("ticket", 1 + S["ticket"]),
          ("plain", S["plain"]), ("ticket-title", S["ticket-title"])]),
    case("lookup-adds-a-lexical-hit-fusion-lacked", [("plain", 0.5)], ["ticket"], ["FORGE-1533"], True,
         [("ticket", 1.0), ("plain", 0.5)]),
    case("fused-order-drops-a-hit-fusion-lacked", [("plain", 0.5)], ["ticket"], ["FORGE-1533"], False,
         [("plain", 0.5)]),
    case("lexical-key-without-a-row", FUSED, ["missing", "ticket"], ["FORGE-1533"], False,
         [("ticket", 1 + S["ticket"])] + [kv for kv in FUSED if kv[0] != "ticket"]),
])
def test_exact_first(fused, lex_keys, lits, lookup, expected):
    assert_ranked(exact_first(fused, lex_keys, ROWS, lits, lookup), expected)


def test_exact_first_without_literals_returns_the_same_list():
    assert exact_first(FUSED, list(ROWS), ROWS, []) is FUSED


# --- fusion ---------------------------------------------------------------------------------

def rr(*ranks_, k=60.0, w=1.0):
    """Sum of w / (k + rank): the expected RRF score of a key at ``ranks_``."""
    return sum(w / (k + r) for r in ranks_)


@pytest.mark.parametrize("rankings, kwargs, expected", [
    case("no-rankings", [], {}, []),
    case("empty-rankings", [[], []], {}, []),
    case("one-ranking", [["a", "b"]], {}, [("a", rr(1)), ("b", rr(2))]),
    case("sums-reciprocal-ranks", [["a", "b", "c"], ["c", "a"]], {},
         [("a", rr(1, 2)), ("c", rr(3, 1)), ("b", rr(2))]),
    case("tie-keeps-first-seen", [["a", "b"], ["b", "a"]], {}, [("a", rr(1, 2)), ("b", rr(2, 1))]),
    case("k-zero", [["a", "b"]], {"k": 0}, [("a", 1.0), ("b", 0.5)]),
    case("k-float", [["a"], ["a", "b"]], {"k": 2.5}, [("a", rr(1, 1, k=2.5)), ("b", rr(2, k=2.5))]),
    case("small-k-favours-the-top", [["a", "b", "c"], ["b", "c", "a"]], {"k": 1},
         [("b", rr(2, 1, k=1)), ("a", rr(1, 3, k=1)), ("c", rr(3, 2, k=1))]),
    case("weights", [["a"], ["b"]], {"k": 10, "weights": [2.0, 1.0]},
         [("a", rr(1, k=10, w=2.0)), ("b", rr(1, k=10))]),
    case("weight-zero-keeps-the-key", [["a"], ["b"]], {"weights": [1.0, 0.0]}, [("a", rr(1)), ("b", 0.0)]),
    case("all-weights-zero", [["a", "b"], ["b"]], {"weights": [0, 0]}, [("a", 0.0), ("b", 0.0)]),
    case("weights-tuple", [["a"], ["b"]], {"weights": (1.0, 3.0)}, [("b", rr(1, w=3.0)), ("a", rr(1))]),
    case("duplicate-in-one-ranking-counts-twice", [["a", "b", "a"]], {}, [("a", rr(1, 3)), ("b", rr(2))]),
    case("tuple-keys", [[("v", 1), ("v", 2)]], {}, [(("v", 1), rr(1)), (("v", 2), rr(2))]),
])
def test_rrf(rankings, kwargs, expected):
    assert_ranked(rrf(rankings, **kwargs), expected)


@pytest.mark.parametrize("rankings, kwargs, message", [
    case("negative-k", [["a"]], {"k": -1}, "k must be >= 0"),
    case("too-many-weights", [["a"]], {"weights": [1, 2]}, "one weight per ranking"),
    case("too-few-weights", [["a"], ["b"]], {"weights": [1]}, "one weight per ranking"),
    case("weights-without-rankings", [], {"weights": [1]}, "one weight per ranking"),
])
def test_rrf_refuses(rankings, kwargs, message):
    with pytest.raises(ValueError, match=message):
        rrf(rankings, **kwargs)


@pytest.mark.parametrize("ranking, expected", [
    case("empty", [], {}),
    case("one-based", ["x", "y", "z"], {"x": 1, "y": 2, "z": 3}),
    case("duplicate-takes-the-last-rank", ["a", "b", "a"], {"a": 3, "b": 2}),
    case("tuple-keys", [("v", 7)], {("v", 7): 1}),
])
def test_ranks(ranking, expected):
    assert ranks(ranking) == expected


@pytest.mark.parametrize("lists, limit, expected", [
    case("no-lists", [], 5, []),
    case("empty-lists", [[], []], 5, []),
    case("limit-zero", [[("a", 1.0)]], 0, []),
    case("by-score-across-lists", [[("a", 0.5), ("b", 0.1)], [("c", 0.9)]], 2, [("c", 0.9), ("a", 0.5)]),
    case("limit-above-length", [[("a", 0.5)], [("b", 0.7)]], 10, [("b", 0.7), ("a", 0.5)]),
    case("ties-keep-list-order", [[("a", 0.5)], [("b", 0.5)], [("c", 0.5)]], 3,
         [("a", 0.5), ("b", 0.5), ("c", 0.5)]),
    case("negative-scores", [[("a", -1.0)], [("b", -0.5)]], 2, [("b", -0.5), ("a", -1.0)]),
    case("same-key-in-two-lists-kept-twice", [[("a", 0.5)], [("a", 0.4)]], 5, [("a", 0.5), ("a", 0.4)]),
])
def test_merge_by_score(lists, limit, expected):
    assert merge_by_score(lists, limit) == expected


@pytest.mark.parametrize("scores, penalties, expected", [
    case("empty", [], {"a": 0.5}, []),
    case("no-penalties", [("a", 1.0), ("b", 0.5)], {}, [("a", 1.0), ("b", 0.5)]),
    case("penalty-reorders", [("a", 1.0), ("b", 0.95)], {"a": 0.1}, [("b", 0.95), ("a", 1.0 * (1 - 0.1))]),
    case("penalty-one-zeroes", [("a", 1.0), ("b", 0.1)], {"a": 1.0}, [("b", 0.1), ("a", 0.0)]),
    case("penalty-zero-is-identity", [("a", 1.0)], {"a": 0.0}, [("a", 1.0)]),
    case("unknown-penalty-keys-ignored", [("a", 1.0)], {"zz": 0.9}, [("a", 1.0)]),
    case("tie-after-penalty-keeps-order", [("a", 1.0), ("b", 0.5)], {"a": 0.5}, [("a", 0.5), ("b", 0.5)]),
    case("equal-penalties-keep-order", [("a", 0.8), ("b", 0.4)], {"a": 0.5, "b": 0.5},
         [("a", 0.8 * 0.5), ("b", 0.4 * 0.5)]),
])
def test_demote(scores, penalties, expected):
    assert_ranked(demote(scores, penalties), expected)


def test_demote_and_merge_do_not_mutate_their_input():
    scores, lists = [("a", 1.0), ("b", 0.95)], [[("a", 0.1), ("b", 0.9)]]
    demote(scores, {"a": 0.5})
    merge_by_score(lists, 1)
    assert scores == [("a", 1.0), ("b", 0.95)] and lists == [[("a", 0.1), ("b", 0.9)]]
