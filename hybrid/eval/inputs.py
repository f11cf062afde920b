"""Inputs of ``hybrid eval``: query files, relevance judgements (qrels) and BEIR datasets.

Queries: TSV (``qid<TAB>text[<TAB>category]``) or JSONL (``{"qid", "text", "category"}``; BEIR's
``_id`` is accepted too). Qrels: ranx JSON (``{qid: {doc: grade}}``) or TREC (``qid 0 doc grade``;
tab-separated when document ids contain spaces, as note paths do; BEIR's ``qid doc grade`` with
a header line also works). A document id is a vault-relative note path, or ``path#A > B`` for a
section (the chain of headings down to the answering one).

Nothing here raises on a bad line: each problem is recorded with file and line, counted, and
the line skipped; the caller reports the counts.

The bundled sample set (``sample_set()``) is package data, so ``hybrid eval`` without arguments
works from an installed wheel as well as from a checkout.
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from hybrid.core.errors import HybridError

DEFAULT_METRICS = ("ndcg@10", "recall@5", "recall@10", "recall@100", "mrr@10", "map@100")
RANX_METRICS = ("hits", "hit_rate", "precision", "recall", "f1", "r-precision", "mrr", "map", "ndcg",
                "ndcg_burges")  # what ranx scores, each with an optional @k
ALWAYS_REPORTED = ("answer@1", "answer@10")  # computed by the eval itself, in every report
METRIC_RE = re.compile(r"([a-z_-]+)(?:@[1-9][0-9]*)?")


def metric_list(names: list[str]) -> tuple[str, ...]:
    """The metrics ``--metrics`` names, checked before anything is indexed: ranx's (``ndcg@10``,
    ``recall@100``, ``mrr``…) in the order given, without duplicates; ``answer@1`` and
    ``answer@10`` are in every report already, so naming them asks for nothing more (only them:
    ``ndcg@10`` ranks the runs). Raises :class:`HybridError` naming the first unknown one."""
    if not names:
        raise HybridError(f"--metrics names no metric: e.g. {','.join(DEFAULT_METRICS[:2])}")
    out: list[str] = []
    for raw in names:
        name = raw.strip().lower()
        if name in ALWAYS_REPORTED:
            continue
        m = METRIC_RE.fullmatch(name)
        if not m or m.group(1) not in RANX_METRICS:
            raise HybridError(f"unknown metric {raw!r}: use {', '.join(RANX_METRICS)}, each with an optional @k "
                              f"(ndcg@10, recall@100); {' and '.join(ALWAYS_REPORTED)} are always reported")
        if name not in out:
            out.append(name)
    return tuple(out) or ("ndcg@10",)

log = logging.getLogger("hybrid")


@dataclass
class Query:
    qid: str
    text: str
    category: str = ""
    split: str = ""      # e.g. "tune" / "heldout": which part of the set (JSONL "split" field)


@dataclass
class Problems:
    messages: list[str] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)

    def add(self, kind: str, message: str) -> None:
        self.counts[kind] += 1
        self.messages.append(message)
        log.warning("%s", message)


def sample_set() -> tuple[Path, Path, Path]:
    """``(vault, queries, qrels)`` of the bundled labelled set: ``hybrid/sample_vault/`` and
    ``hybrid/data/sample.queries.jsonl`` / ``sample.qrels.json``, found through
    ``importlib.resources`` (hybrid is installed as files, never zipped: the vault is indexed in
    place like any folder)."""
    from importlib import resources
    root = resources.files("hybrid")
    data = root / "data"
    return (Path(str(root / "sample_vault")), Path(str(data / "sample.queries.jsonl")),
            Path(str(data / "sample.qrels.json")))


def _open_text(path: Path) -> list[str]:
    if not path.is_file():
        raise HybridError(f"{path}: no such file")
    return path.read_text(encoding="utf-8", errors="replace").splitlines()


def load_queries(path: Path, problems: Problems) -> dict[str, Query]:
    out: dict[str, Query] = {}
    jsonl = path.suffix.lower() in (".jsonl", ".json")
    for n, line in enumerate(_open_text(path), 1):
        if not line.strip() or line.startswith("#"):
            continue
        where = f"{path}:{n}"
        if jsonl:
            try:
                obj = json.loads(line)
                qid = str(obj.get("qid", obj.get("_id", obj.get("id", ""))))
                text = obj.get("text", obj.get("query", ""))
                category = str(obj.get("category", "") or "")
                split = str(obj.get("split", "") or "")
            except (json.JSONDecodeError, AttributeError):
                problems.add("malformed_query_lines", f"{where}: not a JSON object; skipped")
                continue
        else:
            parts = line.split("\t")
            if len(parts) < 2:
                problems.add("malformed_query_lines", f"{where}: expected qid<TAB>text; skipped")
                continue
            qid, text = parts[0].strip(), parts[1]
            category = parts[2].strip() if len(parts) > 2 else ""
            split = parts[3].strip() if len(parts) > 3 else ""
        if not qid or not isinstance(text, str) or not text.strip():
            problems.add("malformed_query_lines", f"{where}: missing qid or text; skipped")
            continue
        if qid in out:
            problems.add("duplicate_queries", f"{where}: duplicate qid {qid!r}; kept the first")
            continue
        out[qid] = Query(qid, text.strip(), category, split)
    return out


def select_split(queries: dict[str, Query], split: str) -> dict[str, Query]:
    """The queries of one split (``--split heldout``); HybridError naming the splits the file
    has when none is ``split``."""
    chosen = {q: v for q, v in queries.items() if v.split == split}
    if not chosen:
        known = sorted({v.split for v in queries.values() if v.split})
        raise HybridError(f"no query has split {split!r} (the queries' splits: "
                          f"{', '.join(known) or 'none'})")
    return chosen


def load_qrels(path: Path, problems: Problems) -> dict[str, dict[str, int]]:
    if path.suffix.lower() == ".json":
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise HybridError(f"{path}: not valid JSON ({exc})") from None
        if not isinstance(raw, dict):
            raise HybridError(f"{path}: expected an object {{qid: {{doc: grade}}}}")
        out: dict[str, dict[str, int]] = {}
        for qid, docs in raw.items():
            if not isinstance(docs, dict):
                problems.add("malformed_qrels_lines", f"{path}: qid {qid!r}: expected {{doc: grade}}; skipped")
                continue
            for doc, grade in docs.items():
                if isinstance(grade, bool) or not isinstance(grade, (int, float)):
                    problems.add("malformed_qrels_lines",
                                 f"{path}: qid {qid!r} doc {doc!r}: grade {grade!r} is not a number; skipped")
                    continue
                if grade > 0:
                    out.setdefault(str(qid), {})[str(doc)] = int(grade)
        return out
    out = {}
    for n, line in enumerate(_open_text(path), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split("\t") if "\t" in line else line.split()
        parts = [p.strip() for p in parts]
        if len(parts) == 3:
            qid, doc, grade = parts
        elif len(parts) == 4:
            qid, _, doc, grade = parts
        else:
            problems.add("malformed_qrels_lines", f"{path}:{n}: expected 'qid 0 doc grade' (tab-separated "
                                                  f"if doc ids have spaces); skipped")
            continue
        try:
            g = int(float(grade))
        except ValueError:
            if n == 1:
                continue  # a header line such as BEIR's "query-id corpus-id score"
            problems.add("malformed_qrels_lines", f"{path}:{n}: grade {grade!r} is not a number; skipped")
            continue
        if g > 0:
            out.setdefault(qid, {})[doc] = g
    return out


def note_of(doc: str) -> str:
    return doc.split("#", 1)[0]


def reconcile(queries: dict[str, Query], qrels: dict[str, dict[str, int]], notes: set[str],
              problems: Problems, qrels_name: str) -> tuple[dict[str, Query], dict[str, dict[str, int]]]:
    """Keep the queries that have judgements on notes that exist; report everything dropped."""
    for qid in sorted(set(qrels) - set(queries)):
        problems.add("qrels_unknown_qids", f"{qrels_name}: qid {qid!r} has judgements but no query; ignored")
    kept_q: dict[str, dict[str, int]] = {}
    for qid, docs in qrels.items():
        if qid not in queries:
            continue
        good = {}
        for doc, grade in docs.items():
            if note_of(doc) in notes:
                good[doc] = grade
            else:
                problems.add("qrels_missing_notes",
                             f"{qrels_name}: qid {qid!r}: {note_of(doc)!r} is not in the vault; judgement ignored")
        if good:
            kept_q[qid] = good
        else:
            problems.add("queries_without_judgements",
                         f"{qrels_name}: qid {qid!r}: no judged note exists in the vault; query skipped")
    for qid in sorted(set(queries) - set(qrels)):
        problems.add("queries_without_judgements", f"query {qid!r} has no judgements; skipped")
    return {q: queries[q] for q in queries if q in kept_q}, kept_q


def safe_name(doc_id: str) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", doc_id).strip("._") or "doc"
    return name[:120]


def beir_qrels_file(directory: Path, split: str | None = None) -> Path:
    """The judgements of a BEIR dataset: ``qrels/SPLIT.tsv``; without ``split``, ``test.tsv``
    when present (what BEIR and papers report), else the only split the folder has (SciFact's
    public ``train.tsv`` alone, say). HybridError naming the splits found when it is unclear."""
    folder = directory / "qrels"
    found = sorted(p.stem for p in folder.glob("*.tsv")) if folder.is_dir() else []
    if split is None:
        if "test" in found or not found:
            split = "test"
        elif len(found) == 1:
            split = found[0]
        else:
            raise HybridError(f"{directory}: no qrels/test.tsv and several splits ({', '.join(found)}): "
                              f"choose one with --beir-split")
    path = folder / f"{split}.tsv"
    if not path.is_file() and found:
        raise HybridError(f"{directory}: no qrels/{split}.tsv (its splits: {', '.join(found)})")
    return path


def load_beir(directory: Path, vault_dir: Path, problems: Problems, split: str | None = None
              ) -> tuple[dict[str, Query], dict[str, dict[str, int]], int]:
    """Write a BEIR corpus as one note per document (``# title`` + text) under ``vault_dir``
    and return its queries and the qrels of ``split`` (see :func:`beir_qrels_file`) with
    document ids mapped to note paths."""
    corpus = directory / "corpus.jsonl"
    qfile = directory / "queries.jsonl"
    qrels_file = beir_qrels_file(directory, split)
    for p in (corpus, qfile, qrels_file):
        if not p.is_file():
            raise HybridError(f"{directory} is not a BEIR dataset: {p.relative_to(directory)} is missing")
    vault_dir.mkdir(parents=True, exist_ok=True)
    id_to_path: dict[str, str] = {}
    used: set[str] = set()
    with corpus.open(encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                doc_id = str(obj["_id"])
            except (json.JSONDecodeError, KeyError, TypeError):
                problems.add("malformed_corpus_lines", f"{corpus}:{n}: not a BEIR document; skipped")
                continue
            name = safe_name(doc_id)
            while name + ".md" in used:
                name += "_"
            used.add(name + ".md")
            title = str(obj.get("title") or "").strip()
            body = str(obj.get("text") or "")
            text = (f"# {title}\n\n" if title else "") + body.strip() + "\n"
            (vault_dir / f"{name}.md").write_text(text, encoding="utf-8")
            id_to_path[doc_id] = f"{name}.md"
    queries = load_queries(qfile, problems)
    raw = load_qrels(qrels_file, problems)
    qrels: dict[str, dict[str, int]] = {}
    for qid, docs in raw.items():
        for doc, grade in docs.items():
            if doc in id_to_path:
                qrels.setdefault(qid, {})[id_to_path[doc]] = grade
            else:
                problems.add("qrels_missing_notes",
                             f"{qrels_file}: qid {qid!r}: document {doc!r} is not in the corpus; ignored")
    return queries, qrels, len(id_to_path)
