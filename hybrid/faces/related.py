"""Related notes in the doors other than the CLI, what they share: the MCP tool ``related``
(:mod:`hybrid.faces.mcp`), ``POST /api/related`` (:mod:`hybrid.faces.http`) and ``POST
/ui/api/related`` for the search page's panel.

The MCP tool and ``/api/related`` (unless the caller is the owner, as for ``/api/search``) serve
the agent view and record each call in the audit log before answering; the page's route serves
the owner. The answer is :meth:`hybrid.retrieval.related.RelatedResult.to_json` in every door.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hybrid.retrieval.limits import BadSearchArgs

if TYPE_CHECKING:
    from hybrid.app.api import Hybrid
    from hybrid.retrieval.related import RelatedResult

MAX_TOP_K_AGENT = 20  # related notes per agent call
NOTE_HELP = ("The note to start from: a citation 'vault:path:START-END' from search, a vault-relative "
             "path, a note title or alias, or [[Note]].")


def render(result: RelatedResult) -> str:
    """Compact text of a related-notes answer, one entry per note with its evidence."""
    head = f"Notes related to {result.vault}:{result.path}"
    if not result.meaning:
        head += " (its text is not embedded: links and tags only)"
    if not result.notes:
        return head + ": none found."
    lines = [head + ":"]
    for i, n in enumerate(result.notes, 1):
        lines.append(f"{i}. {n.citation} — {n.title or n.path} [{n.score:.2f}]")
        lines.append("   why: " + "; ".join(n.why))
        if n.snippet:
            lines.append("   " + n.snippet)
    return "\n".join(lines)


def body_args(body: dict[str, Any], max_top_k: int) -> tuple[str, str | None, int]:
    """(note, vault, top_k) of a JSON request body; BadSearchArgs names what is wrong."""
    note, vault, top_k = body.get("note"), body.get("vault"), body.get("top_k", 10)
    if not isinstance(note, str) or not note.strip():
        raise BadSearchArgs("note is required: a path, a title, [[a wikilink]] or a citation")
    if vault is not None and not isinstance(vault, str):
        raise BadSearchArgs("vault must be a vault's name")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= max_top_k:
        raise BadSearchArgs(f"top_k must be a whole number from 1 to {max_top_k} (got {top_k!r})")
    return note, vault, top_k


def page_related(h: Hybrid, body: dict) -> dict:
    """The owner's related notes for the search page's panel."""
    from hybrid.app.refs import Ref
    note, vault, top_k = body_args(body, 50)
    return h.related(Ref(path=note), vault, top_k=top_k).to_json()  # a hit's own path, not parsed
