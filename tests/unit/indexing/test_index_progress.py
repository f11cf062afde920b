"""What `hybrid index` reports as it goes: the progress events of a real index run (stages in
order, totals that never move once given, done never past total, the model load as a step of
its own only when something is embedded) and the bars that show them."""
from helpers import write

import hybrid
from hybrid.faces.cli.support import ProgressBars
from hybrid.indexing import report
from hybrid.indexing.embed_queue import EmbedQueue


def notes(n: int) -> dict[str, str]:
    return {f"n{i:02}.md": f"# Note {i}\n\nword{i} alpha beta gamma {i}\n\n## Part\n\nmore text {i}\n"
            for i in range(n)}


def fresh(tmp_path, files: dict[str, str]):
    for rel, text in files.items():
        write(tmp_path / "vault", rel, text)
    h = hybrid.open(tmp_path / "home", embedder="hash:64")
    h.add_vault(tmp_path / "vault", "v")
    return h


def run(h) -> list[tuple[str, int, int | None]]:
    events: list[tuple[str, int, int | None]] = []
    h.index(progress=lambda stage, done, total: events.append((stage, done, total)))
    return events


def stages(events) -> list[str]:
    return list(dict.fromkeys(s for s, _, _ in events))


def check_well_formed(events) -> None:
    """Stages in pipeline order; per stage: done never goes back and never past the total; an
    exact total once given never changes; before it, None (unknown) and then, for the embed
    stage only, estimates (which may move); every stage ends complete."""
    order = stages(events)
    assert order == [s for s in report.PROGRESS_STAGES if s in order]
    for stage in order:
        seen = [(d, t) for s, d, t in events if s == stage]
        dones = [d for d, _ in seen]
        assert dones == sorted(dones), (stage, seen)
        kinds = ["none" if t is None else "estimate" if isinstance(t, report.Estimate) else "exact"
                 for _, t in seen]
        assert kinds == sorted(kinds, key=["none", "estimate", "exact"].index), (stage, seen)
        assert "estimate" not in kinds or stage == "embed", (stage, seen)
        exact = [t for (_, t), k in zip(seen, kinds) if k == "exact"]
        assert len(set(exact)) <= 1, (stage, seen)  # never jumps, never decreases
        assert all(t is None or 0 <= d <= t for d, t in seen), (stage, seen)
        if exact:
            assert seen[-1] == (exact[0], exact[0]), (stage, seen)  # every stage ends complete


def test_first_run_reports_every_stage_and_loads_the_model_as_its_own_step(tmp_path):
    h = fresh(tmp_path, notes(6))
    events = run(h)
    check_well_formed(events)
    assert stages(events) == ["scan", "load", "embed", "write"]
    assert [e for e in events if e[0] == "scan"][-1] == ("scan", 6, 6)
    assert [e for e in events if e[0] == "load"] == [("load", 0, 1), ("load", 1, 1)]
    report = h.status()[0]
    embedded = [e for e in events if e[0] == "embed"][-1]
    assert embedded[1] == embedded[2] > 0 and report.chunks >= embedded[1]
    # the model loads before the first batch is embedded
    assert events.index(("load", 1, 1)) < next(i for i, e in enumerate(events) if e[0] == "embed")


def test_nothing_changed_no_load_no_embed(tmp_path):
    h = fresh(tmp_path, notes(3))
    run(h)
    events = run(h)
    check_well_formed(events)
    assert stages(events) == ["write"]


def test_cached_vectors_need_no_model(tmp_path):
    """A renamed note: read again, its vectors are in the cache, so the model never loads."""
    h = fresh(tmp_path, notes(3))
    run(h)
    (tmp_path / "vault" / "n01.md").rename(tmp_path / "vault" / "renamed.md")
    events = run(h)
    check_well_formed(events)
    assert stages(events) == ["scan", "write"]


def test_embed_total_is_estimated_while_reading_then_exact(tmp_path, monkeypatch):
    """Embedding starts while notes are still being read (the last note's read waits for the
    first embedded batch): every embed event carries a total, an estimate from the bytes read
    so far until the reads are over, then the exact count, which ends the stage."""
    import threading

    from hybrid.indexing import reading
    monkeypatch.setattr(EmbedQueue, "WINDOW", 4)
    h = fresh(tmp_path, notes(12))
    first_batch = threading.Event()
    real = reading.read_document

    def last_waits(entry, *args):
        if entry.path == "n11.md":
            assert first_batch.wait(30), "nothing was embedded while reading"
        return real(entry, *args)
    monkeypatch.setattr(reading, "read_document", last_waits)
    events: list[tuple[str, int, int | None]] = []

    def progress(stage, done, total):
        events.append((stage, done, total))
        if stage == "embed":
            first_batch.set()
    result = h.index(progress=progress)[0]
    check_well_formed(events)
    embeds = [(d, t) for s, d, t in events if s == "embed"]
    assert all(t is not None for _, t in embeds)  # never "256/?"
    assert isinstance(embeds[0][1], report.Estimate)  # the reads were not over
    exact = result.chunks_embedded
    assert embeds[-1] == (exact, exact) and not isinstance(embeds[-1][1], report.Estimate)
    # the notes are alike: scaled by the bytes still to read, the first estimate is about right
    assert abs(embeds[0][1] - exact) <= 0.2 * exact, (embeds, exact)
    # embedding overlapped the reads: a batch went before the last note was read
    last_scan = max(i for i, e in enumerate(events) if e[0] == "scan")
    assert any(i < last_scan for i, e in enumerate(events) if e[0] == "embed")


