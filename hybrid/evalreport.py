"""Reports of ``hybrid eval``: a table on stdout, and under ``--out`` a markdown report, the
results as JSON, each run and the qrels in TREC format, and PNG plots."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Sequence

from .evaluate import EvalResult

ANSWER_COLS = ("answer@1", "answer@10")


def _varying(result: EvalResult) -> list[str]:
    """Config fields that differ between runs (the rest go into the header)."""
    fields = ["mode", "chunk_tokens", "chunk_overlap", "context_header", "rrf_k", "weight_lexical", "weight_vector"]
    vals = {f: {getattr(r.config, f) for r in result.results} for f in fields}
    return [f for f in fields if len(vals[f]) > 1 or f == "mode"]


def _marks(result: EvalResult, metric: str) -> dict[str, str]:
    """'*' marks a run significantly different (paired t-test, p < 0.05) from the first run."""
    if not result.significance or not result.results:
        return {}
    base = result.results[0].config.name
    out = {}
    for r in result.results[1:]:
        p = result.significance.get(base, {}).get(r.config.name, {}).get(metric)
        if p is not None and p < 0.05:
            out[r.config.name] = "*"
    return out


def rows(result: EvalResult) -> tuple[list[str], list[list[str]]]:
    cols = _varying(result)
    header = cols + list(result.metrics) + list(ANSWER_COLS)
    body = []
    for r in result.results:
        cells = [str(getattr(r.config, c)) for c in cols]
        for m in result.metrics:
            cells.append(f"{r.metrics[m]:.3f}{_marks(result, m).get(r.config.name, '')}")
        for a in ANSWER_COLS:
            cells.append(f"{sum(r.answer_at[a[7:]].values()) / max(1, len(r.answer_at[a[7:]])):.3f}")
        body.append(cells)
    return header, body


def category_rows(result: EvalResult, metric: str) -> tuple[list[str], list[list[str]]]:
    cats = result.categories()
    header = ["run"] + cats
    body = [[r.config.name] + [f"{v:.3f}" for v in result.by_category(r, metric).values()]
            for r in result.results]
    return header, body


def print_table(result: EvalResult) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 160)
    header, body = rows(result)
    t = Table(title=f"{len(result.queries)} queries, {len(result.results)} runs")
    for h in header:
        t.add_column(h, justify="left" if h in ("mode",) else "right")
    for row in body:
        t.add_row(*row)
    console.print(t)
    if result.categories():
        for metric in ("answer@1", "answer@10", "ndcg@10"):
            hh, bb = category_rows(result, metric)
            ct = Table(title=f"{metric} by category")
            for h in hh:
                ct.add_column(h, justify="left" if h == "run" else "right")
            for row in bb:
                ct.add_row(*row)
            console.print(ct)
    if result.significance:
        console.print("* = differs from the first run with p < 0.05 (paired t-test)")
    if result.problems.counts:
        console.print("skipped: " + ", ".join(f"{k} {v}" for k, v in sorted(result.problems.counts.items())))


def _md_table(header: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in body]
    return "\n".join(lines)


def write_report(result: EvalResult, out: Path, command: str, settings: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    runs_dir = out / "runs"
    runs_dir.mkdir(exist_ok=True)
    for r in result.results:
        with open(runs_dir / f"{r.config.name}.trec", "w", encoding="utf-8") as fh:
            for qid, docs in r.run.items():
                for rank, (doc, score) in enumerate(sorted(docs.items(), key=lambda kv: -kv[1]), 1):
                    fh.write(f"{qid}\tQ0\t{doc}\t{rank}\t{score:g}\t{r.config.name}\n")
    with open(out / "qrels.trec", "w", encoding="utf-8") as fh:
        for qid, docs in result.qrels.items():
            for doc, grade in docs.items():
                fh.write(f"{qid}\t0\t{doc}\t{grade}\n")
    (out / "results.json").write_text(json.dumps(result.to_dict(), indent=2), encoding="utf-8")
    plots = _plots(result, out)

    header, body = rows(result)
    parts = ["# hybrid eval report", "",
             f"Command: `{command}`", "",
             f"{len(result.queries)} queries; {len(result.results)} runs; "
             f"{result.chunks_embedded} chunk texts embedded; {result.seconds:.1f} s in all.", "",
             "Settings: " + ", ".join(f"`{k}={v!r}`" for k, v in sorted(settings.items())), "",
             "## Runs", "", _md_table(header, body), "",
             "Metrics from ranx over notes (a note ranks by its best chunk; section-judged queries "
             "rank sections). `answer@k`: share of queries with a top-grade answer in the first k."]
    if result.significance:
        parts += ["", "`*`: differs from the first run with p < 0.05 (paired two-sided t-test)."]
    if result.categories():
        for metric in ("answer@1", "answer@10", "ndcg@10"):
            hh, bb = category_rows(result, metric)
            parts += ["", f"## {metric} by category", "", _md_table(hh, bb)]
    parts += ["", "## Index builds", ""] + [f"- {k}: {v} s" for k, v in result.index_seconds.items()]
    if result.skipped_modes:
        parts += ["", "Skipped modes: " + ", ".join(result.skipped_modes) + " (see warnings)."]
    parts += ["", "## Skipped input", ""]
    if result.problems.counts:
        parts += [f"- {k}: {v}" for k, v in sorted(result.problems.counts.items())]
        parts += ["", "<details><summary>messages</summary>", ""] + \
                 [f"- {m}" for m in result.problems.messages[:500]] + ["", "</details>"]
    else:
        parts.append("none")
    if plots:
        parts += ["", "## Plots", ""] + [f"![{p.stem}]({p.name})" for p in plots]
    (out / "report.md").write_text("\n".join(parts) + "\n", encoding="utf-8")


def _plots(result: EvalResult, out: Path) -> list[Path]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []
    modes = sorted({r.config.mode for r in result.results})
    sizes = sorted({r.config.chunk_tokens for r in result.results})
    if len(sizes) > 1:
        fig, ax = plt.subplots(figsize=(6, 4))
        for mode in modes:
            pts = {}
            for r in result.results:
                if r.config.mode == mode:
                    pts[r.config.chunk_tokens] = max(pts.get(r.config.chunk_tokens, -1), r.metrics["ndcg@10"]
                                                     if "ndcg@10" in r.metrics else next(iter(r.metrics.values())))
            xs = sorted(pts)
            ax.plot(xs, [pts[x] for x in xs], marker="o", label=mode)
        ax.set_xlabel("chunk tokens")
        ax.set_ylabel("nDCG@10 (best run per size)")
        ax.legend()
        ax.grid(alpha=0.3)
        p = out / "metric_vs_chunk_size.png"
        fig.tight_layout()
        fig.savefig(p, dpi=110)
        plt.close(fig)
        made.append(p)
    cats = result.categories()
    if cats:
        best = {}
        for r in result.results:
            key = r.config.mode
            if key not in best or r.metrics.get("ndcg@10", 0) > best[key].metrics.get("ndcg@10", 0):
                best[key] = r
        fig, ax = plt.subplots(figsize=(max(6, 1.4 * len(cats)), 4))
        width = 0.8 / max(1, len(best))
        for i, (mode, r) in enumerate(sorted(best.items())):
            vals = result.by_category(r, "answer@10")
            ax.bar([j + i * width for j in range(len(cats))],
                   [0 if math.isnan(vals[c]) else vals[c] for c in cats], width, label=mode)
        ax.set_xticks([j + width * (len(best) - 1) / 2 for j in range(len(cats))], cats)
        ax.set_ylabel("answer@10 (best run per mode)")
        ax.set_ylim(0, 1.05)
        ax.legend()
        p = out / "categories.png"
        fig.tight_layout()
        fig.savefig(p, dpi=110)
        plt.close(fig)
        made.append(p)
    return made
