"""A/B of the whole query path between two checkouts (or commits) of hybrid, on one vault,
interleaved: indexing, cold processes (`--help`, shell completion, `query --local` in every mode
and as an agent, `query` through a running `serve --http`) and warm in-process search. Both
sides index the same vault, each into a HYBRID_HOME of its own with its own default settings;
then every row is timed A B A B ... (`--rounds` pairs after one untimed warm-up pair), so the
shared machine's load falls on both alike. A row reports the median of A, the median of B and
the median of the pair-by-pair ratios A/B. The table is printed row by row and written into
`--out` between the `perf_ab` markers (`--no-write`: printed only).

    .venv/bin/python eval/bench/perf_ab.py                   # this working tree against 1930c1e
    .venv/bin/python eval/bench/perf_ab.py --rounds 3 --warm-repeat 2 --no-write
    .venv/bin/python eval/bench/perf_ab.py --a HEAD --b HEAD~5 --rows help query server warm
    .venv/bin/python eval/bench/perf_ab.py --vault ../shared/vaults/obsidian-help \\
        --query "embed a note in another" --queries qrels/obsidian-help.queries.jsonl

--a / --b: an existing directory is used as a checkout as it is (uncommitted changes included;
--a defaults to this checkout); anything else is a git revision, checked out with
`git worktree add --detach` into a temporary directory and removed at the end. Every command
of a side runs as `python -m hybrid.cli` (old commits have no `hybrid/__main__.py`) with
PYTHONPATH=<checkout> from an empty directory, so Python imports that side's code and nothing
else (checked once per side: `hybrid.__file__` must lie inside the checkout). Shell completion
is the one exception: click names its variable after the program, so it runs the same two lines
as the installed `hybrid` script (`sys.argv[0] = "hybrid"`, `hybrid.cli.main()`).

The default vault is the sample vault bundled with side A, its query `"how did I set up
tailscale"` and its query set `hybrid/data/sample.queries.jsonl` (warm rows); another vault
needs `--query` and `--queries FILE` (JSONL with a "text" field). Cold rows are wall seconds
of the whole process, output discarded; warm rows are one process per side per round that
opens the index, runs every query once untimed, then times each query in every mode
(lexical, vector, hybrid, hybrid as agent when the side's `search` takes `agent=`): p50 and
p95 in ms, median over `--warm-repeat` rounds, ratio = median of the rounds' p50 ratios.
`--config FILE` starts each side's home from that config.toml (its `[settings]` apply to both
sides, e.g. `embedder = "hash:64"` for a run that loads no model). A row a side cannot run (no
`--as-agent`, no completion, a server that does not start) shows "—" for that side, with the
reason under the table.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import common
from perf_ab_sides import HYBRID_SCRIPT, Checkouts, RowFailed, Side, log, tail

ROOT = common.ROOT
DEFAULT_B = "1930c1e"
DEFAULT_QUERY = "how did I set up tailscale"
START, END = "<!-- perf_ab:start -->", "<!-- perf_ab:end -->"
HEADING = "## A/B of the whole query path"
ROWS = ("help", "completion", "query", "lexical", "vector", "agent", "server", "warm")
DASH = "—"

WARM = r'''
import inspect, json, sys, time
home, qfile = sys.argv[1:3]
import hybrid
h = hybrid.open(home)
qs = [json.loads(line)["text"] for line in open(qfile, encoding="utf-8") if line.strip()]
modes = [("lexical", "lexical", False), ("vector", "vector", False), ("hybrid", "hybrid", False)]
if "agent" in inspect.signature(h.search).parameters:
    modes.append(("hybrid-agent", "hybrid", True))

def search(q, mode, agent):
    if agent:
        return h.search(q, top_k=10, mode=mode, agent=True)
    return h.search(q, top_k=10, mode=mode)

for _, mode, agent in modes:  # untimed: models, caches, the agent index
    for q in qs:
        search(q, mode, agent)
out = {"file": hybrid.__file__, "queries": len(qs), "modes": {}}
for label, mode, agent in modes:
    ts = []
    for q in qs:
        t = time.perf_counter()
        search(q, mode, agent)
        ts.append((time.perf_counter() - t) * 1000)
    out["modes"][label] = ts
print(json.dumps(out))
'''


class Bench(Checkouts):
    """The rows, timed on the two sides in alternation, and the table they make."""

    def __init__(self, args: argparse.Namespace, work: Path):
        super().__init__(args, work)
        self.lines: list[str] = []  # the table's rows, as printed
        self.footnotes: list[str] = []

    # -- the table ---------------------------------------------------------------------------
    def emit(self, line: str) -> None:
        self.lines.append(line)
        print(line, flush=True)

    def row(self, path: str, a: str, b: str, ratio: str, pairs: str) -> None:
        self.emit(f"| {path} | {a} | {b} | {ratio} | {pairs} |")

    def report(self, path: str, fmt, results: dict[str, list[float]], failed: dict[str, str],
               ratios: list[float]) -> None:
        cells = {}
        for s in ("A", "B"):
            if s in failed:
                cells[s] = DASH
                self.footnotes.append(f"{path}, {s}: {failed[s]}")
            else:
                cells[s] = fmt(statistics.median(results[s])) if results[s] else DASH
        if failed:  # a side that failed part-way has no median worth comparing
            ratios = []
        ratio = f"{statistics.median(ratios):.2f}" if ratios else DASH
        self.row(path, cells["A"], cells["B"], ratio, str(len(ratios)))

    def pairs(self, path: str, run_a, run_b, rounds: int, fmt, warmup: bool = True,
              skip: dict[str, str] | None = None) -> None:
        """Time ``run_a`` and ``run_b`` alternately: one untimed pair, then ``rounds`` pairs."""
        runs = {"A": run_a, "B": run_b}
        failed = dict(skip or {})
        results: dict[str, list[float]] = {"A": [], "B": []}
        ratios = []
        for i in range(rounds + (1 if warmup else 0)):
            got = {}
            for s in ("A", "B"):
                if s in failed:
                    continue
                try:
                    got[s] = runs[s]()
                except (RowFailed, subprocess.TimeoutExpired) as exc:
                    failed[s] = str(exc)
            if warmup and i == 0:
                continue
            for s, v in got.items():
                results[s].append(v)
            if len(got) == 2:
                ratios.append(got["A"] / got["B"])
        self.report(path, fmt, results, failed, ratios)

    # -- setup -------------------------------------------------------------------------------
    def index(self, sides: list[Side]) -> None:
        times: dict[str, list[float]] = {"A": [], "B": []}
        ratios = []
        for i in range(self.args.index_rounds):
            got = {}
            for side in sides:
                home = self.work / f"home-{side.label}-{i}"
                if self.args.config:  # the settings both sides start from
                    home.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(self.args.config, home / "config.toml")
                cmd = self.cli(side, "index", str(self.args.vault_path), "--name", "v")
                logf = self.work / f"index-{side.label}-{i}.log"
                log(f"side {side.label}: indexing {self.args.vault_path} (round {i + 1})")
                with open(logf, "w") as out:
                    t = time.perf_counter()
                    r = subprocess.run(cmd, cwd=self.cwd, env=self.env(side, home), stdout=out,
                                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
                    got[side.label] = time.perf_counter() - t
                text = logf.read_text(errors="replace")
                if r.returncode:
                    raise SystemExit(f"side {side.label}: `hybrid index` exited {r.returncode}: {tail(text)}")
                if side.home is not None:
                    shutil.rmtree(side.home, ignore_errors=True)  # an earlier round's
                side.home = home
                m = re.findall(r"([\d,]+) chunks", text)
                side.chunks = m[-1].replace(",", "") if m else None
            for s, v in got.items():
                times[s].append(v)
            ratios.append(got["A"] / got["B"])
        self.report("index the vault, default models", lambda x: f"{x:.1f} s", times, {}, ratios)

    def upkeep(self, side: Side) -> None:
        """One untimed query in every mode, so one-time work (the agent index, migrations) is
        done before anything is timed; and what the side supports."""
        q = self.args.query
        helptext = self.capture(side, self.cli(side, "query", "--help")).stdout
        side.agent_cli = "--as-agent" in helptext
        variants = [[], ["--mode", "lexical"], ["--mode", "vector"]] + ([["--as-agent"]] if side.agent_cli else [])
        for extra in variants:
            r = self.capture(side, self.cli(side, "query", q, "--local", *extra))
            if r.returncode:
                side.notes.append(f"untimed `query --local {' '.join(extra)}` exited {r.returncode}: {tail(r.stderr)}")
        r = self.capture(side, [self.py, "-c", HYBRID_SCRIPT], _HYBRID_COMPLETE="bash_complete",
                         COMP_WORDS="hybrid que", COMP_CWORD="1")
        if r.returncode or "query" not in r.stdout:
            side.completion = (f"no completion (`_HYBRID_COMPLETE=bash_complete` exited {r.returncode}, "
                               f"printed {tail(r.stdout or r.stderr, 80)!r})")
        st = self.capture(side, self.cli(side, "status")).stdout
        m = re.search(r"([\d,]+) notes, ([\d,]+) chunks, (.+?), last indexed", st)
        if m:
            side.chunks, side.model = m.group(2).replace(",", ""), m.group(3)

    # -- the rows ----------------------------------------------------------------------------
    def cold(self, sides: list[Side]) -> None:
        a, b = sides
        q = self.args.query
        secs = lambda x: f"{x:.3f} s"  # noqa: E731
        rounds, rows = self.args.rounds, self.args.rows

        def each(make, **extra):
            return (lambda: self.timed(a, make(a), **extra)), (lambda: self.timed(b, make(b), **extra))

        if "help" in rows:
            self.pairs("`hybrid --help`", *each(lambda s: self.cli(s, "--help")), rounds, secs)
        if "completion" in rows:
            skip = {s.label: s.completion for s in sides if s.completion}
            self.pairs("completion: `hybrid que<Tab>` (bash)",
                       *each(lambda s: [self.py, "-c", HYBRID_SCRIPT], _HYBRID_COMPLETE="bash_complete",
                             COMP_WORDS="hybrid que", COMP_CWORD="1"), rounds, secs, skip=skip)
        for key, label, extra in (("query", "`hybrid query --local` (hybrid)", []),
                                  ("lexical", "`hybrid query --local --mode lexical`", ["--mode", "lexical"]),
                                  ("vector", "`hybrid query --local --mode vector`", ["--mode", "vector"]),
                                  ("agent", "`hybrid query --local --as-agent`", ["--as-agent"])):
            if key not in rows:
                continue
            skip = ({s.label: "its `hybrid query --help` has no --as-agent" for s in sides if not s.agent_cli}
                    if key == "agent" else {})
            self.pairs(label, *each(lambda s, extra=extra: self.cli(s, "query", q, "--local", *extra)),
                       rounds, secs, skip=skip)
        if "server" in rows:
            skip = {}
            try:
                for side in sides:
                    try:
                        self.start_server(side)
                    except RowFailed as exc:
                        skip[side.label] = f"server: {exc}"
                self.pairs("`hybrid query` through a running `serve --http`",
                           *each(lambda s: self.cli(s, "query", q)), rounds, secs, skip=skip)
            finally:
                for side in sides:
                    self.stop_server(side)

    def warm(self, sides: list[Side]) -> None:
        qfile = str(self.args.queries_path)

        def run(side: Side) -> dict:
            r = self.capture(side, [self.py, "-c", WARM, str(side.home), qfile], timeout=3600)
            if r.returncode:
                raise RowFailed(f"warm process exited {r.returncode}: {tail(r.stderr)}")
            out = json.loads(r.stdout.strip().splitlines()[-1])
            if not Path(out["file"]).resolve().is_relative_to(side.checkout):
                raise RowFailed(f"imported {out['file']}, not side {side.label}'s code")
            return {m: (common.pct(ts, 50), common.pct(ts, 95)) for m, ts in out["modes"].items()}

        failed: dict[str, str] = {}
        got: dict[str, list[dict]] = {"A": [], "B": []}
        for i in range(self.args.warm_repeat + 1):  # the first pair untimed
            for side in sides:
                if side.label in failed:
                    continue
                log(f"side {side.label}: warm round {i}" + (" (untimed)" if i == 0 else ""))
                try:
                    res = run(side)
                except (RowFailed, subprocess.TimeoutExpired, ValueError, KeyError) as exc:
                    failed[side.label] = str(exc)
                    continue
                if i:
                    got[side.label].append(res)
        n = self.args.warm_repeat
        for mode, label in (("lexical", "lexical"), ("vector", "vector"), ("hybrid", "hybrid"),
                            ("hybrid-agent", "hybrid as agent")):
            path = f"warm {label}, in-process, p50 (p95)"
            cells, why = {}, {}
            for s in ("A", "B"):
                rounds = [r[mode] for r in got[s] if mode in r]
                if s in failed:
                    why[s] = failed[s]
                elif len(rounds) < len(got[s]) or not rounds:
                    why[s] = "its `Hybrid.search` takes no `agent=`"
                if s in why:
                    cells[s] = DASH
                    self.footnotes.append(f"{path}, {s}: {why[s]}")
                else:
                    p50 = statistics.median(r[0] for r in rounds)
                    p95 = statistics.median(r[1] for r in rounds)
                    cells[s] = f"{p50:.1f} ms ({p95:.1f})"
            ratios = [ra[mode][0] / rb[mode][0] for ra, rb in zip(got["A"], got["B"])
                      if mode in ra and mode in rb] if not why else []
            self.row(path, cells["A"], cells["B"], f"{statistics.median(ratios):.2f}" if ratios else DASH,
                     str(len(ratios)) if ratios else f"0 of {n}")


def load() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def command_line(argv: list[str]) -> str:
    py = Path(sys.executable)
    py_s = ".venv/bin/python" if py.parent == ROOT / ".venv" / "bin" else str(py)
    return f"{py_s} eval/bench/perf_ab.py" + (f" {shlex.join(argv)}" if argv else "")


def write_block(out: Path, block: str) -> None:
    text = out.read_text(encoding="utf-8") if out.exists() else ""
    i, j = text.find(START), text.find(END)
    if i >= 0 and j > i:
        text = text[:i + len(START)] + "\n" + block + "\n" + text[j:]
    else:
        text = (text.rstrip("\n") + "\n\n" if text.strip() else "") + (
            f"{HEADING}\n\nWritten by `eval/bench/perf_ab.py` (its docstring says how it measures): "
            f"two checkouts on one vault, timed in alternation.\n\n{START}\n{block}\n{END}\n")
    out.write_text(text, encoding="utf-8")


def parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", default=str(ROOT), metavar="REV_OR_PATH",
                    help="side A: a checkout directory or a git revision (default: this working tree, as it is)")
    ap.add_argument("--b", default=DEFAULT_B, metavar="REV_OR_PATH", help=f"side B, likewise (default: {DEFAULT_B})")
    ap.add_argument("--vault", metavar="PATH",
                    help="the vault both sides index (default: side A's hybrid/sample_vault)")
    ap.add_argument("--query", help=f"the cold rows' query (default, sample vault only: {DEFAULT_QUERY!r})")
    ap.add_argument("--queries", metavar="FILE", help="JSONL with a 'text' field, the warm rows' queries "
                                      "(default, sample vault only: side A's hybrid/data/sample.queries.jsonl)")
    ap.add_argument("--rounds", type=int, default=7, help="timed pairs per cold row (default 7)")
    ap.add_argument("--warm-repeat", type=int, default=3, help="timed pairs of warm processes (default 3)")
    ap.add_argument("--index-rounds", type=int, default=1, help="full indexes per side (default 1)")
    ap.add_argument("--rows", nargs="+", default=list(ROWS), metavar="ROW",
                    help=f"rows to time besides the index, of {', '.join(ROWS)} (default: all)")
    ap.add_argument("--out", help="markdown file to write the table into (default: docs/performance.md)")
    ap.add_argument("--no-write", action="store_true", help="print the table only")
    ap.add_argument("--config", metavar="FILE", help="a config.toml each side's home starts from (default: "
                                                      "none, each side's own defaults), e.g. another embedder")
    ap.add_argument("--keep", metavar="WORKDIR", help="keep the homes, logs and scratch here")
    ap.add_argument("--python", default=sys.executable, help="the interpreter both sides run under")
    ap.add_argument("--server-timeout", type=float, default=180, help="seconds to wait for a server")
    args = ap.parse_args(argv)
    args.rows = {r for item in args.rows for r in item.split(",") if r}
    if unknown := args.rows - set(ROWS):
        ap.error(f"unknown rows: {', '.join(sorted(unknown))} (known: {', '.join(ROWS)})")
    if min(args.rounds, args.warm_repeat, args.index_rounds) < 1:
        ap.error("--rounds, --warm-repeat and --index-rounds must be at least 1")
    args.out_path = Path(args.out).resolve() if args.out else ROOT / "docs" / "performance.md"
    return args


def stopped(signum, frame) -> None:
    raise SystemExit(f"perf_ab: stopped by signal {signum}")  # so that the cleanup below runs


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stopped)
    if args.keep:
        work = Path(args.keep).resolve()
        work.mkdir(parents=True, exist_ok=True)
    else:
        work = Path(tempfile.mkdtemp(prefix="perf-ab-"))
    wt_root = Path(tempfile.mkdtemp(prefix="perf-ab-wt-"))
    bench = Bench(args, work)
    sides: list[Side] = []
    started = datetime.datetime.now(datetime.UTC)
    load_start = load()
    try:
        for label, given in (("A", args.a), ("B", args.b)):
            sides.append(bench.side(label, given, wt_root))
        a, b = sides
        sample = a.checkout / "hybrid" / "sample_vault"
        args.vault_path = Path(args.vault).expanduser().resolve() if args.vault else sample
        if not args.vault_path.is_dir():
            raise SystemExit(f"--vault {args.vault_path}: not a directory")
        is_sample = args.vault_path == sample.resolve()
        if args.query is None:
            if not is_sample:
                raise SystemExit("--query is needed for a vault other than the sample vault")
            args.query = DEFAULT_QUERY
        if args.queries:
            args.queries_path = Path(args.queries).resolve()
        elif is_sample:
            args.queries_path = a.checkout / "hybrid" / "data" / "sample.queries.jsonl"
        elif "warm" in args.rows:
            raise SystemExit("--queries FILE is needed for the warm rows on a vault other than the sample vault")
        for side in sides:
            bench.check_import(side)

        print(f"A: {a.describe()} · B: {b.describe()} · vault {args.vault or 'hybrid/sample_vault'} · "
              f"{os.cpu_count()} cores, load {load_start} at start\n", flush=True)
        bench.emit("| path | A median | B median | A/B (median of pairs) | pairs |")
        bench.emit("|---|---|---|---|---|")
        bench.index(sides)
        for side in sides:
            log(f"side {side.label}: one untimed query in every mode")
            bench.upkeep(side)
        bench.cold(sides)
        if "warm" in args.rows:
            bench.warm(sides)
    finally:
        for side in sides:
            bench.stop_server(side)
        for side in sides:
            if side.worktree is not None:
                r = subprocess.run(["git", "worktree", "remove", "--force", str(side.worktree)], cwd=ROOT,
                                   capture_output=True, text=True)
                log(f"git worktree remove {side.worktree}: " + ("done" if r.returncode == 0 else r.stderr.strip()))
        shutil.rmtree(wt_root, ignore_errors=True)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    load_end = load()
    notes = list(bench.footnotes) + [f"{s.label}: {n}" for s in sides for n in s.notes]
    chunks = {s.label: s.chunks for s in sides}
    chunk_text = (f"{chunks['A']} chunks" if chunks["A"] == chunks["B"]
                  else f"{chunks['A'] or '?'} chunks (A) / {chunks['B'] or '?'} (B)")
    models = (f"model {a.model}" if a.model == b.model
              else f"models: A {a.model or '?'}, B {b.model or '?'}")
    head = [
        f"Measured {started:%Y-%m-%d %H:%M} UTC. A = {a.describe()}, B = {b.describe()}.",
        f"Vault `{args.vault or 'hybrid/sample_vault'}` ({chunk_text}; default {models}), "
        f"query \"{args.query}\"; {os.cpu_count()} cores, load average (1/5/15 min) {load_start} "
        f"at start, {load_end} at end.",
    ]
    print("", *head, *[f"- {n}" for n in notes], sep="\n", flush=True)
    block = "\n".join([
        *head,
        "Cold rows: wall seconds of the whole process, median of "
        f"{args.rounds} pairs; warm rows: p50 (p95) ms of each query, median of {args.warm_repeat} "
        "processes a side; A/B: median of the pairs' ratios (p50 for warm rows).",
        "",
        "    " + command_line(argv),
        "",
        *bench.lines,
        *([""] + [f"- {n}" for n in notes] if notes else []),
    ])
    if not args.no_write:
        write_block(args.out_path, block)
        log(f"written to {args.out_path}")


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit("perf_ab: interrupted (servers stopped, worktrees removed)")