def test_embed_queue_estimates_from_the_bytes_read(tmp_path):
    """The estimate is the texts with no cached vector found so far, scaled by the bytes still
    to read; cached texts and repeats are not counted; the total is exact once reads end."""
    from hybrid.indexing.report import IndexReport
    from hybrid.store import open_store
    from hybrid.store.base import NewChunk, NoteRecord
    h = fresh(tmp_path, notes(1))
    h.index()
    store = open_store(h.config.vault("v"))
    try:
        cached = [c.embed_hash for rows in store.catalog.iter_chunks() for c in rows]

        def record(name: str, hashes: list[str]) -> NoteRecord:
            return NoteRecord(name, 100, 0, name, name, [], [], {}, None, 0.0,
                              [NewChunk("", 1, 1, f"text {x}", x) for x in hashes],
                              [f"text {x}" for x in hashes])
        seen: list[tuple[int, int | None]] = []
        q = EmbedQueue(store, h.embedder("hash:64"), IndexReport("v"),
                       lambda stage, d, t: seen.append((d, t)), expect_bytes=1000, expect_files=4)
        q.read(250)
        q.add([record("a.md", ["x1", "x2", cached[0]])])  # one text has a cached vector
        assert q.total() == 8 and isinstance(q.total(), report.Estimate)  # 2 found in 1/4 of the bytes
        q.read(250)
        q.add([record("b.md", ["x2", "x3"])])  # x2 again: embedded once
        assert q.total() == 6  # 3 found in half the bytes
        q.finish()
        assert q.total() == 3 and not isinstance(q.total(), report.Estimate)
        assert seen[-1] == (3, 3) and q.report.cache_hits == 2
    finally:
        store.close()


def test_no_progress_callback_loads_nothing_extra(tmp_path, monkeypatch):
    """Without a callback there is no warm-up embedding (callers counting calls see none)."""
    h = fresh(tmp_path, notes(2))
    emb = h.embedder("hash:64")
    calls: list[list[str]] = []
    real = emb.embed_documents
    monkeypatch.setattr(emb, "embed_documents", lambda texts: calls.append(list(texts)) or real(texts))
    h.index()
    assert calls and ["warm up"] not in calls


class FakeBar:
    def __init__(self):
        self.tasks: dict[int, dict] = {}

    def add_task(self, description, total=None):
        self.tasks[len(self.tasks)] = {"description": description, "total": total, "completed": 0}
        return len(self.tasks) - 1

    def update(self, task, completed=None, total=None, description=None):
        if description is not None:
            self.tasks[task]["description"] = description
        if total is not None:
            self.tasks[task]["total"] = total
        if completed is not None:
            self.tasks[task]["completed"] = completed


def test_bars_say_an_estimated_total_is_one_until_it_is_exact():
    bar = FakeBar()
    bars = ProgressBars(bar)
    bars("embed", 256, report.Estimate(9000))
    assert bar.tasks[0]["description"] == "embedding chunks (total estimated)"
    bars("embed", 512, report.Estimate(8000))  # an estimate may go down
    assert (bar.tasks[0]["completed"], bar.tasks[0]["total"]) == (512, 8000)
    bars("embed", 768, 8200)
    assert bar.tasks[0] == {"description": "embedding chunks", "total": 8200, "completed": 768}


def test_bars_are_labelled_per_vault_and_never_lower_a_total():
    bar = FakeBar()
    bars = ProgressBars(bar)
    bars.vault("work", "hash:64")
    bars("scan", 0, 10)
    bars("load", 0, 1)
    bars("embed", 5, None)
    bars("embed", 9, 8)
    bars("embed", 10, 4)  # a caller's lower total is ignored, done held at the total
    bars.vault("home", "minilm")
    bars("scan", 1, 3)
    bars("queries baseline", 2, 5)  # another command's stage keeps its own name
    bars.vault("notes", "mix:minilm,use-multilingual")  # the default mix: both models embed
    bars("load", 0, 1)
    bars("embed", 3, 9)
    got = {t["description"]: (t["completed"], t["total"]) for t in bar.tasks.values()}
    assert got == {"work: reading notes": (0, 10), "work: loading model hash:64": (0, 1),
                   "work: embedding chunks": (8, 8), "home: reading notes": (1, 3),
                   "home: queries baseline": (2, 5),
                   "notes: loading model mix:minilm,use-multilingual": (0, 1),
                   "notes: embedding chunks (minilm + use-multilingual)": (3, 9)}


def test_cli_index_prints_no_bar_when_stderr_is_not_a_terminal(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from hybrid.faces.cli.main import main
    write(tmp_path / "vault", "a.md", "# A\n\nalpha\n")
    monkeypatch.setenv("HYBRID_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "config.toml").write_text('[settings]\nembedder = "hash:64"\n')
    result = CliRunner().invoke(main, ["index", str(tmp_path / "vault")])
    assert result.exit_code == 0, result.output
    assert "reading notes" not in result.output and "embedding" not in result.output
    assert "1 added" in result.output
