"""``hybrid eval``: measure retrieval quality on a labelled query set (see hybrid.eval.run)."""

from __future__ import annotations

import logging
import os
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import click

from hybrid.core.settings import Settings, replace
from hybrid.eval.inputs import DEFAULT_METRICS, Problems, Query
from hybrid.faces.cli.complete import complete_vault
from hybrid.faces.cli.support import (
    LazyGroup,
    confirm_destinations,
    open_handle,
    print_json,
    progress_bar,
    yes_option,
)
from hybrid.sources import KINDS

if TYPE_CHECKING:
    from hybrid.core.config import Vault


def _csv(value: str, cast, what: str) -> list:
    try:
        return [cast(v.strip()) for v in value.split(",") if v.strip()]
    except ValueError:
        raise click.BadParameter(f"{value!r}: expected a comma-separated list of {what}") from None


def _bool(v: str) -> bool:
    if v.lower() in ("on", "true", "1", "yes"):
        return True
    if v.lower() in ("off", "false", "0", "no"):
        return False
    raise ValueError(v)


def _weights(v: str) -> tuple[float, float]:
    a, _, b = v.partition(":")
    return float(a), float(b or 1)


EVAL_HELP = """Measure retrieval quality on labelled queries (default: the bundled sample vault
and its 70 labelled queries): every combination of the modes and settings given is run and
scored, with a 95% confidence interval on every figure.

\b
Metrics (means over the queries; a "relevant" note is one judged 1 or 2):
  ndcg@10     order of the first 10 notes, graded: 1 = the best notes first, 0 = none found
  recall@k    share of a query's relevant notes among the first k notes (k = 5, 10, 100)
  mrr@10      1 / rank of the first relevant note (0 when none is in the first 10)
  map@100     mean of the precision at each relevant note's rank, over the first 100
  answer@1    share of queries whose first note is an answer (a note of the query's top grade)
  answer@10   share of queries with an answer among the first 10 notes

\b
Files (a doc is a vault-relative note path, or path#Heading > Sub for a section):
  queries  JSONL  {"qid": "q1", "text": "reset my password", "category": "paraphrase"}
           or TSV q1<TAB>reset my password
  qrels    JSON   {"q1": {"Account/Passwords.md": 2, "Account/Login.md": 1}}
           or TREC q1<TAB>0<TAB>Account/Passwords.md<TAB>2
  grades: 2 = the answer, 1 = relevant, 0 or absent = not relevant

Each run is compared with the best one (paired bootstrap over the queries: the difference,
its 95% CI, and a warning when the queries cannot tell the two apart). When settings were
varied and one is clearly better than yours, it prints the config.toml lines that make it your
setting; otherwise it says to keep yours. `hybrid eval judge` writes the two files by asking
you about pooled hits. More: docs/evaluation.md.
"""


JUDGE_SUMMARY = ("Build a labelled set by judging pooled hits: for each question, the top notes of the "
                 "lexical, vector and hybrid modes (each note once, shown with its heading and a snippet), "
                 "and you answer for each:")


FIT_SUMMARY = ("Fit a store kind's fusion parameters on labelled queries (tune split), kept only if no "
               "held-out figure falls and one rises.")
CALIBRATE_SUMMARY = ("Fit the confidence models on labelled queries (tune split) and check them held out: "
                     "every hit of the top 10 in each mode, labelled by the judgements; prints the models and "
                     "their figures as JSON.")


@click.group("eval", cls=LazyGroup, invoke_without_command=True, help=EVAL_HELP,
             lazy_commands={"judge": (".judge:judge_cmd", JUDGE_SUMMARY),
                            "fit": (".eval_fit:fit_cmd", FIT_SUMMARY),
                            "calibrate": (".eval_fit:calibrate_cmd", CALIBRATE_SUMMARY)})
@click.option("--vault", "vault_ref", shell_complete=complete_vault,
              help="Vault folder or registered name (default: the bundled sample vault).")
