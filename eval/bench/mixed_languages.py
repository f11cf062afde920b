"""`hybrid eval` on a vault of mixed languages: the bundled sample vault (English) plus the 12
notes of ``qrels/mixed-languages/`` (Chinese, German, Russian, Japanese, Spanish, French,
Italian, Portuguese; each on a topic no English note covers), copied together into a
temporary folder, with the 20 questions of ``qrels/mixed-languages.queries.jsonl``: 12 English
questions whose answer is one of those notes (category ``en-to-other``) and 8 questions in
those languages whose answer is an English note (``other-to-en``). Arguments after the script's
own go to `hybrid eval` (``--out DIR``, ``--modes``...).

    .venv/bin/python eval/bench/mixed_languages.py --out /tmp/mixed-eval
    .venv/bin/python eval/bench/mixed_languages.py --queries hybrid/data/sample.queries.jsonl \\
        --qrels hybrid/data/sample.qrels.json     # the sample set, with the other languages as distractors
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import common

ROOT = common.ROOT


def build(folder: Path) -> Path:
    """The sample vault with the notes in other languages under ``intl/``."""
    shutil.copytree(ROOT / "hybrid" / "sample_vault", folder)
    shutil.copytree(ROOT / "qrels" / "mixed-languages", folder / "intl")
    return folder


def main(argv: list[str]) -> int:
    args = list(argv)
    if "--queries" not in args:
        args += ["--queries", str(ROOT / "qrels" / "mixed-languages.queries.jsonl"),
                 "--qrels", str(ROOT / "qrels" / "mixed-languages.qrels.json")]
    with tempfile.TemporaryDirectory(prefix="hybrid-mixed-") as tmp:
        vault = build(Path(tmp) / "mixed")
        return subprocess.call([sys.executable, "-m", "hybrid", "eval", "--vault", str(vault), *args])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
