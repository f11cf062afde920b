"""hybrid.store.agent.redact: credentials in note text are replaced by ``[redacted secret]`` before an agent
sees them. The fake secrets are generated at run time (tests/secrets_fixtures.py)."""
import random
import sys
import threading

import pytest
from helpers import OBSIDIAN_HELP, SAMPLE_VAULT
from secrets_fixtures import HARD_NEGATIVES, fake_secrets, pem_block
from test_redact_corpus import leaked

from hybrid.core.errors import HybridError
from hybrid.store.agent.redact import REDACTED, RedactionUnavailable, Redactor, available, redactor
from hybrid.store.lexicon import overlap

CASES = fake_secrets()
# Cases kingfisher plus hybrid/data/secret_rules.yml cannot catch, with the reason. (Empty since
# the prose rule custom.password-prose caught "prose-password"; recall and precision over the
# whole corpus are in tests/unit/store/test_redact_corpus.py.)
EXPECTED_MISSES: set[str] = set()


@pytest.fixture(scope="module")
def cache_dir(kingfisher_cache):
    return kingfisher_cache


@pytest.fixture(scope="module")
def rd(cache_dir):
    """One redactor for the module; its rules compile once per session into a private cache."""
    r = Redactor(cache_dir)
    r.warm()
    return r


def test_fixture_secrets_are_not_literal_in_the_tests():
    """The fake secrets exist only at run time (push protection must not see a token)."""
    from pathlib import Path

    import secrets_fixtures
    sources = "".join(Path(p).read_text(encoding="utf-8") for p in (secrets_fixtures.__file__, __file__))
    for case in CASES:
        if case["name"] != "frontmatter-password":  # hunter2x: the rule file's own example
            assert not any(s in sources for s in case["secrets"]), case["name"]


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_recall(rd, case):
    out = rd.redact(case["line"])
    if case["name"] in EXPECTED_MISSES:
        assert case["secret"] in out, f"{case['name']} is caught now: drop it from EXPECTED_MISSES"
        return
    assert not any(leaked(s, out) for s in case["secrets"])
    assert REDACTED in out
    assert out.count("\n") == case["line"].count("\n")
    assert rd.redact(out) == out  # idempotent: REDACTED itself is not a secret


def test_recall_summary(rd):
    caught = [c["name"] for c in CASES if not any(leaked(s, rd.redact(c["line"])) for s in c["secrets"])]
    assert len(caught) == len(CASES) - len(EXPECTED_MISSES)


def test_spans_cover_the_secret_exactly_for_single_line_tokens(rd):
    case = next(c for c in CASES if c["name"] == "github-pat")
    start = case["line"].index(case["secret"])
    assert rd.spans(case["line"]) == [(start, start + len(case["secret"]))]


@pytest.mark.parametrize("line", HARD_NEGATIVES)
def test_hard_negatives_unchanged(rd, line):
    assert rd.redact(line) == line
    assert rd.spans(line) == []


def test_pem_block_keeps_the_line_count(rd):
    case = next(c for c in CASES if c["name"] == "pem-rsa-private-key")
    key = case["secret"]
    assert key.count("\n") == 29  # a 30-line block
    text = "# Server\n\n" + case["line"] + "\n\nAfter the key.\nLast line."
    out = rd.redact(text)
    assert out.count("\n") == text.count("\n")
    assert out.splitlines()[-2:] == ["After the key.", "Last line."]
    assert REDACTED + "\n" * 29 in out
    assert not any(line in out for line in key.splitlines()[1:-1])


def test_non_ascii_text_before_a_secret(rd):
    """kingfisher reports UTF-8 byte offsets; spans are character offsets."""
    case = next(c for c in CASES if c["name"] == "stripe-live")
    secret = case["secret"]
    text = f"Zugangsdaten für Straße — ключ 🔑: {secret} (prod) — ende"
    out = rd.redact(text)
    assert out == text.replace(secret, REDACTED)
    start = text.index(secret)
    assert rd.spans(text) == [(start, start + len(secret))]
    odd = "\udcff name from a bad file name: " + secret  # a lone surrogate still encodes
    assert rd.redact(odd) == odd.replace(secret, REDACTED)


def test_overlapping_findings_are_merged(rd):
    case = next(c for c in CASES if c["name"] == "azure-storage-account-key")
    spans = rd.spans(case["line"])
    assert spans == sorted(spans)
    assert all(e1 < s2 for (_, e1), (s2, _) in zip(spans, spans[1:]))


def _note_with_key(seed: int = 5) -> tuple[str, str]:
    key = pem_block("RSA PRIVATE KEY", 20 * 48, random.Random(seed))
    text = f"# Deploy\n\nThe box key, until we move it to the vault:\n\n```\n{key}\n```\n\nThen run the playbook.\n"
    return text, key


