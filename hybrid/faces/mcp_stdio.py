"""MCP over stdio: the SDK's transport (:func:`mcp.server.stdio.stdio_server`, which claims the
process's stdin and stdout) with one wrapper of hybrid's around the stream of what it read.

The SDK parses each line with pydantic's JSON parser, which refuses a string holding an
unpaired surrogate (JSON's ``"\\ud800"``) as invalid JSON; the SDK hands the server that error
instead of a message, and the server drops it (logged at debug, by the SDK's logger): the
request was never answered. Over HTTP the same request is a JSON-RPC error naming the field
(:mod:`hybrid.faces.http_guard`). :class:`AnswersUnreadable` gives stdio the same answer: it reads
such a line again with Python's JSON parser, which takes lone surrogates, and answers the
request's id with the error :func:`~hybrid.retrieval.limits.check_texts` words (an integer too
long to convert is named too; any other line Python reads as a request but the SDK could not is
answered as a parse error). A line with no id to answer is logged (one line, never its text)
and left to the SDK as before.
"""

import json
import logging
import re
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

import anyio
from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError

from hybrid.retrieval.limits import BadSearchArgs, check_texts, encodable, long_number, read_json

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer
    from mcp.shared.message import SessionMessage

log = logging.getLogger("hybrid")


class Receives(Protocol):
    """What the wrapper uses of the transport's read stream (the SDK's own protocol for it
    lives in a private module)."""

    async def receive(self) -> "SessionMessage | Exception": ...

    async def aclose(self) -> None: ...


class Sends(Protocol):
    """What the wrapper uses of the transport's write stream."""

    async def send(self, item: "SessionMessage", /) -> None: ...


async def serve_stdio(server: "MCPServer") -> None:
    """What :meth:`MCPServer.run_stdio_async` does, with the read stream wrapped.

    The one private name read: ``MCPServer._lowlevel_server``, the server that runs a
    connection's streams. The SDK has no public way to hand its stdio runner other streams nor
    to see the lines it failed to parse (its middleware sees parsed messages only); its own
    in-memory client reads the same attribute. ``tests/unit/faces/test_mcp_stdio.py`` fails if
    it moves, and pyproject.toml holds mcp to the minor release tested."""
    from mcp.server.stdio import stdio_server
    lowlevel = server._lowlevel_server
    async with stdio_server() as (read, write):
        await lowlevel.run(AnswersUnreadable(read, write), write, lowlevel.create_initialization_options())


def unreadable_request(line: str, why: str = "") -> JSONRPCError | None:
    """The JSON-RPC error answering ``line``, a line the SDK could not parse (``why``: its
    parser's words), when Python's parser reads it as a request (it has an id): a string that
    is not valid text or an integer too long to convert is named (-32600, as over HTTP), any
    other refusal is a parse error (-32700). None for a line that is no request: it has no id
    to answer. The id is echoed when it can be (one that is not text is answered as null, as
    JSON-RPC answers an id it cannot read)."""
    try:
        message = read_json(line)
    except RecursionError:  # nested past the parser's stack: the id is read from the top level
        rid = _top_level_id(line)
        if rid is None:
            return None
        return JSONRPCError(jsonrpc="2.0", id=rid, error=ErrorData(
            code=PARSE_ERROR, message="Parse error: the request is nested too deep to read"))
    except ValueError:
        return None
    if not isinstance(message, dict) or "id" not in message or "method" not in message:
        return None
    rid = message["id"]
    ok = (isinstance(rid, int) and not isinstance(rid, bool)) or (isinstance(rid, str) and encodable(rid))
    refusal = long_number(message)
    try:
        check_texts(message)
    except BadSearchArgs as exc:
        refusal = str(exc)
    error = (ErrorData(code=INVALID_REQUEST, message=refusal) if refusal
             else ErrorData(code=PARSE_ERROR, message=f"Parse error: {why or 'the line is not JSON-RPC'}"[:300]))
    return JSONRPCError(jsonrpc="2.0", id=rid if ok else None, error=error)


_ID_RE = re.compile(r'"id"\s*:\s*(-?\d{1,18}|"[^"\\]{0,200}")')


def _top_level_id(line: str) -> int | str | None:
    """The ``id`` of a request too deep to parse, read before its ``params`` (where nested
    objects may hold an ``id`` of their own); None when it is not there."""
    head = line[:line.find('"params"')] if '"params"' in line else line[:4096]
    m = _ID_RE.search(head)
    if m is None:
        return None
    value = m.group(1)
    return value[1:-1] if value.startswith('"') else int(value)


def batch_refusal(message: Any) -> list[JSONRPCError]:
    """The errors answering a JSON-RPC batch (a list of requests), which MCP (2025-06-18) does
    not take: one for each request in it that has an id, so none waits for an answer."""
    if not isinstance(message, list):
        return []
    return [JSONRPCError(jsonrpc="2.0", id=m["id"], error=ErrorData(
                code=INVALID_REQUEST, message="JSON-RPC batches are not supported: send one request a line"))
            for m in message if isinstance(m, dict) and isinstance(m.get("id"), (int, str))
            and not isinstance(m.get("id"), bool) and "method" in m]



def _first_error(exc: Exception) -> dict[str, Any]:
    """The first of pydantic's errors in ``exc`` (its ``input``: the line the SDK failed to
    parse; its ``msg``: why), or {} when ``exc`` is not pydantic's."""
    errors = getattr(exc, "errors", None)
    try:
        first = errors()[0] if callable(errors) else None
    except Exception:  # noqa: BLE001 - not pydantic's error after all: nothing to read again
        return {}
    return first if isinstance(first, dict) else {}


class AnswersUnreadable:
    """The stdio transport's read stream, minus the requests it answers itself: a request the
    SDK could not parse because it holds a string that is not text gets its JSON-RPC error on
    ``write`` (:func:`unreadable_request`); everything else passes through unchanged."""

    def __init__(self, inner: Receives, write: Sends):
        self._inner = inner
        self._write = write

    @property
    def last_context(self) -> Any:
        """The sender's context of the last item, which the SDK restores (its context streams)."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> "SessionMessage | Exception":
        from mcp.shared.message import SessionMessage
        while True:
            item = await self._inner.receive()
            if not isinstance(item, Exception):
                return item
            error = _first_error(item)
            batch = batch_refusal(error.get("input"))
            if batch:  # read, but a list: each request in it is answered, none is run
                for refusal in batch:
                    await self._write.send(SessionMessage(refusal))
                log.warning("stdio: a JSON-RPC batch of %d requests refused", len(batch))
                continue
            # the line, when its JSON is what the SDK refused (not a JSON-RPC shape: left to it)
            line = error.get("input") if error.get("type") == "json_invalid" else None
            why = str(error.get("msg") or type(item).__name__)[:200]
            answer = unreadable_request(line, why) if isinstance(line, str) else None
            if answer is None:  # the line itself stays out of the log: it may be anything
                log.warning("stdio: a line that is not a JSON-RPC request was ignored (%s)", why)
                return item
            log.warning("stdio: request %s refused: %s", json.dumps(answer.id), answer.error.message)
            await self._write.send(SessionMessage(answer))

    def __aiter__(self) -> "AnswersUnreadable":
        return self

    async def __anext__(self) -> "SessionMessage | Exception":
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> "AnswersUnreadable":
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc_val: BaseException | None,
                        exc_tb: TracebackType | None) -> bool | None:
        await self.aclose()
        return None
