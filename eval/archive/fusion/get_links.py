"""What listing a note's links costs ``get`` (issue #30): warm in-process ``h.get`` of the most
linked-to note of an indexed vault and of 30 notes linking to it, with and without ``links``,
as the owner and as an agent. HOME must hold the vault indexed under NAME::

    PYTHONPATH=eval/bench .venv/bin/python eval/archive/fusion/get_links.py --home /tmp/graph-exp/home --name oh
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", required=True, type=Path)
    ap.add_argument("--name", required=True, help="the vault's name in HOME")
    args = ap.parse_args()
    import hybrid
    h = hybrid.open(args.home)
    g = h.link_graph(h.config.vault(args.name))
    hub = max(g.back, key=lambda f: len(g.back[f]))
    linking = sorted(g.notes[f].path for f in g.back[hub])[:30]
    print(f"most linked-to note: {g.notes[hub].path} ({len(g.back[hub])} backlinks)")
    for agent in (False, True):
        for links in (False, True):
            h.get(g.notes[hub].path, links=links, agent=agent)  # warm: graph, hidden set
            each = [_ms(h.get, p, links=links, agent=agent) for _ in range(3) for p in linking]
            at_hub = [_ms(h.get, g.notes[hub].path, links=links, agent=agent) for _ in range(5)]
            print(f"{'agent' if agent else 'owner'}, links={'on' if links else 'off'}: median "
                  f"{statistics.median(each):.1f} ms a note ({len(each)} gets), "
                  f"{statistics.median(at_hub):.1f} ms the most linked-to")
    h.close()


def _ms(fn, *args, **kw) -> float:
    t = time.perf_counter()
    fn(*args, **kw)
    return (time.perf_counter() - t) * 1000


if __name__ == "__main__":
    main()
