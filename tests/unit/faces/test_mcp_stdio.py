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
])
def test_a_request_holding_a_lone_surrogate_is_answered_naming_the_field(rid, args, answered_id, field):
    answer = unreadable_request(CALL % (rid, args))
    assert answer is not None and answer.id == answered_id and answer.error.code == -32600
    assert answer.error.message.startswith(f"{field} is not valid text")


@pytest.mark.parametrize("line", [
    CALL % ("1", '{"path": "fox \\ud83e\\udd8a.md"}'),  # a surrogate pair is one character: text
    '{"jsonrpc": "2.0", "method": "notifications/x", "params": {"a": "\\ud800"}}',  # no id: nothing to answer
    "not json", "[1, 2]", '{"id": 1}',
])
def test_other_lines_are_left_to_the_sdk(line):
    assert unreadable_request(line) is None