@click.option("--queries", "queries_path", type=click.Path(dir_okay=False, path_type=str),
              help="Queries: TSV or JSONL.")
@click.option("--qrels", "qrels_path", type=click.Path(dir_okay=False, path_type=str),
              help="Judgements: TREC or ranx JSON.")
@click.option("--beir", type=click.Path(file_okay=False, path_type=str),
              help="A BEIR dataset directory (corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv).")
@click.option("--beir-split", metavar="SPLIT",
              help="Which qrels/SPLIT.tsv of --beir to evaluate (default: test, or the only split "
                   "the folder has, e.g. train).")
@click.option("--modes", help="Comma list of lexical, vector, hybrid, rerank (default: lexical,vector,hybrid, "
                              "plus rerank when a reranker is configured: the rerank_model setting or "
                              "--rerank-model).")
@click.option("--chunk-tokens", help="Comma list (default: the chunk_tokens setting).")
@click.option("--chunk-overlap", help="Comma list (default: the chunk_overlap setting).")
@click.option("--context-header", help="Comma list of on/off (default: the setting).")
@click.option("--rrf-k", help="Comma list (default: the rrf_k setting).")
@click.option("--weights", help="Comma list of LEXICAL:VECTOR weights, e.g. 1:1,1:0.5.")
@click.option("--metrics", default=",".join(DEFAULT_METRICS), show_default=True,
              help="Comma list of ranx metrics (ndcg, recall, mrr, map, precision, hits, …, each with "
                   "an optional @k); answer@1 and answer@10 are always reported.")
@click.option("--significance", is_flag=True, help="Paired t-test of every run against the first.")
@click.option("--rerank-model", help="Reranker for the rerank mode: late, ollama:MODEL or a cross-encoder "
                                      "(overrides the setting).")
@click.option("--embedder", help="Embedder spec (overrides the setting).")
@click.option("--limit", type=int, help="Evaluate only the first N queries.")
@click.option("--split", help='Evaluate only the queries of this split (JSONL "split" field, e.g. tune, heldout).')
@click.option("--out", type=click.Path(file_okay=False, path_type=str),
              help="Write report.md, results.json, runs and plots here (default: a new folder "
                   "<data dir>/eval/<date-time>).")
@click.option("--store", metavar="URL", help="Index into another store kind instead of local files "
              "(a postgresql:// or milvus:// URL, or `postgresql` for $HYBRID_DATABASE_URL); the "
              "evaluation's vault is dropped after.")
@click.option("--source", "sources", multiple=True,
              type=click.Choice(list(KINDS)),
              help="Search only documents of this kind (repeatable: any), as `query --source`.")
