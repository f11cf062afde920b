"""A copy of obsidian-help in which about 30 % of the sections are copies (issue #30, part 4).

    PYTHONPATH=eval/bench .venv/bin/python eval/archive/notes/dup_vault.py --out /tmp/help-dups [--seed 30] \\
        [--share 0.3]

Deterministic (same seed, same bytes). Starts from every note of the vault as it is, then adds
the repetition real vaults have, until copies make up ``share`` of all sections:

- pages saved twice: 4 % of the notes again as ``NAME 1.md`` beside them (Obsidian's name for
  a duplicated file);
- daily notes from a template: 60 notes ``Daily/2024-MM-DD.md`` whose three template sections
  are the same in every one, plus a journal section of their own;
- copied sections: a section (heading and body, 15+ words) of one note appended to another;
- edited copies: a quarter of the copied sections have some of their words replaced (one word,
  5 %, 15 % or 30 % of them): near-identical, not identical. They are counted apart.

A section is a heading line and the lines up to the next heading (outside code fences). The
manifest (``OUT.manifest.json``, beside the vault, not in it) lists every copy made, for the
threshold study and the report (eval/archive/notes/dups.py).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
from pathlib import Path

from common import OBSIDIAN_HELP

HEADING = re.compile(r"^#{1,6}\s")
FENCE = re.compile(r"^\s*(```|~~~)")
TEMPLATE = [
    "## Morning checklist\n\n- [ ] Review the inbox and flag what needs a reply today\n- [ ] Check the "
    "calendar for meetings and prepare notes for each\n- [ ] Pick the three most important tasks\n",
    "## Habits\n\n- [ ] Exercise for thirty minutes\n- [ ] Read twenty pages of a book\n- [ ] Drink two "
    "litres of water\n- [ ] No screens after ten in the evening\n",
    "## Evening review\n\nWhat went well today? What could have gone better? What is the first thing "
    "to do tomorrow morning?\n",
]
EDITS = (None, 0.05, 0.15, 0.30)  # None: one word


def sections(text: str) -> list[str]:
    """The note's sections (heading line and body), the text before the first heading left out."""
    out: list[list[str]] = []
    fence = False
    for line in text.splitlines():
        if FENCE.match(line):
            fence = not fence
        if not fence and HEADING.match(line):
            out.append([line])
        elif out:
            out[-1].append(line)
    return ["\n".join(s).strip() + "\n" for s in out]


def words(section: str) -> int:
    return len(section.split()) - len(section.splitlines()[0].split())


def edit(section: str, rate: float | None, rng: random.Random) -> str:
    """``section`` with one body word (``rate`` None) or that share of its body words replaced."""
    head, _, body = section.partition("\n")
    toks = body.split(" ")
    spots = [i for i, t in enumerate(toks) if t.isalpha()]
    n = 1 if rate is None else max(1, round(rate * len(spots)))
    for i in rng.sample(spots, min(n, len(spots))):
        toks[i] = rng.choice(["quickly", "usually", "carefully", "rarely", "plainly", "often", "gently"])
    return head + "\n" + " ".join(toks)


def build(src: Path, out: Path, seed: int, share: float) -> dict:
    rng = random.Random(seed)
    if out.exists():
        shutil.rmtree(out)
    notes = sorted(p.relative_to(src).as_posix() for p in src.rglob("*.md"))
    texts = {p: (src / p).read_text(encoding="utf-8") for p in notes}
    for p, t in texts.items():
        (out / p).parent.mkdir(parents=True, exist_ok=True)
        (out / p).write_text(t, encoding="utf-8")
    original = sum(len(sections(t)) for t in texts.values())
    manifest: dict = {"seed": seed, "share": share, "original_notes": len(notes),
                      "original_sections": original, "saved_twice": [], "daily": [], "copied": [], "edited": []}
    copies = 0
    for p in rng.sample(notes, round(0.04 * len(notes))):  # pages saved twice
        twin = p[:-3] + " 1.md"
        (out / twin).write_text(texts[p], encoding="utf-8")
        copies += len(sections(texts[p]))
        manifest["saved_twice"].append([p, twin])
    titles = [Path(p).stem for p in notes]
    for d in range(60):  # daily notes from a template
        day = f"2024-{1 + d // 28:02d}-{1 + d % 28:02d}"
        journal = (f"## Journal\n\nSpent the day on {rng.choice(titles)}; later read about "
                   f"{rng.choice(titles)} and wrote down questions about {rng.choice(titles)}.\n")
        path = f"Daily/{day}.md"
        (out / path).parent.mkdir(parents=True, exist_ok=True)
        (out / path).write_text(f"# {day}\n\n" + "\n".join(TEMPLATE) + "\n" + journal, encoding="utf-8")
        copies += len(TEMPLATE) if d else 0
        manifest["daily"].append(path)
    pool = [(p, s) for p in notes for s in sections(texts[p]) if not s.startswith("# ") and words(s) >= 15]
    # sections in all: the originals, the twins', the daily notes' (three template ones and a
    # journal each), and every section appended
    total = original + sum(len(sections(texts[a])) for a, _ in manifest["saved_twice"]) + 60 * (len(TEMPLATE) + 1)
    appended: dict[str, list[str]] = {}
    while copies < share * total:
        p, s = rng.choice(pool)
        dst = rng.choice(notes)
        if dst == p:
            continue
        if rng.random() < 0.25:  # an edited copy: near-identical, counted apart
            rate = EDITS[len(manifest["edited"]) % len(EDITS)]
            changed = edit(s, rate, rng)
            appended.setdefault(dst, []).append(changed)
            manifest["edited"].append({"from": p, "to": dst, "rate": rate, "section": s, "edited": changed})
        else:
            appended.setdefault(dst, []).append(s)
            manifest["copied"].append({"from": p, "to": dst, "section": s.splitlines()[0]})
            copies += 1
        total += 1
    for dst, extra in appended.items():
        with open(out / dst, "a", encoding="utf-8") as fh:
            fh.write("\n\n" + "\n".join(extra))
    manifest["sections"] = total
    manifest["copies"] = copies
    manifest["copy_share"] = round(copies / total, 3)
    return manifest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--src", type=Path, default=OBSIDIAN_HELP if OBSIDIAN_HELP.is_dir()
                    else Path("/work/shared/vaults/obsidian-help"))
    ap.add_argument("--seed", type=int, default=30)
    ap.add_argument("--share", type=float, default=0.3)
    args = ap.parse_args()
    manifest = build(args.src, args.out, args.seed, args.share)
    args.out.with_suffix(".manifest.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    print(json.dumps({k: v for k, v in manifest.items() if not isinstance(v, list)}))


if __name__ == "__main__":
    main()
