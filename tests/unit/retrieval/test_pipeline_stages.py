"""The search and index pipelines' stages, each tested on its own."""
import time

import pytest
from helpers import write

from hybrid.core.settings import Settings, replace
from hybrid.core.timing import Stopwatch
from hybrid.embedders import HashEmbedder
from hybrid.indexing.chunk import Chunker
from hybrid.indexing.reading import ReadStatus, read_document
from hybrid.indexing.report import STAGES, IndexReport
from hybrid.retrieval import fitted, fuse
from hybrid.retrieval.arms import Arms
from hybrid.retrieval.pipeline import apply_priors, fuse_arms
from hybrid.retrieval.query import parse_query
from hybrid.sources.walk import FileEntry
from hybrid.store.base import ChunkRow

A, B, C = ("v", 1), ("v", 2), ("v", 3)


def row(cid, text, modified=None):
    return ChunkRow(cid, f"n{cid}.md", f"Note {cid}", "", 1, 2, text, [], [],
                    modified if modified is not None else time.time(), "h")


def test_fuse_arms_by_mode():
    arms = Arms(lexical=[(A, 9.0), (B, 5.0)], vector=[(B, 0.9), (C, 0.8)])
    s = fitted.fusion("local", Settings())
    assert fuse_arms("lexical", arms, s) == arms.lexical
    assert fuse_arms("vector", arms, s) == arms.vector
    fused = dict(fuse_arms("hybrid", arms, s))
    k, wl, wv = s.rrf_k, s.weight_lexical, s.weight_vector
    assert fused[B] == pytest.approx(wl / (k + 2) + wv / (k + 1))
    assert fused[A] == pytest.approx(wl / (k + 1)) and fused[C] == pytest.approx(wv / (k + 2))


def test_apply_priors_exact_first_then_recency():
    rows = {A: row(1, "talks about queues"), B: row(2, "the orders-created topic"),
            C: row(3, "old note", modified=time.time() - 400 * 86400)}
    fused = [(A, 0.3), (C, 0.2), (B, 0.1)]
    arms = Arms(lexical=[(B, 3.0), (A, 1.0)])
    parsed = parse_query("orders-created partitions")
    s = Settings()
    out = apply_priors(fused, arms, rows, parsed, "hybrid", s)
    assert [k for k, _ in out] == [B, A, C] and out[0][1] == pytest.approx(1.1)
    assert apply_priors(fused, arms, rows, parsed, "lexical", s) == fused  # hybrid only
    aged = apply_priors(fused, arms, rows, parse_query("queues"), "hybrid",
                        replace(s, recency_months=6, recency_penalty=0.6))
    assert dict(aged)[C] == pytest.approx(0.2 * 0.4) and [k for k, _ in aged] == [A, B, C]


def test_stopwatch_adds_up_named_stages():
    clock = Stopwatch()
    with clock("a"):
        time.sleep(0.01)
    with clock("a"):
        pass
    clock.add("b", 0.5)
    assert clock.seconds["a"] >= 0.01 and clock.rounded(1) == {"a": 0.0, "b": 0.5}
    assert clock.elapsed() >= clock.seconds["a"]


@pytest.fixture
def reading(tmp_path):
    emb = HashEmbedder(16)
    chunker = Chunker(emb.count_tokens, emb.max_tokens, 128, 32, True)
    return tmp_path, chunker


def entry(root, rel):
    p = root / rel
    st = p.stat()
    return FileEntry(rel, str(p), st.st_size, st.st_mtime_ns)


def test_read_returns_a_typed_result_for_each_outcome(reading):
    root, chunker = reading
    s, report, clock = Settings(), IndexReport("v"), Stopwatch()
    write(root, "a.md", "# A\n\nsome text\n")
    got = read_document(entry(root, "a.md"), None, chunker, s, report, False, clock)
    assert got.status is ReadStatus.CHANGED and got.record.chunks and "chunk" in clock.seconds

    class Row:
        hash = got.record.hash
    assert read_document(entry(root, "a.md"), Row, chunker, s, report, False, clock).status is ReadStatus.TOUCHED
    assert read_document(entry(root, "a.md"), Row, chunker, s, report, True, clock).status is ReadStatus.CHANGED

    gone = entry(root, "a.md")
    (root / "a.md").unlink()
    assert read_document(gone, None, chunker, s, report, False, clock).status is ReadStatus.VANISHED

    write(root, "b.md", "x" * 100)
    small = replace(s, max_file_bytes=10)
    assert read_document(entry(root, "b.md"), None, chunker, small, report, False, clock).status is ReadStatus.SKIPPED
    (root / "c.md").write_bytes(b"\x00\x01binary")
    r = read_document(entry(root, "c.md"), None, chunker, s, report, False, clock)
    assert r.status is ReadStatus.SKIPPED and r.record is None and report.skipped == 2


def test_index_report_has_every_stage_timed(fake, vault):
    fake.add_vault(vault, "v")
    report = fake.index()[0]
    assert list(report.stage_seconds) == list(STAGES)
    assert all(v >= 0 for v in report.stage_seconds.values())
    assert fuse.ranks([A, B]) == {A: 1, B: 2}