@click.option("--no-report", is_flag=True, help="Write no report folder (scripted runs that read --json).")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON only.")
@yes_option
@click.pass_context
def eval_cmd(ctx, vault_ref, queries_path, qrels_path, beir, beir_split, modes, chunk_tokens, chunk_overlap,
             context_header, rrf_k, weights, metrics, significance, rerank_model, embedder, limit, split, out,
             store, sources, no_report, as_json, yes):
    from click.core import ParameterSource

    from hybrid.eval.advice import advise
    from hybrid.eval.run import grid, run_eval

    if ctx.invoked_subcommand is not None:
        given = [p.opts[0] for p in ctx.command.params
                 if ctx.get_parameter_source(p.name) is ParameterSource.COMMANDLINE]
        if given:
            raise click.UsageError(f"{', '.join(given)} belong to `hybrid eval` itself: put the "
                                   f"options after `{ctx.invoked_subcommand}` (see `hybrid eval "
                                   f"{ctx.invoked_subcommand} --help`)")
        return

    if out and no_report:
        raise click.UsageError("--out writes the report, --no-report writes none: use one of them")
    from hybrid.eval.inputs import metric_list
    chosen_metrics = metric_list(_csv(metrics, str, "metric names"))
    h = open_handle(ctx)
    changes = {k: v for k, v in (("rerank_model", rerank_model), ("embedder", embedder)) if v}
    settings = replace(h.settings, **changes)
    problems = Problems()
    vault_path, include, exclude, queries, qrels, registered = _labelled_set(
        h, settings, vault_ref, queries_path, qrels_path, (beir, beir_split), limit, split, problems)
    reuse_from = None
    if registered is not None:
        # the vault as it is indexed: its own left-out sections and blocks, its model (unless
        # --embedder names another), and the vectors its index holds for the same texts
        settings = replace(settings, exclude_sections=tuple(registered.exclude_sections),
                           exclude_blocks=tuple(registered.exclude_blocks),
                           **({} if embedder else {"embedder": registered.embedder}))
        reuse_from = h.catalog_or_none(registered)
    from hybrid.embedders import options_from
    from hybrid.embedders.remote import destinations
    confirm_destinations(h.config, destinations(settings.embedder, options_from(settings))
                         + destinations(settings.rerank_model, options_from(settings), rerank=True), yes=yes)
    s = settings
    configs = grid(
        _csv(modes, str, "modes") if modes else default_modes(settings),
        _csv(chunk_tokens, int, "integers") if chunk_tokens else [s.chunk_tokens],
        _csv(chunk_overlap, int, "integers") if chunk_overlap else [s.chunk_overlap],
        _csv(context_header, _bool, "on/off") if context_header else [s.context_header],
        _csv(rrf_k, float, "numbers") if rrf_k else [s.rrf_k],
        _csv(weights, _weights, "LEXICAL:VECTOR pairs") if weights else [(s.weight_lexical, s.weight_vector)],
    )
    with quiet_libraries():
        with progress_bar(sys.stderr.isatty()) as progress:
            result = run_eval(vault_path, queries, qrels, configs, settings, problems, include=include,
                              exclude=exclude, metrics=chosen_metrics,
                              significance=significance, progress=progress, store=store,
                              sources=tuple(sources), reuse_from=None if store else reuse_from)
        result.advice = advise(result, settings)
        target = None if no_report else Path(out) if out else default_out(h.config.data)
        _output(result, target, as_json, settings, h.config.path)


def default_modes(settings: Settings) -> list[str]:
    """lexical, vector and hybrid; rerank too when a reranker is configured (``rerank_model``
    set in the config file or by --rerank-model: its default, empty, means none)."""
    return ["lexical", "vector", "hybrid"] + (["rerank"] if settings.rerank_model else [])


def default_out(data: Path) -> Path:
    """A new report folder when --out is not given: ``<data>/eval/<date-time>`` (``-2``, ``-3``…
    when one run follows another within the second)."""
    from datetime import datetime
    base = data / "eval" / datetime.now().strftime("%Y%m%d-%H%M%S")
    out, n = base, 1
    while True:
        try:
            out.mkdir(parents=True)
            return out
        except FileExistsError:
            n += 1
            out = base.with_name(f"{base.name}-{n}")


# Libraries whose warnings and log records are noise to a `hybrid eval` user (numba warns when
# ranx compiles its metrics on first use, matplotlib when it builds its font cache, …).
QUIET_LOGGERS = ("numba", "ranx", "matplotlib", "PIL", "pandas", "torch", "transformers",
                 "sentence_transformers", "huggingface_hub", "tokenizers", "onnxruntime", "faiss",
                 "httpx", "urllib3")


@contextmanager
def quiet_libraries() -> Iterator[None]:
    """Silence the libraries' Python warnings (hybrid's own stay on), their loggers below ERROR,
    and tqdm bars and the tokenizers fork notice, for the duration; errors still raise."""
    env = {k: v for k, v in (("TOKENIZERS_PARALLELISM", "false"), ("TQDM_DISABLE", "1")) if k not in os.environ}
    os.environ.update(env)
    loggers = [logging.getLogger(name) for name in QUIET_LOGGERS]
    levels = [lg.level for lg in loggers]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        warnings.filterwarnings("default", module=r"hybrid(\.|$)")
        for lg in loggers:
            lg.setLevel(max(lg.getEffectiveLevel(), logging.ERROR))
        try:
            yield
        finally:
            for lg, level in zip(loggers, levels):
                lg.setLevel(level)
            for k in env:
                os.environ.pop(k, None)


