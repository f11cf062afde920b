"""Related notes (issue #30, part 1), measured leave-links-out on obsidian-help.

    PYTHONPATH=eval/bench .venv/bin/python eval/archive/notes/related_links.py --home /tmp/rel-oh \\
        [--vault ../shared/vaults/obsidian-help]

HOME holds (or gets: it is indexed first when absent) an index of VAULT, registered under
``--name`` (default: the vault's folder name), with the default embedder. Prints one JSON
object (``--out`` also writes it).

The protocol, fixed before anything was measured:

- **Notes**: the markdown notes with at least 2 resolved links, counted in either direction
  (its neighbours in :class:`hybrid.retrieval.graph.LinkGraph`); the relevant notes of a note
  are those neighbours.
- **Split**: a note is in the *tune* split when the first byte of blake2b(path, 8 bytes) is
  even, else *held-out*. Weights are chosen on tune; held-out figures are reported.
- **Leave-links-out** (the brief's): for each note, every link to or from it is taken out of
  the graph (:func:`hybrid.retrieval.related.without_links`), so neither the link nor the
  co-citation signal can see the edges graded; recall@5 = the share of its neighbours in the
  top 5, MRR = 1 / rank of the first neighbour (top 20). Baseline: meaning alone.
- **Leave-one-link-out** (the co-citation signal's, which the first protocol silences): for
  each note and each neighbour, only the link(s) between the two are taken out; the neighbour's
  rank is counted among the candidates that are not the note's other neighbours ("filtered",
  as in link prediction). hits@5 and MRR over all (note, neighbour) pairs.
- **Speed**: ``Hybrid.related`` on a warm handle, every eligible note ``--repeats`` times,
  the median (owner and agent view).

Signals are gathered once per note through the product's own path
(:func:`hybrid.app.related.gather`) and re-ranked under each weight setting.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

from common import OBSIDIAN_HELP

import hybrid
from hybrid.app.related import gather
from hybrid.core.errors import PathRefused
from hybrid.retrieval.graph import LinkGraph
from hybrid.retrieval.related import WEIGHTS, Signals, Weights, link_signals, rank, tag_weights, without_links

TAGS_GRID = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5)
COCITE_GRID = (0.0, 0.1, 0.2, 0.3, 0.5, 1.0)


def split_of(path: str) -> str:
    return "tune" if hashlib.blake2b(path.encode(), digest_size=8).digest()[0] % 2 == 0 else "held"


def open_vault(home: Path, vault: Path, name: str | None):
    h = hybrid.open(home)
    name = name or vault.name
    if name not in h.config.vaults:
        h.add_vault(vault, name)
        print(f"indexing {vault} into {home} …", file=sys.stderr)
        report = h.index([name])[0]
        if report.error:
            sys.exit(report.error)
    return h, h.config.vault(name)


def leave_links_out(found: dict[int, dict[int, Signals]], rel: dict[int, set[int]],
                    w: Weights, notes: list[int]) -> dict:
    recall, rr = [], []
    for fid in notes:
        top = [f for f, _, _ in rank(found[fid], w, 20)]
        recall.append(len(set(top[:5]) & rel[fid]) / len(rel[fid]))
        first = next((i for i, f in enumerate(top, 1) if f in rel[fid]), None)
        rr.append(1 / first if first else 0.0)
    return {"notes": len(notes), "recall@5": round(statistics.fmean(recall), 4),
            "mrr": round(statistics.fmean(rr), 4)}


def one_link_out(pairs: list[tuple[int, int, dict[int, Signals]]], rel: dict[int, set[int]], w: Weights) -> dict:
    hits, rr = [], []
    for fid, t, found in pairs:
        order = [f for f, _, _ in rank(found, w, len(found)) if f == t or f not in rel[fid]]
        r = order.index(t) + 1 if t in order else None
        hits.append(1.0 if r is not None and r <= 5 else 0.0)
        rr.append(1 / r if r and r <= 20 else 0.0)
    return {"pairs": len(pairs), "hits@5": round(statistics.fmean(hits), 4), "mrr": round(statistics.fmean(rr), 4)}


def without_edge(graph: LinkGraph, a: int, b: int) -> LinkGraph:
    def drop(m: dict[int, list[int]]) -> dict[int, list[int]]:
        return {f: kept for f, ids in m.items()
                if (kept := [i for i in ids if not ({f, i} == {a, b})])}
    return LinkGraph(graph.notes, drop(graph.out), drop(graph.back), graph.unresolved)


def readable(h, path: str, vault: str, agent: bool) -> bool:
    """Whether ``path`` may be asked about (an agent's: not a private note)."""
    try:
        h.related(path, vault, agent=agent)
        return True
    except PathRefused:
        return False


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--vault", type=Path, default=OBSIDIAN_HELP)
    ap.add_argument("--name", help="the vault's name in HOME (default: its folder's name)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--mode", choices=("best", "mean"), default=WEIGHTS.mode,
                    help="meaning mode of the leave-one-link-out runs (default: the product's)")
    ap.add_argument("--tags", type=float, help="tag weight of those runs (default: the product's)")
    args = ap.parse_args()
    h, v = open_vault(args.home, args.vault.resolve(), args.name)
    store = h.session.store(v)
    graph = LinkGraph.build(store.catalog.notes())
    rel = {fid: graph.neighbours(fid) for fid, n in graph.notes.items() if n.path.lower().endswith(".md")}
    notes = sorted((f for f, ns in rel.items() if len(ns) >= 2), key=lambda f: graph.notes[f].path)
    split = {"tune": [f for f in notes if split_of(graph.notes[f].path) == "tune"],
             "held": [f for f in notes if split_of(graph.notes[f].path) == "held"]}
    out: dict = {"vault": str(v.path), "defaults": WEIGHTS.to_dict(), "notes_in_vault": len(graph.notes),
                 "eligible": len(notes), "split": {k: len(x) for k, x in split.items()},
                 "leave_links_out": {}, "one_link_out": {}}

    # --- leave-links-out: meaning modes, then the tag weight, chosen on tune ---
    found_by_mode: dict[str, dict[int, dict[int, Signals]]] = {}
    for mode in ("best", "mean"):
        t0 = time.perf_counter()
        found_by_mode[mode] = {f: gather(store, without_links(graph, f), f, mode)[0] or {} for f in notes}
        print(f"gathered {mode} in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    table = out["leave_links_out"]
    for mode, found in found_by_mode.items():
        base = Weights(meaning=1.0, link=0.0, tags=0.0, cocited=0.0, mode=mode)
        table[f"vector-only {mode}"] = {k: leave_links_out(found, rel, base, x) for k, x in split.items()}
        for tw in TAGS_GRID[1:]:
            w = replace(base, tags=tw)
            table[f"{mode} + tags {tw}"] = {k: leave_links_out(found, rel, w, x) for k, x in split.items()}
    best_key = max(table, key=lambda k: (table[k]["tune"]["recall@5"], table[k]["tune"]["mrr"]))
    out["chosen_on_tune"] = {"leave_links_out": best_key}
    for mode in found_by_mode:  # the tag weight per mode, on tune
        rows = [k for k in table if k.startswith(mode) or k == f"vector-only {mode}"]
        out["chosen_on_tune"][f"tags ({mode})"] = max(  # a tie goes to the smaller weight
            rows, key=lambda k: (table[k]["tune"]["recall@5"], table[k]["tune"]["mrr"],
                                 -float(k.rsplit(" ", 1)[1]) if "tags" in k else 0.0))
    mode = args.mode
    tags_w = WEIGHTS.tags if args.tags is None else args.tags

    # --- leave-one-link-out: the co-citation weight, with the product's meaning mode ---
    full = {f: gather(store, graph, f, mode)[0] or {} for f in notes}
    idf = tag_weights(graph)
    pairs: dict[str, list] = {"tune": [], "held": []}
    for f in notes:
        for t in sorted(rel[f]):
            g = without_edge(graph, f, t)
            links = link_signals(g, f, idf)
            merged: dict[int, Signals] = {}
            for other, sig in full[f].items():
                fresh = links.get(other, Signals())
                merged[other] = replace(fresh, meaning=sig.meaning, chunk=sig.chunk)
            pairs[split_of(graph.notes[f].path)].append((f, t, merged))
    table2 = out["one_link_out"]
    out["one_link_out_at"] = {"mode": mode, "tags": tags_w}
    for cw in COCITE_GRID:
        w = replace(WEIGHTS, tags=tags_w, cocited=cw, mode=mode)
        table2[f"cocited {cw}"] = {k: one_link_out(x, rel, w) for k, x in pairs.items()}
    best_c = max(table2, key=lambda k: (table2[k]["tune"]["hits@5"], table2[k]["tune"]["mrr"]))
    out["chosen_on_tune"]["one_link_out"] = best_c

    # --- speed: the product's call on a warm handle ---
    paths = [graph.notes[f].path for f in notes]
    for agent in (False, True):
        asked = [p for p in paths if readable(h, p, v.name, agent)]  # warms the graph, the agent view
        times = []
        for _ in range(args.repeats):
            for p in asked:
                t = time.perf_counter()
                h.related(p, v.name, agent=agent)
                times.append((time.perf_counter() - t) * 1000)
        times.sort()
        out[f"latency_ms_{'agent' if agent else 'owner'}"] = {
            "calls": len(times), "p50": round(statistics.median(times), 2),
            "p95": round(times[int(0.95 * len(times)) - 1], 2)}
    h.close()
    text = json.dumps(out, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
