"""``hybrid eval judge``: record a person's relevance judgements (see hybrid.eval.judge)."""

from __future__ import annotations

import shlex
import sys
from contextlib import ExitStack, contextmanager
from pathlib import Path

import click

from hybrid.core.settings import replace
from hybrid.faces.cli.complete import complete_vault
from hybrid.faces.cli.support import open_handle, progress_bar, terminal_text

ANSWERS = ("y", "2", "n", "a", "s", "q")
PROMPT = ("relevant? y = yes, 2 = highly (the answer), n = no, a = name a note not shown, s = skip question, "
          "q = save and quit")
MISSED = "a = name the answer (a note not shown) by path or title, s = skip, q = save and quit"


@click.command("judge")
@click.argument("questions_file", required=False, type=click.Path(dir_okay=False, path_type=str))
@click.option("-q", "--question", "question_texts", multiple=True,
              help="A question to judge, given here rather than in a file (repeatable).")
@click.option("--from-audit", is_flag=True,
              help="Judge the questions agents asked (the audit log's search calls), newest first.")
@click.option("--limit", type=click.IntRange(min=0), default=20, show_default=True,
              help="With --from-audit: the newest N distinct questions (0 = all).")
@click.option("--vault", "vault_ref", shell_complete=complete_vault,
              help="Registered vault (its index is used as is) or folder "
                                           "(indexed into a temporary folder); default: the sample vault.")
@click.option("--depth", type=click.IntRange(1, 50), default=5, show_default=True,
              help="Notes taken from each mode's top (lexical, vector, hybrid), then pooled.")
@click.option("--queries", "queries_path", required=True, type=click.Path(dir_okay=False, path_type=str),
              help="Queries file to write (JSONL); existing questions keep their qid.")
@click.option("--qrels", "qrels_path", required=True, type=click.Path(dir_okay=False, path_type=str),
              help="Judgements file to write (ranx JSON); existing judgements are kept and not asked again.")
@click.option("--embedder", help="Embedder spec for a folder's temporary index (overrides the setting).")
@click.pass_context
def judge_cmd(ctx, questions_file, question_texts, from_audit, limit, vault_ref, depth, queries_path, qrels_path,
              embedder):
    """Build a labelled set by judging pooled hits: for each question, the top notes of the
    lexical, vector and hybrid modes (each note once, shown with its heading and a snippet), and
    you answer for each:

    \b
      y  relevant (grade 1)      2  highly relevant: the answer (grade 2)
      n  not relevant (grade 0)  s  skip the rest of this question    q  save and quit
      a  name a note no mode found, by its path or title (then its grade)

    A question whose pooled notes are all judged and none relevant is offered again, to name
    its answer. Questions come from QUESTIONS_FILE (one per line, or a queries .jsonl/.tsv),
    from --question (repeatable) or, with --from-audit, from what agents asked. Answers are
    saved after every question into --queries
    (JSONL) and --qrels (JSON), the two files `hybrid eval --queries/--qrels` reads; run it again
    to resume (judged notes are not asked again). More: docs/evaluation.md.
    """
    from hybrid.eval.judge import Judgements, questions_from_audit, questions_from_file

    if sum(map(bool, (questions_file, question_texts, from_audit))) != 1:
        raise click.UsageError("give a QUESTIONS_FILE, --question or --from-audit (one of them)")
    h = open_handle(ctx)
    judgements = Judgements.open(Path(queries_path), Path(qrels_path))
    if from_audit:
        from hybrid.app.audit import AuditLog
        log = AuditLog.from_settings(h.config.data, h.settings)
        if not log.exists():
            raise click.ClickException(f"no agent calls recorded yet ({log.path} does not exist)")
        questions = questions_from_audit(log.records(), limit)
    elif question_texts:
        from hybrid.eval.judge import Question
        questions = [Question(" ".join(t.split())) for t in dict.fromkeys(question_texts) if t.strip()]
    else:
        questions = questions_from_file(Path(questions_file))
    if not questions:
        raise click.ClickException("no questions to judge")
    settings = replace(h.settings, embedder=embedder) if embedder else h.settings
    with _pool_index(h, settings, vault_ref) as (handle, name):
        def search(text, mode):
            return handle.search(text, vaults=[name], mode=mode, top_k=min(100, depth * 10))

        def resolve(ref: str) -> str:
            """The vault path of the note ``ref`` names (a path, title, alias or link)."""
            return handle.get(ref, name, max_chars=1, links=False).path
        asked = _session(questions, judgements, search, depth, resolve)
    judgements.save()
    _summary(judgements, asked, vault_ref, queries_path, qrels_path)


