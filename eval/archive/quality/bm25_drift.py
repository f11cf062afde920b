"""How far an incrementally updated lexical index's BM25 drifts from a clean build's (issue #47).

tantivy keeps a deleted document in BM25's statistics (document frequencies, average field
length) until its segment merges; hybrid compacts the index when deleted documents pass
``LEXICAL_DRIFT`` of the live ones (exactly a clean build's scores below ``LEXICAL_EXACT_BELOW``
chunks). This measures what the remaining drift costs just under that bound: a copy of a vault
is indexed, notes are edited one after another (each edit replaces all of a note's chunks,
leaving deleted documents) until the deleted documents are as close to the bound as edits get
without a compaction, and the lexical top 10 of every labelled query is compared with the same
vault's clean rebuild: identical rankings, top-10 overlap, largest relative score difference,
and nDCG@10 of both.

    PYTHONPATH=eval/bench .venv/bin/python eval/archive/quality/bm25_drift.py [--vault ../shared/vaults/obsidian-help]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import tempfile
from pathlib import Path

from common import OBSIDIAN_HELP, ROOT

import hybrid
from hybrid.store.base import LEXICAL_DRIFT


def ndcg10(ranked: list[str], rel: dict[str, int]) -> float:
    dcg = sum((2 ** rel.get(p, 0) - 1) / math.log2(i + 2) for i, p in enumerate(ranked[:10]))
    ideal = sorted(rel.values(), reverse=True)[:10]
    best = sum((2 ** g - 1) / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / best if best else 0.0


def lexical_runs(h, queries) -> dict[str, list[tuple[str, float]]]:
    out = {}
    for q in queries:
        hits = h.search(q["text"], mode="lexical", top_k=10, passages=True)
        out[q["qid"]] = [(x.path, x.score) for x in hits]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vault", type=Path, default=OBSIDIAN_HELP)
    ap.add_argument("--queries", type=Path, default=ROOT / "qrels" / "obsidian-help.queries.jsonl")
    ap.add_argument("--qrels", type=Path, default=ROOT / "qrels" / "obsidian-help.qrels.json")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    queries = [json.loads(x) for x in args.queries.read_text().splitlines() if x.strip()]
    qrels = json.loads(args.qrels.read_text())
    work = Path(tempfile.mkdtemp(prefix="bm25drift-"))
    try:
        vault = work / "vault"
        shutil.copytree(args.vault, vault)
        h = hybrid.open(work / "home", embedder="hash:64")
        h.add_vault(vault, "v")
        h.index()
        store = h.session.store(h.vault_for("v"))
        live = store.lexical.count()
        notes = sorted(p for p in vault.rglob("*.md"))
        random.Random(args.seed).shuffle(notes)
        edits = 0
        for path in notes:
            chunks = len(store.catalog.chunk_ids_of([fid for fid, p in store.catalog.file_paths(True)
                                                     if p == path.relative_to(vault).as_posix()]))
            if store.lexical.deleted_docs() + chunks > LEXICAL_DRIFT * live:
                continue  # this edit would pass the bound and compact the index
            path.write_text(path.read_text(encoding="utf-8") + f"\n\nedited {edits}\n", encoding="utf-8")
            h.index()
            edits += 1
        deleted = store.lexical.deleted_docs()  # of the chunk and the section index
        drifted = lexical_runs(h, queries)
        store.lexical.rebuild(store.catalog.iter_chunks())
        h.close()
        h = hybrid.open(work / "home", embedder="hash:64")
        clean = lexical_runs(h, queries)
        h.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    same = sum(1 for q in clean if [p for p, _ in clean[q]] == [p for p, _ in drifted[q]])
    overlap = sum(len({p for p, _ in clean[q]} & {p for p, _ in drifted[q]}) / max(1, len({p for p, _ in clean[q]}))
                  for q in clean) / len(clean)
    rel_diff = max((abs(a - b) / max(abs(b), 1e-9) for q in clean
                    for (_, a), (_, b) in zip(drifted[q], clean[q])), default=0.0)
    nd = {name: sum(ndcg10(list(dict.fromkeys(p for p, _ in run[q])), qrels.get(q, {})) for q in run) / len(run)
          for name, run in (("drifted", drifted), ("clean", clean))}
    print(f"vault {args.vault.name}: {live} chunks, {edits} notes edited, {deleted} deleted documents "
          f"in the statistics ({deleted / live:.1%} of live; compaction at {LEXICAL_DRIFT:.0%})")
    print(f"{len(clean)} queries, lexical top 10: identical rankings {same}/{len(clean)}, "
          f"mean top-10 overlap {overlap:.3f}, largest relative score difference {rel_diff:.2%}")
    print(f"nDCG@10 (passages, notes deduplicated): drifted {nd['drifted']:.4f}, clean {nd['clean']:.4f}")


if __name__ == "__main__":
    main()
