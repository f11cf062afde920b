"""Recall and precision of hybrid.store.agent.redact on the labelled corpus in tests/secrets_fixtures.py.

A positive counts as caught when every character of each labelled secret lies in a redacted span
and no piece of it survives in the redacted text. Precision is measured twice: the share of
negative snippets (ordinary notes, placeholders) that come back unchanged, and the share of all
redacted spans, over positives and negatives, that touch a labelled secret.

Print the figures (``before`` numbers in eval/reports/security/secrets-detectors.md came from the same
function run against the previous redact.py); ``--time`` adds the cost per call::

    .venv/bin/python tests/unit/store/test_redact_corpus.py [--time]
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import pytest

sys.path.insert(0, str(Path(__file__).parents[2]))  # as a script: tests/, for secrets_fixtures and helpers
from secrets_fixtures import HARD_NEGATIVES, ORDINARY_NOTES, covered, fake_secrets, leaked  # noqa: E402

RECALL_FLOOR = 1.0
NEGATIVES_UNCHANGED_FLOOR = 0.97
SPAN_PRECISION_FLOOR = 0.97


class _SpanFinder(Protocol):
    def spans(self, text: str) -> list[tuple[int, int]]: ...
    def redact(self, text: str) -> str: ...


@dataclass
class Score:
    positives: int = 0
    caught: int = 0
    negatives: int = 0
    unchanged: int = 0
    spans: int = 0
    true_spans: int = 0
    missed: list[str] = field(default_factory=list)
    over_redacted: list[str] = field(default_factory=list)

    @property
    def recall(self) -> float:
        return self.caught / self.positives

    @property
    def negatives_unchanged(self) -> float:
        return self.unchanged / self.negatives

    @property
    def span_precision(self) -> float:
        return self.true_spans / self.spans if self.spans else 1.0

    def summary(self) -> str:
        return (f"recall {self.caught}/{self.positives} ({self.recall:.3f}), "
                f"precision {self.span_precision:.3f} ({self.true_spans}/{self.spans} spans on a secret; "
                f"negatives unchanged {self.unchanged}/{self.negatives} = {self.negatives_unchanged:.3f})")


def evaluate(rd: _SpanFinder, seed: int = 12) -> Score:
    score = Score()
    for case in fake_secrets(seed):
        text = case["line"]
        spans = rd.spans(text)
        out = rd.redact(text)
        places = [(text.index(s), text.index(s) + len(s)) for s in case["secrets"]]
        score.positives += 1
        if all(covered(text, s, spans) and not leaked(s, out) for s in case["secrets"]):
            score.caught += 1
        else:
            score.missed.append(case["name"])
        score.spans += len(spans)
        score.true_spans += sum(any(s < pe and e > ps for ps, pe in places) for s, e in spans)
    for text in [*HARD_NEGATIVES, *ORDINARY_NOTES]:
        spans = rd.spans(text)
        score.negatives += 1
        score.spans += len(spans)
        if spans or rd.redact(text) != text:
            score.over_redacted.append(text)
        else:
            score.unchanged += 1
    return score


@pytest.fixture(scope="module")
def score(kingfisher_cache) -> Score:
    from hybrid.store.agent.redact import Redactor

    rd = Redactor(kingfisher_cache)
    return evaluate(rd)


def test_corpus_size():
    """The corpus the figures are quoted on: about 70 positives and 60 ordinary notes at least."""
    assert len(fake_secrets()) >= 70
    assert len(ORDINARY_NOTES) >= 60


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_recall_floor(score):
    print("\n" + score.summary())
    assert score.missed == []
    assert score.recall >= RECALL_FLOOR


def test_precision_floors(score):
    assert score.over_redacted == []
    assert score.negatives_unchanged >= NEGATIVES_UNCHANGED_FLOOR
    assert score.span_precision >= SPAN_PRECISION_FLOOR


def main() -> None:
    from hybrid.store.agent.redact import Redactor

    rd = Redactor()  # kingfisher's own cache directory: compiled once, then 0.4 s
    score = evaluate(rd)
    print(score.summary())
    if score.missed:
        print("missed:", ", ".join(score.missed))
    for text in score.over_redacted:
        print("over-redacted:", repr(text[:100]))


if __name__ == "__main__":
    main()
