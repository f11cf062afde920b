"""``hybrid eval fit`` and ``hybrid eval calibrate``: the parameters hybrid ships, fitted on
labelled sets (see hybrid.eval.fit and hybrid.eval.calibrate)."""

from __future__ import annotations

import json
import shlex
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from hybrid.faces.cli.support import print_json

SETS_HELP = ("A labelled set: the vault's folder, its queries and their judgements. Repeatable; default: "
             "the bundled sample set.")
UNANSWERABLE = " QRELS `-`: none of the set's questions has an answer in its vault."
EMBEDDER_HELP = "Embedder spec (default: the default embedder, which the shipped file was fitted with)."
WORK_HELP = ("Scratch home the vaults are indexed into, kept for the next run (which then indexes only "
             "what changed); default: a temporary one, removed at the end.")


def _sets(given, allow_unanswerable: bool):
    from hybrid.eval.sets import LabelledSet, sample
    out = []
    for vault, queries, qrels in given:
        if qrels == "-" and not allow_unanswerable:
            raise click.BadParameter("every set needs its judgements here", param_hint="--set")
        for p in (vault, queries, *([] if qrels == "-" else [qrels])):
            if not Path(p).exists():
                raise click.BadParameter(f"{p}: no such file or folder", param_hint="--set")
        out.append(LabelledSet(Path(vault), Path(queries), None if qrels == "-" else Path(qrels)))
    return out or [sample()]


@contextmanager
def _work(work: str | None) -> Iterator[Path]:
    if work:
        Path(work).mkdir(parents=True, exist_ok=True)
        yield Path(work)
    else:
        with tempfile.TemporaryDirectory(prefix="hybrid-fit-") as tmp:
            yield Path(tmp)


def _say(message: str) -> None:
    click.echo(message, err=True)


def _command_line() -> str:
    """How this run was started, for the report: ``hybrid eval ...`` or the script that ran it."""
    import os
    prog = Path(sys.argv[0])
    head = "hybrid" if prog.name in ("hybrid", "__main__.py") else f"python {os.path.relpath(prog)}"
    return f"{head} {shlex.join(sys.argv[1:])}"


@click.command("fit")
@click.option("--set", "given", type=(str, str, str), multiple=True, metavar="VAULT QUERIES QRELS",
              help=SETS_HELP)
@click.option("--embedder", help=EMBEDDER_HELP)
@click.option("--store", metavar="URL", help="Fit the PostgreSQL store kind: index into this database (a URL, or "
                                             "`postgresql` for $HYBRID_DATABASE_URL); default: the local kind.")
@click.option("--work", type=click.Path(file_okay=False, path_type=str), help=WORK_HELP)
@click.option("--out", type=click.Path(dir_okay=False, path_type=str),
              help="Write the fitted parameters file here (from it as it is, else from the shipped one); "
                   "the shipped file is hybrid/data/fitted.json. Default: write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON only.")
def fit_cmd(given, embedder, store, work, out, as_json):
    """Fit a store kind's fusion parameters on labelled queries (tune split), kept only if no
    held-out figure falls and one rises. RRF k, the vector weight and the adaptive-fusion curve,
    over a grid, scored by nDCG@10 + answer@1 in hybrid mode. Writes hybrid/data/fitted.json's
    format (--out). More: eval/reports/postgres/issue31-fit.md."""
    from hybrid.core.settings import Settings
    from hybrid.embedders import make_embedder, options_from
    from hybrid.eval import fit
    from hybrid.eval.run import ranx_module
    from hybrid.eval.sets import drop_from_database, load, open_indexed
    from hybrid.store.agent.view import agent_redactor

    ranx_module()  # scores with ranx (the eval extra): without it, say so before indexing anything
    sets = _sets(given, allow_unanswerable=False)
    base = json.loads(Path(out).read_text(encoding="utf-8")) if out and Path(out).exists() else fit.shipped_file()
    kind = "postgresql" if store else "local"
    with _work(work) as home:
        spec = embedder or Settings().embedder
        # as hybrid eval builds it: the settings' model options, text sent elsewhere redacted
        options = options_from(Settings(), redact=agent_redactor().redact)
        h, names = open_indexed(home, [s.vault for s in sets], store=store, log=_say,
                                embedders=[fit.QueryCache(make_embedder(spec, options=options))], embedder=spec,
                                duplicate_similarity=0)
        try:
            loaded = [(names[s.vault.resolve()], load(s)) for s in sets]
            result = fit.fit(h, kind, loaded, base, log=_say)
        finally:
            if store and not work:
                drop_from_database(h)
            h.close()
    if out:
        fit.write(Path(out), result["file"])
    if as_json:
        print_json(result)
    else:
        click.echo(fit.summary(result))
    if out:
        _say(f"written: {out}")


