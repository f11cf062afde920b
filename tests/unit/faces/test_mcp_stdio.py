"""Which lines MCP over stdio answers itself (hybrid.faces.mcp_stdio): requests holding a string
that is not text, which the SDK's JSON parser refuses; the real stdio server is driven in
tests/system/test_mcp.py."""
import pytest

from hybrid.faces.mcp_stdio import unreadable_request

CALL = '{"jsonrpc": "2.0", "id": %s, "method": "tools/call", "params": {"name": "get_note", "arguments": %s}}'


@pytest.mark.parametrize("rid,args,answered_id,field", [
    ("7", '{"path": "\\ud800"}', 7, "params.arguments.path"),
    ('"a"', '{"tags": ["x", "\\udfff"]}', "a", "params.arguments.tags[1]"),
    ('"\\ud800"', '{"path": "n.md"}', None, "id"),  # an id that is not text is answered as null
    ("true", '{"path": "\\ud800"}', None, "params.arguments.path"),  # not a JSON-RPC id
    ("8", '{"query": "x", "top_k": ' + "9" * 5000 + "}", 8, "params.arguments.top_k"),  # a number too long
])
def test_a_request_holding_what_the_sdk_cannot_read_is_answered_naming_the_field(rid, args, answered_id, field):
    answer = unreadable_request(CALL % (rid, args))
    assert answer is not None and answer.id == answered_id and answer.error.code == -32600, answer
    assert answer.error.message.startswith((f"{field} is not valid text", f"{field} holds a number too long"))


def test_a_surrogate_pair_is_text():
    answer = unreadable_request(CALL % ("1", '{"path": "fox \\ud83e\\udd8a.md"}'), "why")
    assert answer is not None and answer.error.code == -32700  # only a line the SDK refused gets here


@pytest.mark.parametrize("line", [
    '{"jsonrpc": "2.0", "method": "notifications/x", "params": {"a": "\\ud800"}}',  # no id: nothing to answer
    "not json", "[1, 2]", '{"id": 1}',
])
def test_a_line_with_no_id_to_answer_is_left_to_the_sdk(line):
    assert unreadable_request(line) is None


def test_another_line_the_sdk_refused_is_a_parse_error_answered_to_its_id():
    """A float of 5,000 digits is JSON to Python's parser, not to the SDK's: the request is
    answered, not dropped."""
    answer = unreadable_request(CALL % ("9", '{"query": "x", "min_score": 1' + "0" * 5000 + '.5}'),
                                "Invalid JSON: expected value")
    assert answer is not None and answer.id == 9 and answer.error.code == -32700
    assert answer.error.message == "Parse error: Invalid JSON: expected value"


def test_the_sdk_parts_serve_stdio_relies_on_are_where_it_reads_them():
    """serve_stdio runs the SDK's low-level server on wrapped streams, as the SDK's own
    run_stdio_async does; the server is reached through ``MCPServer._lowlevel_server``, for
    which the SDK has no public name. A release that moves it fails here, not in a user's
    client (pyproject.toml holds mcp to the minor release this passes on)."""
    import inspect

    from mcp.server.lowlevel import Server
    from mcp.server.mcpserver import MCPServer

    server = MCPServer(name="probe")
    lowlevel = server._lowlevel_server
    assert isinstance(lowlevel, Server)
    assert list(inspect.signature(lowlevel.run).parameters)[:3] == ["read_stream", "write_stream",
                                                                    "initialization_options"]
    assert lowlevel.create_initialization_options().server_name == "probe"
    # what serve_stdio copies: the SDK's stdio runner hands stdio_server's streams to that server
    runner = inspect.getsource(MCPServer.run_stdio_async)
    assert "stdio_server()" in runner and "self._lowlevel_server.run(" in runner