def _labelled_set(h, settings: Settings, vault_ref, queries_path, qrels_path,
                  beir_set: tuple[str | None, str | None], limit, split, problems: Problems
                  ) -> tuple[Path, list[str], list[str], dict[str, Query], dict, Vault | None]:
    """The vault (folder, include, exclude), queries and judgements to evaluate: a BEIR
    dataset, a registered vault or folder with --queries/--qrels, or the bundled sample set;
    judgements on notes the vault lacks are dropped with a warning. Last, the registered vault
    evaluated (named, or the folder of one), else None."""
    import tempfile

    from hybrid.eval.inputs import beir_qrels_file, load_beir, load_qrels, load_queries, reconcile, sample_set
    from hybrid.sources.walk import discover

    include, exclude = list(settings.include), list(settings.exclude)
    registered: Vault | None = None
    beir, beir_split = beir_set
    if beir_split and not beir:
        raise click.UsageError("--beir-split chooses a split of --beir DIR: pass --beir too")
    if beir:
        vault_path = Path(tempfile.mkdtemp(prefix="hybrid-beir-")) / "vault"
        queries, qrels, _ = load_beir(Path(beir), vault_path, problems, beir_split)
        qrels_name = str(beir_qrels_file(Path(beir), beir_split))
    else:
        if vault_ref is None:
            vault_path, sample_queries, sample_qrels = sample_set()
            queries_path = queries_path or str(sample_queries)
            qrels_path = qrels_path or str(sample_qrels)
        elif vault_ref in h.config.vaults:
            registered = h.config.vault(vault_ref)
        else:
            vault_path = Path(vault_ref).expanduser()
            registered = next((v for v in h.config.all_vaults() if v.is_folder and not v.store
                               and vault_path.is_dir() and v.path == vault_path.resolve()), None)
        if registered is not None:
            vault_path, include, exclude = registered.path, registered.include, registered.exclude
        if not vault_path.is_dir():
            raise click.ClickException(f"vault {vault_ref or vault_path} is neither a folder nor a registered vault")
        if not queries_path or not qrels_path:
            raise click.ClickException("pass --queries and --qrels (or --beir DIR)")
        queries = load_queries(Path(queries_path), problems)
        qrels = load_qrels(Path(qrels_path), problems)
        qrels_name = qrels_path
    if split:
        from hybrid.eval.inputs import select_split
        queries = select_split(queries, split)
        qrels = {q: d for q, d in qrels.items() if q in queries}
    if limit:
        queries = dict(list(queries.items())[:limit])
        qrels = {q: d for q, d in qrels.items() if q in queries}
    notes = {e.path for e in discover(vault_path, include, exclude)}
    if not notes:
        raise click.ClickException(f"{vault_path}: no notes (empty vault, or include globs match nothing)")
    queries, qrels = reconcile(queries, qrels, notes, problems, qrels_name)
    return vault_path, include, exclude, queries, qrels, registered


def _output(result, out: Path | None, as_json: bool, settings: Settings, config_path: Path) -> None:
    """The report files (none when ``out`` is None: --no-report), then JSON or the table on
    stdout, then where the report is (on stderr with --json, so stdout stays JSON)."""
    import shlex

    from hybrid.eval.report import print_table, write_report
    report = None
    if out is not None:
        write_report(result, out, "hybrid " + shlex.join(sys.argv[1:]), settings, config_path)
        report = out / "report.md"
    if as_json:
        print_json(result.to_dict())
    else:
        print_table(result, report, config_path)
    if report is not None:
        click.echo(f"report: {report}", err=as_json)
