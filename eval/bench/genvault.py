"""Deterministic synthetic markdown vaults for scale benchmarks (issue #5).

    .venv/bin/python eval/bench/genvault.py --notes 10000 --out /tmp/vault-10k [--seed 7]

Realistic shape rather than realistic meaning: YAML frontmatter (tags as list or string, dates),
an H1, nested headings two to four levels deep, paragraphs, bullet and task lists, code fences,
the odd table, wikilinks between notes and nested inline tags. Words come from real English
(the bundled model's WordPiece vocabulary) drawn from a Zipf distribution, and each note leans on
a topic vocabulary so lexical and vector search have something to find. Note lengths follow a
log-normal distribution (most notes short, a long tail of long ones). The same seed and size
always give byte-identical files.
"""

from __future__ import annotations

import argparse
import math
import random
from pathlib import Path

FOLDERS = ["work/design", "work/runbooks", "work/meetings", "home-lab", "learning", "finance",
           "journal", "misc", "projects/alpha", "projects/beta"]
LANGS = ["bash", "python", "yaml", "sql", "json"]


def vocabulary() -> list[str]:
    from hybrid.embedders import minilm_path
    words = (minilm_path() / "vocab.txt").read_text(encoding="utf-8").split()
    return [w for w in words if w.isalpha() and w.isascii() and len(w) >= 3]


class Generator:
    def __init__(self, notes: int, seed: int = 7):
        self.rng = random.Random(seed)
        vocab = vocabulary()
        self.rng.shuffle(vocab)
        self.background = vocab[:4000]
        cum, total = [], 0.0
        for i in range(len(self.background)):
            total += 1.0 / (i + 1) ** 1.07
            cum.append(total)
        self.cum = cum
        self.topics = [self.rng.sample(vocab[4000:], 30) for _ in range(max(8, notes // 50))]
        self.n = notes
        self.titles = [self._title(i) for i in range(notes)]

    def _title(self, i: int) -> str:
        words = self.rng.sample(self.background[:1500], self.rng.randint(2, 5))
        return " ".join(words).capitalize() + f" {i}"

    def word(self, topic: list[str]) -> str:
        if self.rng.random() < 0.2:
            return self.rng.choice(topic)
        return self.rng.choices(self.background, cum_weights=self.cum)[0]

    def sentence(self, topic: list[str]) -> str:
        words = [self.word(topic) for _ in range(self.rng.randint(6, 22))]
        if self.rng.random() < 0.15:
            words.insert(self.rng.randrange(len(words)), f"[[{self.rng.choice(self.titles)}]]")
        if self.rng.random() < 0.08:
            words.append(f"#{self.rng.choice(topic)}/{self.rng.choice(topic)}")
        return " ".join(words).capitalize() + "."

    def block(self, topic: list[str]) -> str:
        r = self.rng.random()
        if r < 0.55:
            return " ".join(self.sentence(topic) for _ in range(self.rng.randint(1, 5)))
        if r < 0.75:
            mark = self.rng.choice(["-", "*", "- [ ]", "- [x]", "1."])
            return "\n".join(f"{mark} {self.sentence(topic)}" for _ in range(self.rng.randint(2, 7)))
        if r < 0.9:
            lang = self.rng.choice(LANGS)
            body = "\n".join(" ".join(self.word(topic) for _ in range(self.rng.randint(2, 8)))
                             for _ in range(self.rng.randint(2, 15)))
            return f"```{lang}\n{body}\n```"
        cols = self.rng.randint(2, 4)
        rows = [" | ".join(self.word(topic) for _ in range(cols)) for _ in range(self.rng.randint(2, 8))]
        return "\n".join([f"| {rows[0]} |", "|" + "---|" * cols] + [f"| {r} |" for r in rows[1:]])

    def note(self, i: int) -> tuple[str, str]:
        topic = self.topics[i % len(self.topics)]
        folder = FOLDERS[i % len(FOLDERS)]
        blocks = max(1, int(math.exp(self.rng.gauss(1.8, 0.9))))
        lines = []
        if self.rng.random() < 0.85:
            tags = self.rng.sample(topic, self.rng.randint(1, 3))
            tag_line = f"tags: [{', '.join(tags)}]" if self.rng.random() < 0.6 else f"tags: {tags[0]}"
            y, m, d = 2020 + i % 6, 1 + i % 12, 1 + i % 28
            lines += ["---", tag_line, f"created: {y}-{m:02d}-{d:02d}", "---", ""]
        lines += [f"# {self.titles[i]}", ""]
        depth = [2]
        for b in range(blocks):
            if b and self.rng.random() < 0.35:
                level = self.rng.choice([2, 2, 3, 3, 4]) if depth[-1] >= 3 else self.rng.choice([2, 3])
                depth.append(level)
                lines += ["#" * level + " " + " ".join(self.rng.sample(topic, 2)).capitalize(), ""]
            lines += [self.block(topic), ""]
        return f"{folder}/{self.titles[i]}.md", "\n".join(lines)


def generate(out: Path, notes: int, seed: int = 7) -> int:
    """Write ``notes`` notes under ``out``; returns the bytes written."""
    gen = Generator(notes, seed)
    total = 0
    for i in range(notes):
        rel, text = gen.note(i)
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        data = text.encode("utf-8")
        path.write_bytes(data)
        total += len(data)
    return total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--notes", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    size = generate(args.out, args.notes, args.seed)
    print(f"wrote {args.notes} notes ({size / 1e6:.1f} MB) to {args.out}")


if __name__ == "__main__":
    main()
