"""Generate a deterministic BEIR-format dataset for timing `hybrid eval` at scale.

    PYTHONPATH=eval/bench .venv/bin/python eval/archive/speed/make_beir.py --docs 5000 --queries 200 --out /tmp/beir-5k
    .venv/bin/hybrid eval --beir /tmp/beir-5k --modes lexical,vector,hybrid

Documents are built from real English words (the bundled model's WordPiece vocabulary): each
belongs to one of ``docs/10`` topics with its own characteristic words, mixed with Zipf-distributed
background words. A query takes a few words characteristic of one document; its qrels name that
document (grade 2) and the other documents of its topic (grade 1). Quality figures on this set
mean little; it exists to measure indexing and evaluation time.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path


def vocabulary() -> list[str]:
    from hybrid.embedders import minilm_path
    words = [w.strip() for w in (minilm_path() / "vocab.txt").read_text(encoding="utf-8").splitlines()]
    return [w for w in words if w.isalpha() and w.isascii() and len(w) >= 4]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=5000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    vocab = vocabulary()
    rng.shuffle(vocab)
    background = vocab[:3000]
    weights = [1.0 / (i + 1) for i in range(len(background))]  # Zipf, s = 1
    topical = vocab[3000:]
    n_topics = max(1, args.docs // 10)
    topics = [rng.sample(topical, 25) for _ in range(n_topics)]

    out = args.out
    (out / "qrels").mkdir(parents=True, exist_ok=True)
    docs = []
    with open(out / "corpus.jsonl", "w", encoding="utf-8") as fh:
        for i in range(args.docs):
            t = i % n_topics
            own = rng.sample(topical, 4)  # words particular to this document
            n = rng.randint(80, 260)
            words = [rng.choice(topics[t]) if rng.random() < 0.25 else
                     rng.choice(own) if rng.random() < 0.08 else
                     rng.choices(background, weights)[0] for _ in range(n)]
            paras = [" ".join(words[j:j + 60]).capitalize() + "." for j in range(0, n, 60)]
            title = " ".join(rng.sample(topics[t], 3) + own[:1]).title()
            doc_id = f"doc{i:06d}"
            docs.append((doc_id, t, own))
            fh.write(json.dumps({"_id": doc_id, "title": title, "text": "\n\n".join(paras)}) + "\n")
    with open(out / "queries.jsonl", "w", encoding="utf-8") as fq, \
            open(out / "qrels" / "test.tsv", "w", encoding="utf-8") as fr:
        fr.write("query-id\tcorpus-id\tscore\n")
        for q in range(args.queries):
            doc_id, t, own = docs[rng.randrange(len(docs))]
            text = " ".join(rng.sample(own, 2) + rng.sample(topics[t], 2))
            qid = f"q{q:05d}"
            fq.write(json.dumps({"_id": qid, "text": text}) + "\n")
            fr.write(f"{qid}\t{doc_id}\t2\n")
            for other, t2, _ in docs[t::n_topics]:
                if other != doc_id and t2 == t:
                    fr.write(f"{qid}\t{other}\t1\n")
    print(f"wrote {args.docs} documents and {args.queries} queries to {out}")


if __name__ == "__main__":
    main()
