"""The search page's tag review panel (owner session only): ``GET /ui/api/tags`` (what waits),
``POST /ui/api/tags/suggest`` ``{vault?, note}``, ``POST /ui/api/tags/accept`` and
``/ui/api/tags/reject`` ``{vault, note, tags}``. They are the CLI's ``hybrid tags`` through
:class:`hybrid.app.tags.TagDesk`: an accept writes the note's front block (refused when the file
changed since the suggestion) and starts a re-index of that vault."""

from __future__ import annotations

from typing import Any

from hybrid.retrieval.limits import BadSearchArgs  # the page's routes answer it with a 400


def _args(body: dict, tags: bool) -> tuple[str | None, str, list[str]]:
    vault, note, given = body.get("vault"), body.get("note"), body.get("tags", [])
    if vault is not None and not isinstance(vault, str):
        raise BadSearchArgs("vault must be a name")
    if not isinstance(note, str) or not note:
        raise BadSearchArgs("note (a path) is required")
    if tags and not (isinstance(given, list) and given and all(isinstance(t, str) for t in given)):
        raise BadSearchArgs("tags must be a non-empty list of tags")
    return vault or None, note, list(given) if tags else []


def add_tag_routes(ui: Any) -> None:
    """Register the panel's routes on the page's routes ``ui`` (:class:`~hybrid.faces.ui.routes._Routes`)."""
    import anyio
    route, answer, h = ui.route, ui.answer, ui.h

    def queue() -> dict[str, Any]:
        return {"notes": [{"vault": v, **e.to_dict()} for v, e in h.tags.pending()]}

    @route("/ui/api/tags", ["GET"], auth=True)
    async def waiting(request):
        return answer(await anyio.to_thread.run_sync(queue))

    @route("/ui/api/tags/suggest", ["POST"], auth=True)
    async def suggest(request):
        vault, note, _ = _args(await ui.json_body(request), False)
        found = await anyio.to_thread.run_sync(lambda: h.tags.suggest(note, vault))
        return answer({"found": [f.to_dict() for f in found], **queue()})

    @route("/ui/api/tags/accept", ["POST"], auth=True)
    async def accept(request):
        vault, note, tags = _args(await ui.json_body(request), True)
        done = await anyio.to_thread.run_sync(lambda: h.tags.accept(note, tags, vault))
        ui.jobs.start(done.vault)  # the note changed: re-index its vault in the background
        return answer({"accepted": done.to_dict(), **queue()})

    @route("/ui/api/tags/reject", ["POST"], auth=True)
    async def reject(request):
        vault, note, tags = _args(await ui.json_body(request), True)
        gone = await anyio.to_thread.run_sync(lambda: h.tags.reject(note, tags, vault))
        return answer({"rejected": gone, **queue()})
