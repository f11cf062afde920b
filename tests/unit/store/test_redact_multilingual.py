"""hybrid.store.agent.redact on the multilingual labelled set (tests/data/secrets_multilingual.jsonl,
issue #47). The figures: eval/bench/redact_recall.py."""
from collections import Counter

from secrets_fixtures import multilingual_set

POSITIVES, NEGATIVES = multilingual_set()


def test_the_set_is_what_the_issue_asks_for():
    """150+ credentials in 15+ languages over the classes of the issue, ids unique, each slot filled."""
    assert len(POSITIVES) >= 150
    langs = Counter(c["lang"] for c in POSITIVES)
    assert len(set(langs) - {"code"}) >= 15 and all(n >= 6 for n in langs.values())
    classes = {c["class"] for c in POSITIVES}
    assert {"keyword-colon", "prose-connector", "prose-bare", "frontmatter", "token-prose", "token-punct",
            "token-bare", "token-wrapped", "connection-string", "env", "json", "cli", "homoglyph"} <= classes
    ids = [c["id"] for c in POSITIVES + NEGATIVES]
    assert len(ids) == len(set(ids))
    assert all("{secret}" not in c["line"] and c["secret"] in c["line"] for c in POSITIVES)
    assert len(NEGATIVES) >= 40 and len({n["lang"] for n in NEGATIVES}) >= 15
