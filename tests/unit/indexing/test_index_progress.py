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
    """Stages in pipeline order; per stage: done never goes back, a total once given never
    changes (None only before it is known), done never past the total."""
    order = stages(events)
    assert order == [s for s in report.PROGRESS_STAGES if s in order]
    for stage in order:
        seen = [(d, t) for s, d, t in events if s == stage]
        dones = [d for d, _ in seen]
        assert dones == sorted(dones), (stage, seen)
        totals = [t for _, t in seen]
        known = [t for t in totals if t is not None]
        assert len(set(known)) <= 1, (stage, seen)  # never jumps, never decreases
        assert totals == [None] * (len(totals) - len(known)) + known, (stage, seen)  # None only first
        assert all(t is None or 0 <= d <= t for d, t in seen), (stage, seen)
        if known:
            assert seen[-1] == (known[0], known[0]), (stage, seen)  # every stage ends complete


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


def test_embed_total_is_unknown_until_the_reads_are_over_then_fixed(tmp_path, monkeypatch):
    """With several embedding windows during the reads, the total is None until the last
    window (then final), and done still only grows."""
    monkeypatch.setattr(EmbedQueue, "WINDOW", 4)
    h = fresh(tmp_path, notes(12))
    events = run(h)
    check_well_formed(events)
    embeds = [e for e in events if e[0] == "embed"]
    assert embeds[0][2] is None and embeds[-1][2] is not None
    assert embeds[-1][1] == embeds[-1][2]
    # embedding overlaps the reads: some chunks were embedded before the last note was read
    last_scan = max(i for i, e in enumerate(events) if e[0] == "scan")
    assert any(i < last_scan for i, e in enumerate(events) if e[0] == "embed")


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

    def update(self, task, completed=None, total=None):
        if total is not None:
            self.tasks[task]["total"] = total
        if completed is not None:
            self.tasks[task]["completed"] = completed


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
    got = {t["description"]: (t["completed"], t["total"]) for t in bar.tasks.values()}
    assert got == {"work: reading notes": (0, 10), "work: loading model hash:64": (0, 1),
                   "work: embedding chunks": (8, 8), "home: reading notes": (1, 3),
                   "home: queries baseline": (2, 5)}


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