@click.command("calibrate")
@click.option("--set", "given", type=(str, str, str), multiple=True, metavar="VAULT QUERIES QRELS",
              help=SETS_HELP + UNANSWERABLE)
@click.option("--embedder", help=EMBEDDER_HELP)
@click.option("--work", type=click.Path(file_okay=False, path_type=str), help=WORK_HELP)
@click.option("--hits", type=click.Path(dir_okay=False, path_type=str),
              help="Save the hits collected (features and labels) here; with --reuse, read them instead "
                   "of searching.")
@click.option("--reuse", is_flag=True, help="Fit on the hits --hits holds (no index, no search).")
@click.option("--keep", multiple=True, metavar="MODEL",
              help="Keep this model as shipped (full, mix, relative, lexical; repeatable); fit the others.")
@click.option("--check", is_flag=True, help="Fit nothing: score the shipped models on the hits.")
@click.option("--l2", type=float, default=1.0, show_default=True, help="L2 penalty of the logistic regression.")
@click.option("--report", type=click.Path(dir_okay=False, path_type=str), help="Write a markdown report here.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=str),
              help="Write the models file here (the shipped one is hybrid/data/confidence.json). "
                   "Default: write nothing.")
def calibrate_cmd(given, embedder, work, hits, reuse, keep, check, l2, report, out):
    """Fit the confidence models on labelled queries (tune split) and check them held out: every hit
    of the top 10 in each mode, labelled by the judgements; prints the models and their figures
    as JSON. Writes hybrid/data/confidence.json's format (--out). More:
    eval/reports/quality/confidence.md."""
    from hybrid.eval import calibrate
    from hybrid.eval.sets import load, open_indexed
    from hybrid.retrieval.confidence import MODEL_FEATURES

    unknown = sorted(set(keep) - set(MODEL_FEATURES))
    if unknown:
        raise click.BadParameter(f"{', '.join(unknown)}: the models are {', '.join(MODEL_FEATURES)}",
                                 param_hint="--keep")
    if reuse and not (hits and Path(hits).is_file()):
        raise click.UsageError("--reuse reads the hits a run saved with --hits FILE: give that file")
    if reuse:
        if given:
            raise click.UsageError("--reuse fits on the saved hits: --set has nothing to do")
        records = json.loads(Path(hits).read_text(encoding="utf-8"))
    else:
        sets = _sets(given, allow_unanswerable=True)
        with _work(work) as home:
            h, names = open_indexed(home, [s.vault for s in sets], log=_say,
                                    **({"embedder": embedder} if embedder else {}))
            try:
                records = []
                for s in sets:
                    records += calibrate.collect(h, names[s.vault.resolve()], load(s))
            finally:
                h.close()
        if hits:
            Path(hits).write_text(json.dumps(records), encoding="utf-8")
    result = calibrate.calibrate(records, l2=l2, keep=list(MODEL_FEATURES) if check else keep)
    click.echo(json.dumps(result, indent=1))
    if out:
        Path(out).write_text(json.dumps(calibrate.payload(result), indent=1) + "\n", encoding="utf-8")
        _say(f"written: {out}")
    if report:
        Path(report).write_text(calibrate.render(result, _command_line()), encoding="utf-8")