@contextmanager
def _pool_index(h, settings, vault_ref):
    """(handle, vault name) to pool from: a registered vault's own index, else a temporary index
    of the folder (the sample vault by default), its progress bar closed before any question."""
    from hybrid.eval.judge import temporary_index
    from hybrid.faces.cli.eval import quiet_libraries
    if vault_ref and vault_ref in h.config.vaults:
        yield h, vault_ref
        return
    if vault_ref is None:
        from hybrid.eval.inputs import sample_set
        folder = sample_set()[0]
    else:
        folder = Path(vault_ref).expanduser()
    if not folder.is_dir():
        raise click.ClickException(f"vault {vault_ref} is neither a folder nor a registered vault")
    with ExitStack() as stack:
        stack.enter_context(quiet_libraries())
        with progress_bar(sys.stderr.isatty()) as progress:
            pooled = stack.enter_context(temporary_index(folder, settings.include, settings.exclude,
                                                         settings, progress))
        yield pooled


def _session(questions, judgements, search, depth, resolve=None) -> int:
    """Ask about each question's unjudged pooled notes; returns how many questions were shown.
    A question whose notes are all judged, none relevant, is shown to name its answer
    (``resolve(ref)``: the path of the note a path or title names). Stops at q or at the end
    of input (saving what was answered)."""
    from hybrid.eval.judge import GRADES, pool
    shown = 0
    for n, question in enumerate(questions, 1):
        qid = judgements.qid(question)
        done = judgements.judged(qid)
        todo = [c for c in pool(search, question.text, depth) if c.path not in done]
        missed = not todo and done and not any(g > 0 for g in done.values())
        if not todo and not (missed and resolve):
            continue
        shown += 1
        click.echo(f"\n[{n}/{len(questions)}] {qid}: {terminal_text(question.text, one_line=True)}")
        if not todo:  # every pooled note judged, none relevant: the answer is one no mode found
            click.echo(f"  the {len(done)} pooled notes are judged and none is relevant")
            try:
                answer = click.prompt(MISSED, type=click.Choice(("a", "s", "q")), show_choices=False)
            except click.Abort:
                click.echo("")
                return shown
            if answer == "q":
                return shown
            if answer == "a" and not _name(judgements, qid, resolve):
                return shown
            judgements.save()
            continue
        for i, c in enumerate(todo, 1):
            if c.path in judgements.judged(qid):  # named (a) meanwhile
                continue
            click.echo(f"\n  ({i}/{len(todo)}) {terminal_text(c.path, one_line=True)}"
                       f"   [{', '.join(c.modes)}]")
            if c.heading:
                click.echo(f"      {terminal_text(c.heading, one_line=True)}")
            click.echo(f"      {terminal_text(c.snippet[:300], one_line=True)}")
            answer = "a"
            while answer == "a" and c.path not in judgements.judged(qid):
                try:
                    answer = click.prompt(PROMPT, type=click.Choice(ANSWERS), show_choices=False)
                except click.Abort:  # end of input (Ctrl-D): keep what was answered
                    click.echo("")
                    return shown
                # a: a note the pool missed, named by path or title; this one is asked again
                if answer == "a" and (resolve is None or not _name(judgements, qid, resolve)):
                    return shown
            if answer == "q":
                return shown
            if answer == "s":
                break
            if answer != "a":
                judgements.record(qid, c.path, GRADES[answer])
        judgements.save()
    return shown


def _name(judgements, qid: str, resolve) -> bool:
    """Record a note the person names by path or title (asked until one resolves, or an empty
    line skips) with the grade they give it; False at the end of input."""
    from hybrid.core.errors import HybridError
    from hybrid.eval.judge import GRADES
    while True:
        try:
            ref = click.prompt("  the note (path or title; empty: none)", default="", show_default=False)
        except click.Abort:
            click.echo("")
            return False
        if not ref.strip():
            return True
        try:
            path = resolve(ref.strip())
        except HybridError as exc:
            click.echo(f"  {terminal_text(str(exc), one_line=True)}")
            continue
        try:
            grade = click.prompt(f"  {terminal_text(path, one_line=True)}: 2 = the answer, y = relevant",
                                 type=click.Choice(("2", "y")), default="2", show_choices=False)
        except click.Abort:
            click.echo("")
            return False
        judgements.record(qid, path, GRADES[grade])
        return True


def _summary(judgements, asked: int, vault_ref, queries_path: str, qrels_path: str) -> None:
    total = sum(len(d) for d in judgements.qrels.values())
    click.echo(f"\n{asked} question(s) judged this session; {total} judgements in all "
               f"({judgements.relevant_count()} relevant) for {len(judgements.qrels)} questions, "
               f"in {queries_path} and {qrels_path}")
    empty = judgements.unanswered()
    if empty:
        click.echo(f"{len(empty)} question(s) have no relevant note yet, so hybrid eval skips them: "
                   f"{', '.join(empty[:10])}{' …' if len(empty) > 10 else ''}")
    vault = ["--vault", vault_ref] if vault_ref else []
    click.echo("measure with: " + shlex.join(["hybrid", "eval", *vault, "--queries", queries_path,
                                              "--qrels", qrels_path]))
