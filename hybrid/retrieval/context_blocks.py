"""What the ``context`` of an answer is (:mod:`hybrid.retrieval.context` chooses it): blocks of
notes' lines, cited, as every door sends them. Light on purpose, like
:mod:`hybrid.retrieval.result`, which carries one and rebuilds it from a server's answer."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Block:
    """Lines ``start_line``..``end_line`` (1-based, inclusive) of a note, as indexed."""
    start_line: int
    end_line: int
    heading_path: list[str]
    text: str
    tokens: int
    hits: list[str] = field(default_factory=list)  # citations of the hits whose lines it holds


@dataclass
class NoteContext:
    """The context sent for one note: its blocks in line order."""
    vault: str
    path: str
    title: str
    blocks: list[Block] = field(default_factory=list)
    changed: bool = False  # the file changed on disk since it was indexed: its lines may have moved

    def citations(self) -> list[str]:
        return [f"{self.vault}:{self.path}:{b.start_line}-{b.end_line}" for b in self.blocks]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "citations": self.citations()}


@dataclass
class Context:
    """The context of a whole answer: ``notes`` in the order of their first hit."""
    budget: int
    used: int = 0
    notes: list[NoteContext] = field(default_factory=list)

    @property
    def text(self) -> str:
        """Every block, cited: what a reader (or an LLM) is given."""
        out = []
        for n in self.notes:
            for b, cite in zip(n.blocks, n.citations()):
                where = " > ".join(b.heading_path) or n.title
                out.append(f"--- {cite}{f' ({where})' if where else ''}\n{b.text}")
        return "\n".join(out)

    def to_dict(self) -> dict[str, Any]:
        return {"budget": self.budget, "used": self.used, "notes": [n.to_dict() for n in self.notes]}

    @classmethod
    def from_dict(cls, data: Any) -> Context | None:
        """From :meth:`to_dict` (a server's answer); None for anything else."""
        if not isinstance(data, dict) or not isinstance(data.get("notes"), list):
            return None
        try:
            notes = [NoteContext(n["vault"], n["path"], n.get("title", ""),
                                 [Block(**{k: b[k] for k in ("start_line", "end_line", "heading_path", "text",
                                                             "tokens")}, hits=list(b.get("hits", [])))
                                  for b in n.get("blocks", [])], bool(n.get("changed")))
                     for n in data["notes"]]
            return cls(int(data.get("budget", 0)), int(data.get("used", 0)), notes)
        except (KeyError, TypeError, ValueError, AttributeError):
            return None
