"""The shipped confidence models (hybrid/data/confidence.json): `hybrid eval calibrate` on the
project's labelled sets, in this order. Over obsidian-help (beside the checkout): ``qrels/``
``obsidian-help``, ``-para``, ``-none`` (English questions it cannot answer), ``-intl`` and
``-none-intl``; over the bundled sample vault: its 70 queries and ``qrels/sample-none``; over
the sample vault with the notes of ``qrels/mixed-languages/`` (built under eval/out/bench/ by
mixed_languages.py): ``qrels/mixed-languages``. Arguments go to `hybrid eval calibrate`.

    .venv/bin/python eval/bench/calibrate_confidence.py --work eval/out/confidence-home \\
        --hits eval/out/confidence-hits.json --keep lexical --out hybrid/data/confidence.json \\
        --report eval/reports/quality/confidence.md
    .venv/bin/hybrid eval calibrate --hits eval/out/confidence-hits.json --reuse --check  # no search
"""

import shutil
import sys

import common
import mixed_languages

from hybrid.faces.cli.main import main

OH, SAMPLE, MIXED = common.OBSIDIAN_HELP, common.ROOT / "hybrid" / "sample_vault", common.SCRATCH / "mixed-vault"
SETS = [(OH, "obsidian-help"), (OH, "obsidian-help-para"), (OH, "obsidian-help-none"), (OH, "obsidian-help-intl"),
        (OH, "obsidian-help-none-intl"), (SAMPLE, "sample"), (SAMPLE, "sample-none"), (MIXED, "mixed-languages")]


def given(vault, name: str) -> list[str]:
    folder = common.ROOT / ("hybrid/data" if name == "sample" else "qrels")
    qrels = folder / f"{name}.qrels.json"  # none: no question of the set has an answer
    return ["--set", str(vault), str(folder / f"{name}.queries.jsonl"), str(qrels) if qrels.exists() else "-"]


if __name__ == "__main__":
    if "--reuse" not in sys.argv:
        shutil.rmtree(MIXED, ignore_errors=True)
        mixed_languages.build(MIXED)
    sets = [] if "--reuse" in sys.argv else [x for vault, name in SETS for x in given(vault, name)]
    main(["eval", "calibrate", *sets, *sys.argv[1:]])
