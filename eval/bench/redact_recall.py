"""The secrets redactor's recall and precision (issue #47): recall per class and per language on the
multilingual labelled set (tests/data/secrets_multilingual.jsonl, values drawn at run time by
tests/secrets_fixtures.py) and on the older corpus of tests/secrets_fixtures.py; its hard
negatives; precision on ordinary prose, line by line (obsidian-help, the sample vault, the
multilingual test vault): every line a redaction changed is listed; precision on the translated
strings of the system's gettext catalogs (``--catalogs``, /usr/share/locale on Debian and
Ubuntu: Linux-PAM's "Current password:", GTK's and PackageKit's dialogs in some 80 languages),
none of which is a secret; and the cost per 1.5 kB chunk.

The redactor is whichever ``hybrid`` Python imports, so the figures of another checkout come
from the same script and data (``PYTHONPATH=<checkout>``); the first lines printed say which.

    .venv/bin/python eval/bench/redact_recall.py [--seeds 47 48 49] [--json FILE] [--no-time]
    PYTHONPATH=/tmp/before .venv/bin/python eval/bench/redact_recall.py   # another checkout
    .venv/bin/python eval/bench/redact_recall.py --catalogs /usr/share/locale --extra DIR --no-time
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import time
from collections import defaultdict
from pathlib import Path
from types import ModuleType

from common import OBSIDIAN_HELP, ROOT, SCRATCH

TESTS = ROOT / "tests"
CHUNK = 1500  # characters: about one chunk of the indexer
FILES = ("*.md", "*.rst", "*.txt", "*.py")  # of an --extra folder


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FIXTURES = _load("secrets_fixtures", TESTS / "secrets_fixtures.py")


def caught(rd, case: dict) -> bool:
    """Every labelled secret fully inside a redacted span and no piece of it left (the scoring
    of tests/unit/store/test_redact_corpus.py)."""
    text = case["line"]
    spans = rd.spans(text)
    out = rd.redact(text)
    return all(FIXTURES.covered(text, s, spans) and not FIXTURES.leaked(s, out) for s in case["secrets"])


def recall(rd, cases: list[dict], key: str) -> dict[str, list[int]]:
    """``{group: [caught, total]}`` by ``case[key]``, with ``all``."""
    table: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for case in cases:
        hit = caught(rd, case)
        for group in (case.get(key, "-"), "all"):
            table[group][0] += hit
            table[group][1] += 1
    return dict(table)


def prose_lines(rd, folder: Path, patterns: tuple[str, ...] = ("*.md",)) -> tuple[int, int, list[str]]:
    """Files of ``folder`` redacted whole: (non-empty lines, lines changed, the changed lines)."""
    scanned, changed = 0, []
    for path in sorted(p for pattern in patterns for p in folder.rglob(pattern)):
        text = path.read_text(encoding="utf-8", errors="replace")
        out = rd.redact(text).split("\n")
        for before, after in zip(text.split("\n"), out):
            scanned += bool(before.strip())
            if before != after:
                changed.append(f"{path.relative_to(folder)}: {before.strip()[:160]}")
    return scanned, len(changed), changed


def catalog_strings(root: Path) -> dict[str, str]:
    """Every translated string (msgstr) of the gettext catalogs (*.mo) under ``root``, once,
    with the catalog it came from."""
    import gettext

    strings: dict[str, str] = {}
    for path in sorted(root.rglob("*.mo")):
        try:
            with path.open("rb") as f:
                catalog = gettext.GNUTranslations(f)._catalog  # type: ignore[attr-defined]
        except (OSError, UnicodeDecodeError, ValueError, IndexError):
            continue
        for key, value in catalog.items():
            if key and isinstance(value, str) and value.strip():
                strings.setdefault(value, str(path.relative_to(root)))
    return strings


def cost(rd, texts: list[str], rounds: int) -> float:
    """Microseconds of this thread's CPU per ``rd.spans`` call, best of ``rounds`` passes."""
    best = float("inf")
    for _ in range(rounds):
        start = time.thread_time()
        for text in texts:
            rd.spans(text)
        best = min(best, time.thread_time() - start)
    return best / len(texts) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[47], help="seeds of the drawn values")
    ap.add_argument("--vault", type=Path, default=OBSIDIAN_HELP)
    ap.add_argument("--extra", type=Path, action="append", default=[],
                    help="another folder whose .md, .rst, .txt and .py files are scanned line by line")
    ap.add_argument("--catalogs", type=Path, help="a folder of gettext catalogs (*.mo), e.g. /usr/share/locale")
    ap.add_argument("--cache", type=Path, default=SCRATCH / "kf-cache",
                    help="kingfisher's compiled-rule cache (an empty folder measures the first compile)")
    ap.add_argument("--rounds", type=int, default=7, help="timing passes (best is kept)")
    ap.add_argument("--no-time", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    import hybrid
    from hybrid.store.agent.redact import FILTER_REVISION, Redactor

    fixtures = FIXTURES
    cache = args.cache
    cache.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    rd = Redactor(cache)
    rd.warm()
    result: dict = {"code": str(Path(hybrid.__file__).parent), "filter_revision": FILTER_REVISION,
                    "rules_ready_s": round(time.perf_counter() - start, 2)}
    print(f"hybrid from {result['code']} (FILTER_REVISION {FILTER_REVISION}); rules ready in "
          f"{result['rules_ready_s']} s")

    positives: list[dict] = []
    for seed in args.seeds:
        cases, negatives = fixtures.multilingual_set(seed)
        positives += cases
    by_class = recall(rd, positives, "class")
    by_lang = recall(rd, positives, "lang")
    missed = sorted({c["id"] for c in positives if not caught(rd, c)})
    old = fixtures.fake_secrets()
    old_recall = recall(rd, old, "none")["all"]
    hard = negatives + [{"id": "HARD_NEGATIVES", "line": t} for t in fixtures.HARD_NEGATIVES] + \
        [{"id": "ORDINARY_NOTES", "line": t} for t in fixtures.ORDINARY_NOTES]
    touched = [f"{n['id']}: {n['line'][:100]!r}" for n in hard if rd.redact(n["line"]) != n["line"]]
    result.update(seeds=args.seeds, recall_by_class=by_class, recall_by_lang=by_lang, missed=missed,
                  old_corpus_recall=old_recall, negatives=len(hard), negatives_touched=touched)

    def row(name: str, hit_total: list[int]) -> str:
        hit, total = hit_total
        return f"  {name:<20} {hit:>4}/{total:<4} {hit / total:.3f}"

    print(f"\nmultilingual set, seeds {args.seeds}: {len(positives)} positives")
    print("recall by class:")
    print("\n".join(row(k, v) for k, v in sorted(by_class.items())))
    print("recall by language:")
    print("\n".join(row(k, v) for k, v in sorted(by_lang.items())))
    print("missed:", ", ".join(missed) or "none")
    print(f"older corpus (tests/secrets_fixtures.py fake_secrets): {old_recall[0]}/{old_recall[1]}")
    print(f"negatives changed: {len(touched)}/{len(hard)}")
    for line in touched:
        print("  ", line)

    prose: dict = {}
    extra = {str(folder): folder for folder in args.extra}
    for name, folder in (("obsidian-help", args.vault), ("sample vault", ROOT / "hybrid" / "sample_vault"),
                         ("multilingual vault", TESTS / "data" / "multilingual_vault"), *extra.items()):
        if not folder.is_dir():
            print(f"\n{name}: {folder} is absent, skipped")
            continue
        scanned, n_changed, changed = prose_lines(rd, folder, FILES if name in extra else ("*.md",))
        prose[name] = {"lines": scanned, "lines_redacted": n_changed, "redacted": changed}
        print(f"\n{name}: {n_changed} of {scanned} non-empty lines redacted")
        for line in changed:
            print("  ", line)
    result["prose"] = prose

    if args.catalogs:
        strings = catalog_strings(args.catalogs)
        touched_strings = [f"{where}: {text.strip()[:160]!r}" for text, where in strings.items()
                           if rd.spans(text)]
        result["catalogs"] = {"strings": len(strings), "strings_redacted": len(touched_strings),
                              "redacted": touched_strings}
        print(f"\ngettext catalogs under {args.catalogs}: {len(touched_strings)} of {len(strings)} "
              f"translated strings redacted")
        for line in touched_strings:
            print("  ", line)

    if not args.no_time:
        notes = [p.read_text(encoding="utf-8", errors="replace")
                 for folder in (args.vault, ROOT / "hybrid" / "sample_vault", TESTS / "data" / "multilingual_vault")
                 if folder.is_dir() for p in sorted(folder.rglob("*.md"))]
        chunks = [n[i:i + CHUNK] for n in notes for i in range(0, max(len(n) - CHUNK // 2, 1), CHUNK)]
        foreign = [c for c in chunks if not c.isascii()]
        samples = [c["line"] for c in positives] + [n["line"] for n in hard]
        timing = {"chunks": len(chunks), "us_per_chunk": round(cost(rd, chunks, args.rounds), 1),
                  "non_ascii_chunks": len(foreign), "us_per_non_ascii_chunk": round(cost(rd, foreign, args.rounds), 1),
                  "samples": len(samples), "us_per_sample": round(cost(rd, samples, args.rounds), 1)}
        result["time"] = timing
        print(f"\ncost (thread CPU, best of {args.rounds}): {timing['us_per_chunk']} us per 1.5 kB chunk "
              f"({timing['chunks']}), {timing['us_per_non_ascii_chunk']} us per non-ASCII chunk "
              f"({timing['non_ascii_chunks']}), {timing['us_per_sample']} us per labelled sample "
              f"({timing['samples']})")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()
