""""Apply this setting": when ``hybrid eval`` compared settings (chunking, fusion k, weights),
is the best one clearly better than the one configured now, and what makes it the setting?

The runs compared are those of the mode searches use by default (hybrid; else the mode of the
best run). The current run is the one whose settings are the configured ones. A run is *clearly better*
when the paired bootstrap interval of its difference from the current run
(:mod:`hybrid.eval.uncertainty`) lies above zero at a level corrected for how many alternatives
were tried (Bonferroni: 95 % becomes 1 − 0.05/m), so a grid of twenty settings does not crown a
lucky one. Of the clearly better runs, the one changing fewest settings is advised (a change the
figures do not ask for is not); when none is, the advice is to keep the current setting.

Settings live in the ``[settings]`` table of config.toml and apply to every vault (there is no
per-vault setting for these, and no command that edits the file): the advice prints the exact
lines to put there, and ``hybrid index`` when the chunking changed (every note is re-chunked;
texts that stay the same keep their cached vectors).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hybrid.eval.uncertainty import LEVEL, Comparison, compare

if TYPE_CHECKING:
    from hybrid.core.settings import Settings
    from hybrid.eval.run import ConfigResult, EvalResult

CHUNKING = ("chunk_tokens", "chunk_overlap", "context_header")
FUSION = ("rrf_k", "weight_lexical", "weight_vector")
FUSING_MODES = ("hybrid", "rerank")


@dataclass
class Advice:
    mode: str
    metric: str
    current: str | None              # the run with the configured settings (None: not in the grid)
    best: str                        # the run advised (or the best, when none is clearly better)
    changes: dict[str, Any] = field(default_factory=dict)   # setting -> the best run's value
    comparison: Comparison | None = None                    # best against current
    alternatives: int = 0

    @property
    def clearly_better(self) -> bool:
        return bool(self.changes) and self.comparison is not None and self.comparison.separated

    def config_lines(self) -> list[str]:
        """The TOML lines of the changed settings, as they go in the ``[settings]`` table."""
        import tomlkit
        return tomlkit.dumps(self.changes).splitlines()

    def reindex(self) -> bool:
        return any(k in CHUNKING for k in self.changes)

    def lines(self, config_path: Path) -> list[str]:
        """What the terminal and report.md say: the lines to apply, or why to keep the setting."""
        if self.current is None:
            return [f"Keep the current setting: it is not among the {self.mode} runs, so none of "
                    f"them was compared with it (add its values to the grid)."]
        c = self.comparison
        if not self.changes or c is None:
            return [f"Keep the current setting: it is the best {self.mode} run by {self.metric} "
                    f"({self.current})."]
        level = f" (the CI corrected for the {self.alternatives} alternatives tried)" \
            if self.alternatives > 1 else ""
        if not c.separated:
            return [f"Keep the current setting: the best {self.mode} run ({self.best}) is not clearly "
                    f"better than the current one ({self.current}) by {self.metric}: {c.sentence()}{level}."]
        out = [f"Apply this setting: {self.best} is clearly better than the current {self.current} by "
               f"{self.metric}: {c.sentence()}{level}.",
               f"To make it the setting (of every vault), put these lines in the [settings] table of "
               f"{config_path}:", ""]
        out += [f"    {line}" for line in self.config_lines()]
        if self.reindex():
            out += ["", "then re-index (the chunking changed; unchanged chunk texts keep their vectors):",
                    "", "    hybrid index"]
        return out

    def to_dict(self) -> dict:
        return {"mode": self.mode, "metric": self.metric, "current": self.current, "best": self.best,
                "clearly_better": self.clearly_better, "settings": self.changes if self.clearly_better else {},
                "config_lines": self.config_lines() if self.clearly_better else [],
                "reindex": self.clearly_better and self.reindex(), "alternatives": self.alternatives,
                "comparison": self.comparison.to_dict() if self.comparison else None}


def _fields(mode: str) -> tuple[str, ...]:
    return CHUNKING + (FUSION if mode in FUSING_MODES else ())


def is_current(r: ConfigResult, settings: Settings) -> bool:
    """Does run ``r`` use the configured settings (those its mode depends on)?"""
    return all(getattr(r.config, f) == getattr(settings, f) for f in _fields(r.config.mode))


def advise(result: EvalResult, settings: Settings) -> Advice | None:
    """The advice on ``result``'s settings comparison; None when no setting was varied (one
    run per mode)."""
    best_run = result.best(result.primary)
    if best_run is None:
        return None
    modes = {r.config.mode for r in result.results}
    mode = "hybrid" if "hybrid" in modes else best_run.config.mode
    runs = [r for r in result.results if r.config.mode == mode]
    if len(runs) < 2:
        return None
    metric = result.primary
    best = result.best(metric, runs)
    if best is None:
        return None
    current = next((r for r in runs if is_current(r, settings)), None)
    advice = Advice(mode, metric, current.config.name if current else None, best.config.name,
                    alternatives=len(runs) - 1)
    if current is None or current is best:
        return advice
    level = 1 - (1 - LEVEL) / advice.alternatives
    cur, cur_name = result.values(current, metric), current.config.name

    def changes(r: ConfigResult) -> dict[str, Any]:
        return {f: getattr(r.config, f) for f in _fields(mode) if getattr(r.config, f) != getattr(settings, f)}

    def against_current(r: ConfigResult) -> Comparison:
        return compare(metric, r.config.name, cur_name, result.values(r, metric), cur, level)

    # Of the runs clearly better than the current one, the one that changes fewest settings (the
    # best of those): a change the figures do not ask for is not advised.
    better = [(r, c) for r in runs if r is not current and (c := against_current(r)).separated]
    if better:
        pick, comp = min(better, key=lambda rc: (len(changes(rc[0])), -rc[1].best_value))
    else:
        pick, comp = best, against_current(best)
    advice.best, advice.changes, advice.comparison = pick.config.name, changes(pick), comp
    return advice
