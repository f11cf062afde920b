"""``hybrid eval judge``: turn questions into a labelled set by asking a person.

The questions come from a file (one per line, or the queries JSONL/TSV format) or from the audit
log (what agents actually asked, newest first). For each question the top notes of the lexical,
vector and hybrid modes are pooled (the TREC pooling method: judge the union of what several
systems retrieve, so no one system's blind spots decide the judgements), deduplicated by note
and shown interleaved by rank, so the order does not say which mode found a note. The answers
go into a ``queries.jsonl`` + ``qrels.json`` pair that ``hybrid eval --queries/--qrels`` reads
as is. Notes judged not relevant are kept with grade 0 (eval ignores them), so a later session
resumes where this one stopped and never asks the same note twice.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hybrid.core.errors import HybridError
from hybrid.core.settings import Settings, replace
from hybrid.eval.inputs import Problems, load_queries

POOL_MODES = ("hybrid", "lexical", "vector")
AUDIT_TOOLS = ("search", "api/search")  # the agent calls whose arguments hold a question
GRADES = {"y": 1, "2": 2, "n": 0}


@dataclass(frozen=True)
class Question:
    text: str
    qid: str = ""        # from a queries file; empty: one is made up
    category: str = ""


@dataclass(frozen=True)
class Candidate:
    """A pooled note: where its best chunk is, what it says, and which modes found it."""
    path: str
    heading: str
    snippet: str
    modes: tuple[str, ...]


def _key(text: str) -> str:
    return " ".join(text.split()).casefold()


def questions_from_file(path: Path) -> list[Question]:
    """The questions of ``path``: the queries format when it ends in .jsonl/.json/.tsv, else one
    question per line (blank lines and ``#`` comments skipped)."""
    if path.suffix.lower() in (".jsonl", ".json", ".tsv"):
        problems = Problems()
        return [Question(q.text, q.qid, q.category) for q in load_queries(path, problems).values()]
    if not path.is_file():
        raise HybridError(f"{path}: no such file")
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    return [Question(" ".join(ln.split())) for ln in lines if ln.strip() and not ln.startswith("#")]


def questions_from_audit(records: Iterable[dict], limit: int) -> list[Question]:
    """The distinct questions agents asked (``search`` and ``api/search`` calls), newest first,
    at most ``limit`` (0: all). ``records`` come oldest first, as :meth:`AuditLog.records` gives
    them; calls that failed count too (the question was asked)."""
    latest: dict[str, str] = {}
    for record in records:
        if record.get("tool") not in AUDIT_TOOLS:
            continue
        args = record.get("args")
        text = args.get("query") if isinstance(args, dict) else None
        if not isinstance(text, str) or not text.strip():
            continue
        key = _key(text)
        latest.pop(key, None)  # re-inserted at the end: the newest asking decides the order
        latest[key] = " ".join(text.split())
    newest = list(reversed(latest.values()))
    return [Question(t) for t in (newest[:limit] if limit else newest)]


def pool(search, text: str, depth: int, modes: Sequence[str] = POOL_MODES) -> list[Candidate]:
    """The top ``depth`` notes of each mode for ``text``, merged: rank 1 of every mode, then rank
    2, …, each note once (where it first appears). ``search(text, mode)`` returns hits, best first."""
    ranked: dict[str, list] = {}
    for mode in modes:
        notes: dict[str, Any] = {}
        for hit in search(text, mode):
            notes.setdefault(hit.path, hit)
            if len(notes) == depth:
                break
        ranked[mode] = list(notes.values())
    found: dict[str, list[str]] = {}
    first: dict[str, Any] = {}
    for rank in range(depth):
        for mode in modes:
            if rank < len(ranked[mode]):
                hit = ranked[mode][rank]
                first.setdefault(hit.path, hit)
                found.setdefault(hit.path, []).append(mode)
    return [Candidate(p, " > ".join(h.heading_path), " ".join(h.snippet.split()), tuple(found[p]))
            for p, h in first.items()]


@dataclass
class Judgements:
    """The queries.jsonl + qrels.json pair being written: what is judged already, and the new
    answers. Existing lines of the queries file are kept as they are (fields eval ignores too)."""
    queries_path: Path
    qrels_path: Path
    qids: dict[str, str] = field(default_factory=dict)         # question key -> qid
    qrels: dict[str, dict[str, int]] = field(default_factory=dict)
    new_lines: list[str] = field(default_factory=list)

    @classmethod
    def open(cls, queries_path: Path, qrels_path: Path) -> Judgements:
        if queries_path.suffix.lower() != ".jsonl":
            raise HybridError(f"{queries_path}: judge writes queries as JSONL; give a .jsonl file")
        if qrels_path.suffix.lower() != ".json":
            raise HybridError(f"{qrels_path}: judge writes judgements as ranx JSON; give a .json file")
        j = cls(queries_path, qrels_path)
        if queries_path.exists():
            problems = Problems()
            for q in load_queries(queries_path, problems).values():
                j.qids.setdefault(_key(q.text), q.qid)
        if qrels_path.exists():
            try:
                raw = json.loads(qrels_path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise HybridError(f"{qrels_path}: not valid JSON ({exc}); fix or move it") from None
            if not isinstance(raw, dict) or not all(isinstance(v, dict) for v in raw.values()):
                raise HybridError(f"{qrels_path}: expected an object {{qid: {{doc: grade}}}}")
            j.qrels = {str(q): {str(d): int(g) for d, g in docs.items() if isinstance(g, (int, float))}
                       for q, docs in raw.items()}
        return j

    def qid(self, question: Question) -> str:
        """The question's qid: the one it has in the queries file already, else its own (from an
        input queries file) when free, else the next ``jNNN``."""
        key = _key(question.text)
        if key in self.qids:
            return self.qids[key]
        taken = set(self.qids.values()) | set(self.qrels)
        qid = question.qid if question.qid and question.qid not in taken else ""
        n = len(taken) + 1
        while not qid:
            qid = f"j{n:03d}" if f"j{n:03d}" not in taken else ""
            n += 1
        self.qids[key] = qid
        line = {"qid": qid, "text": question.text}
        if question.category:
            line["category"] = question.category
        self.new_lines.append(json.dumps(line, ensure_ascii=False))
        return qid

    def judged(self, qid: str) -> dict[str, int]:
        return self.qrels.get(qid, {})

    def record(self, qid: str, path: str, grade: int) -> None:
        self.qrels.setdefault(qid, {})[path] = grade

    def save(self) -> None:
        """Append the new questions that have a judgement to the queries file and rewrite the
        qrels file (each atomically enough for one person's session: written whole, then renamed)."""
        lines = [ln for ln in self.new_lines if json.loads(ln)["qid"] in self.qrels]
        if lines:
            old = self.queries_path.read_text(encoding="utf-8") if self.queries_path.exists() else ""
            if old and not old.endswith("\n"):
                old += "\n"
            _write(self.queries_path, old + "\n".join(lines) + "\n")
            self.new_lines = [ln for ln in self.new_lines if ln not in lines]
        _write(self.qrels_path, json.dumps(self.qrels, ensure_ascii=False, indent=1) + "\n")

    def relevant_count(self) -> int:
        return sum(1 for docs in self.qrels.values() for g in docs.values() if g > 0)

    def unanswered(self) -> list[str]:
        """Judged questions with no relevant note: hybrid eval skips them."""
        return [q for q, docs in self.qrels.items() if docs and not any(g > 0 for g in docs.values())]


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


@contextmanager
def temporary_index(vault_path: Path, include: Sequence[str], exclude: Sequence[str], settings: Settings,
                    progress=None) -> Iterator[tuple[Any, str]]:
    """A handle on ``vault_path`` indexed into a temporary home with local files (deleted
    after): for a folder that is not a registered vault. Yields (handle, vault name)."""
    import shutil
    import tempfile

    from hybrid.app.api import open as open_hybrid
    home = Path(tempfile.mkdtemp(prefix="hybrid-judge-"))
    h = open_hybrid(home, **replace(settings, store="", recency_months=0).as_dict())
    try:
        h.config.add_vault(vault_path, "judge", list(include), list(exclude))
        report = h.index(["judge"], progress=progress)[0]
        if report.chunks == 0:
            raise HybridError(f"{vault_path}: no notes to index (empty vault, or include globs match nothing)")
        yield h, "judge"
    finally:
        h.close()
        shutil.rmtree(home, ignore_errors=True)