def test_redact_parts_pem_split_across_overlapping_chunks(rd):
    text, key = _note_with_key()
    lines = key.splitlines()
    cut = text.index(lines[10]) + 30  # inside the 10th base64 line
    ov = 100  # the next chunk repeats the last 100 characters of this one
    parts = [text[:cut], text[cut - ov:]]
    assert overlap(parts[0], parts[1]) == ov
    out = rd.redact_parts(parts)
    assert len(out) == 2
    for before, after in zip(parts, out):
        assert REDACTED in after
        assert after.count("\n") == before.count("\n")
        assert not any(line in after for line in lines[1:-1])  # no base64 line survives, whole or cut
        assert "-----BEGIN" not in after and "-----END" not in after
    assert out[0].startswith("# Deploy\n\nThe box key")
    assert out[1].endswith("Then run the playbook.\n")
    # Each part alone: the second has no BEGIN line, so kingfisher cannot see a key in it
    assert lines[15] in rd.redact(parts[1])


def test_redact_parts_without_overlap_joins_with_a_newline(rd):
    text, key = _note_with_key(6)
    lines = key.splitlines()
    cut = text.index(lines[8])  # chunk 2 starts at a line start; chunk 1 ends before the "\n"
    parts = [text[:cut - 1], text[cut:]]
    assert overlap(parts[0], parts[1]) == 0
    out = rd.redact_parts(parts)
    for after in out:
        assert REDACTED in after
        assert not any(line in after for line in lines[1:-1])
    assert [p.count("\n") for p in out] == [p.count("\n") for p in parts]


def test_redact_parts_without_secrets_returns_the_same_objects(rd):
    parts = ["# Title\n\nPlain text about gardening.", "More text, with no credentials.", ""]
    out = rd.redact_parts(parts)
    assert out == parts and all(a is b for a, b in zip(out, parts))
    assert rd.redact_parts([]) == []


def test_redact_parts_keeps_untouched_parts(rd):
    case = next(c for c in CASES if c["name"] == "github-pat")
    parts = ["First chunk, nothing secret.", case["line"], "Third chunk."]
    out = rd.redact_parts(parts)
    assert out[0] is parts[0] and out[2] is parts[2]
    assert case["secret"] not in out[1] and REDACTED in out[1]


def test_sample_vault_has_no_false_positives(rd):
    notes = sorted(SAMPLE_VAULT.rglob("*.md"))
    assert notes
    hits = {str(p.relative_to(SAMPLE_VAULT)): rd.spans(p.read_text(encoding="utf-8")) for p in notes}
    assert {k: v for k, v in hits.items() if v} == {}


@pytest.mark.skipif(not OBSIDIAN_HELP.is_dir(), reason="the obsidian-help vault is not in git")
def test_obsidian_help_has_no_false_positives(rd):
    notes = sorted(OBSIDIAN_HELP.rglob("*.md"))
    hits = {str(p.relative_to(OBSIDIAN_HELP)): rd.spans(p.read_text(encoding="utf-8", errors="replace"))
            for p in notes}
    assert {k: v for k, v in hits.items() if v} == {}


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_concurrent_first_use(cache_dir):
    """Threads racing on a fresh redactor build one scanner and all get the right answer."""
    case = next(c for c in CASES if c["name"] == "github-pat")
    r = Redactor(cache_dir)  # the module's cache is warm: this loads it (about 0.4 s)
    results: list[str] = []
    scanners: list[object] = []

    def work():
        results.append(r.redact(case["line"]))
        scanners.append(r._get_scanner())

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 6 and all(case["secret"] not in out and REDACTED in out for out in results)
    assert len({id(s) for s in scanners}) == 1


def test_redactor_is_shared_per_cache_dir(tmp_path):
    a = redactor(tmp_path / "a")
    assert redactor(tmp_path / "a") is a
    assert redactor(tmp_path / "b") is not a


def test_fails_closed_without_kingfisher(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "kingfisher_sdk", None)  # `import kingfisher_sdk` raises ImportError
    assert available() is False
    r = Redactor(tmp_path)
    with pytest.raises(RedactionUnavailable) as err:
        r.redact("password: hunter2x")
    assert isinstance(err.value, HybridError)
    msg = str(err.value)
    assert "\n" not in msg and "pip install kingfisher-secret-scanner" in msg
    with pytest.raises(RedactionUnavailable):
        r.redact_parts(["plain text"])
    with pytest.raises(RedactionUnavailable):
        r.spans("")


def test_module_import_does_not_load_kingfisher(monkeypatch):
    """Importing hybrid.store.agent.redact stays cheap: kingfisher is imported on first use."""
    import importlib

    for name in [m for m in sys.modules if m == "hybrid.store.agent.redact" or m.startswith("kingfisher_sdk")]:
        monkeypatch.delitem(sys.modules, name)  # restored after the test
    importlib.import_module("hybrid.store.agent.redact")
    assert not any(m.startswith("kingfisher_sdk") for m in sys.modules)
