"""hybrid.store.agent.redact on the multilingual labelled set (tests/data/secrets_multilingual.jsonl,
issue #47). The figures: eval/bench/redact_recall.py."""
from collections import Counter

import pytest
from secrets_fixtures import fake_value, multilingual_set

from hybrid.store.agent.redact import REDACTED, Redactor

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


@pytest.fixture(scope="module")
def rd(kingfisher_cache):
    r = Redactor(kingfisher_cache)
    r.warm()
    return r


# Provider token shapes the built-in catalogue lacks: Notion's `secret_` tokens (it knows `ntn_`),
# Doppler's tokens other than personal ones (`dp.pt.`), Stripe webhook secrets and test-mode keys.
TOKEN_KINDS = ["notion-secret", "doppler-st", "doppler-st-env", "doppler-ct", "doppler-sa", "whsec", "whsec-hex",
               "stripe-test"]
CONTEXTS = ["{}", "The key {} is for staging.", "`{}`", '"{}"', "({}).", "{},", "key={}", "**{}**"]


@pytest.mark.parametrize("kind", TOKEN_KINDS)
def test_provider_token_shapes_wherever_they_stand(rd, kind):
    for seed, context in enumerate(CONTEXTS):
        token = fake_value(kind, seed)
        text = context.format(token)
        assert rd.redact(text) == context.format(REDACTED), (kind, text)


@pytest.mark.parametrize("text", [
    "secret_key_base_for_the_production_environment_of_the_app",  # an identifier, not a token
    "whsec_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",                  # a placeholder
    "dp.st.dev.xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "Set NOTION_TOKEN to the secret_... value from the integration page.",
])
def test_token_shapes_are_not_their_placeholders(rd, text):
    assert rd.spans(text) == []
