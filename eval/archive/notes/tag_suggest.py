"""Precision and recall at 5 of the offline tag suggester (issue #30, part 5), by hiding tags.

For each seed, a fifth of the vault's tagged notes (seeded sample) lose their tags: the vault is
copied to a temporary folder, those notes' ``tags:``/``tag:`` entries are removed from their
front blocks and their inline ``#tags`` from their text; the copy is indexed (``--embedder``,
MiniLM by default) and the suggester asked for 5 tags for each of them. A hit is a suggested tag
the note had. Recall counts every hidden tag, also those no other note carries (no suggester
drawing on the vault's own tags can find them: ``reachable`` says how many could be).

Compared, on the same neighbours: the full suggester, its neighbours' votes alone, its key
phrases alone, and the baseline: the vault's 5 most frequent tags (of the copy).

    PYTHONPATH=.:eval/bench .venv/bin/python eval/archive/notes/tag_suggest.py                      # the sample vault
    PYTHONPATH=.:eval/bench .venv/bin/python eval/archive/notes/tag_suggest.py --vault ../shared/vaults/obsidian-help
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import hybrid
from hybrid.app.tags import suggest as sg
from hybrid.eval.run import CachingEmbedder
from hybrid.sources.markdown import TAG_RE, decode, front_block, load_frontmatter, parse_note

SAMPLE = Path(hybrid.__file__).parent / "sample_vault"
K = 5


def strip_tags(text: str) -> str:
    """``text`` without tags: the front block's tags entries dropped (the block rewritten by
    YAML: only the copy is touched), inline ``#tags`` removed."""
    import yaml
    lines = text.split("\n")
    fm, body_start, _ = front_block(lines)
    body = "\n".join(lines[body_start - 1:])
    if fm is not None:
        meta = load_frontmatter("\n".join(fm)) or {}
        meta = {k: v for k, v in meta.items() if str(k).lower() not in ("tags", "tag")}
        head = f"---\n{yaml.safe_dump(meta, sort_keys=False, allow_unicode=True)}---\n" if meta else ""
    else:
        head = ""
    return head + TAG_RE.sub("", body)


def tagged_notes(root: Path) -> dict[str, list[str]]:
    out = {}
    for p in sorted(root.rglob("*.md")):
        rel = p.relative_to(root).as_posix()
        if any(part.startswith(".") for part in rel.split("/")):
            continue
        note = parse_note(rel, decode(p.read_bytes(), rel)[0])
        if note.tags:
            out[rel] = note.tags
    return out


def score(got: list[str], truth: list[str]) -> tuple[float, float]:
    hits = len(set(got[:K]) & set(truth))
    return hits / K, hits / len(truth)


def run_seed(vault: Path, seed: int, fraction: float, embedder, work: Path) -> dict:
    tagged = tagged_notes(vault)
    rng = random.Random(seed)
    hidden = sorted(rng.sample(sorted(tagged), max(1, round(len(tagged) * fraction))))
    copy = work / f"vault-{seed}"
    shutil.copytree(vault, copy, ignore=shutil.ignore_patterns(".*"))
    for rel in hidden:
        p = copy / rel
        p.write_text(strip_tags(decode(p.read_bytes(), rel)[0]), encoding="utf-8")
        assert not parse_note(rel, p.read_text(encoding="utf-8")).tags, rel
    h = hybrid.open(work / f"home-{seed}", embedders=[embedder], embedder=embedder.id)
    h.add_vault(copy, "v")
    t0 = time.perf_counter()
    h.index()
    index_s = time.perf_counter() - t0
    store = h.session.store(h.config.vault("v"))
    vocab = sg.vocabulary(store)
    frequent = [t for t, _ in sorted(vocab.items(), key=lambda kv: (-kv[1], kv[0]))[:K]]
    files = store.catalog.files()
    variants: dict[str, list[tuple[float, float]]] = {"suggester": [], "neighbours only": [],
                                                      "key phrases only": [], "most frequent tags": []}
    reachable = []
    took = []
    for rel in hidden:
        truth = tagged[rel]
        reachable.append(len([t for t in truth if t in vocab]) / len(truth))
        t0 = time.perf_counter()
        got = h.tags.suggest(rel, "v", limit=K)[0]
        took.append(time.perf_counter() - t0)
        variants["suggester"].append(score([s.tag for s in got.suggestions], truth))
        note = parse_note(rel, (copy / rel).read_text(encoding="utf-8"))
        body = "\n".join(note.lines[note.body_start - 1:])
        fid = files[rel].id
        chunks = [c for c, _ in store.catalog.note_texts([fid]).get(fid, [])]
        near = sg.neighbours(store, fid, note.title, body, chunks)
        votes = sg.neighbour_votes(near, {n.id: n.tags for n in store.catalog.notes(list(near))})
        phrases = sg.phrase_scores(vocab, note.title, body)
        n = min(sg.NEIGHBOURS, len(near))
        for name, v, ph in (("neighbours only", votes, {}), ("key phrases only", {}, phrases)):
            variants[name].append(score([c.tag for c in sg.rank(v, ph, vocab, set(), n, K)], truth))
        variants["most frequent tags"].append(score(frequent, truth))
    h.close()
    return {"seed": seed, "notes": len(tagged), "hidden": len(hidden), "vocabulary": len(vocab),
            "reachable_recall": statistics.mean(reachable), "index_s": round(index_s, 1),
            "suggest_ms_p50": round(statistics.median(took) * 1000, 1),
            "results": {k: {"p@5": statistics.mean(p for p, _ in v), "r@5": statistics.mean(r for _, r in v)}
                        for k, v in variants.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vault", type=Path, default=SAMPLE)
    ap.add_argument("--embedder", default="minilm")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--fraction", type=float, default=0.2)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    from hybrid.embedders import make_embedder
    emb = CachingEmbedder(make_embedder(args.embedder))  # each seed after the first embeds only its changed notes
    runs = []
    with tempfile.TemporaryDirectory(prefix="tag-bench-") as tmp:
        for seed in args.seeds:
            r = run_seed(args.vault.resolve(), seed, args.fraction, emb, Path(tmp))
            runs.append(r)
            print(json.dumps(r))
    names = list(runs[0]["results"])
    print(f"\n{args.vault.name}: {runs[0]['notes']} tagged notes, {runs[0]['hidden']} hidden per seed, "
          f"seeds {args.seeds}, embedder {args.embedder}; reachable recall "
          f"{statistics.mean(r['reachable_recall'] for r in runs):.3f}")
    print(f"{'':22} {'P@5':>6} {'R@5':>6}   (mean over seeds; min-max of P@5)")
    for n in names:
        ps = [r["results"][n]["p@5"] for r in runs]
        rs = [r["results"][n]["r@5"] for r in runs]
        print(f"{n:22} {statistics.mean(ps):6.3f} {statistics.mean(rs):6.3f}   {min(ps):.3f}-{max(ps):.3f}")
    print(f"suggest p50 per note: {statistics.median(r['suggest_ms_p50'] for r in runs)} ms")
    if args.json:
        args.json.write_text(json.dumps(runs, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    re.purge()
    main()
