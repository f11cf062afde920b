"""SearchRequest: built by every entry point, checked and normalised once."""
import time

import pytest

from hybrid.retrieval.limits import MAX_TOP_K, MAX_TOP_K_MCP, BadSearchArgs
from hybrid.retrieval.request import Filters, SearchRequest


def test_normalises_once():
    r = SearchRequest("tomatoes", folders=["/home/", " work "], tags=["#Garden/", "Food"],
                      exclude_folders=["archive/"], vaults=["a", "b", "a"], since=1000)
    assert r.folders == ("home", "work") and r.exclude_folders == ("archive",)
    assert r.tags == ("garden", "food")
    assert r.vaults == ("a", "b") and r.since == 1000.0
    assert SearchRequest("x", vaults=[]).vaults is None


def test_since_text_becomes_epoch_seconds():
    r = SearchRequest("x", since="30d")
    assert abs(r.since - (time.time() - 30 * 86400)) < 60
    assert SearchRequest("x", since="2024-01-31").since == pytest.approx(
        time.mktime(time.strptime("2024-01-31", "%Y-%m-%d")))


def test_filters_merge_inline_ones():
    r = SearchRequest("soil folder:/home/ tag:#Garden since:2024-01-01", folders=["work"],
                      tags=["food"], since=5.0, exclude_folders=["archive"])
    f = r.filters
    assert f.folders == ("work", "home") and f.tags == ("food", "garden")
    assert f.since == pytest.approx(time.mktime(time.strptime("2024-01-01", "%Y-%m-%d")))  # inline wins
    assert f.exclude_folders == ("archive",) and f.narrows
    assert not Filters(exclude_folders=("x",)).narrows
    assert r.parsed.terms == ["soil"]


@pytest.mark.parametrize("kwargs, message", [
    ({"top_k": 0}, "top_k must be between 1"),
    ({"top_k": MAX_TOP_K + 1}, "top_k must be between 1"),
    ({"top_k": True}, "top_k must be an integer"),
    ({"mode": "fast"}, "mode must be one of"),
    ({"folders": "work"}, "folders must be a list of strings"),
    ({"tags": [3]}, "tags must be a list of strings"),
    ({"since": float("nan")}, "since must be a date"),
    ({"rerank": "yes"}, "rerank must be true or false"),
], ids=lambda v: str(v)[:25])
def test_bad_arguments_are_one_line_errors(kwargs, message):
    with pytest.raises(BadSearchArgs, match=message):
        SearchRequest("tailscale", **kwargs)


def test_caller_cap_on_top_k():
    SearchRequest("x", top_k=MAX_TOP_K_MCP, max_top_k=MAX_TOP_K_MCP)
    with pytest.raises(BadSearchArgs, match=f"between 1 and {MAX_TOP_K_MCP}"):
        SearchRequest("x", top_k=MAX_TOP_K_MCP + 1, max_top_k=MAX_TOP_K_MCP)


def test_json_round_trip():
    r = SearchRequest("a b", top_k=3, folders=["x"], tags=["t"], since=12.5, rerank=True)
    assert SearchRequest.from_json(__import__("json").dumps(r.to_json())) == r
    assert "vaults" not in r.to_json()


@pytest.mark.parametrize("body, message", [
    (b"[1]", "body must be a JSON object"),
    (b"{", "body must be a JSON object"),
    (b"[" * 100_000, "body is nested too deep"),
    (b'{"q": ' * 100_000 + b"1" + b"}" * 100_000, "body is nested too deep"),  # an object, but too deep
    (b'{"query": "x", "top_k": ' + b"9" * 5000 + b"}", r"^top_k holds a number too long \(5,000 digits"),
    (b'{"query": "x", "tags": [-' + b"1" * 4301 + b"]}", r"^tags\[0\] holds a number too long \(4,301 digits"),
    (b'{"query": "\xff"}', "body is not UTF-8"),
    (b'{"top_k": 3}', "query is required"),
    (b'{"query": "x", "colour": 1}', "unknown fields"),
    (b'{"query": "x", "top_k": "8"}', "top_k must be an integer"),
], ids=["array", "broken", "deep", "deep-object", "long-number", "long-number-in-list", "not-utf8", "no-query",
        "unknown", "string-top-k"])
def test_from_json_refuses(body, message):
    with pytest.raises(BadSearchArgs, match=message):
        SearchRequest.from_json(body)


def test_which_filters_stand_without_words_is_one_rule():
    """A folder, tag, date, source or property filter alone lists the notes passing it; each door
    asks the same rule (request.stands_alone) and refuses the rest with one line naming those
    filters as that door spells them."""
    from hybrid.core.errors import QuerySyntaxError
    from hybrid.retrieval.request import empty_query, stands_alone
    for alone in ({"props": ["rating>=5"]}, {"folders": ["work"]}, {"tags": ["x"]}, {"since": "30d"},
                  {"sources": ["pdf"]}):
        assert stands_alone(alone), alone
        assert SearchRequest("", **alone).parsed.listing
    for not_alone in ({}, {"props": []}, {"exclude_folders": ["archive"]}, {"top_k": 3}):
        assert not stands_alone(not_alone), not_alone
        with pytest.raises(QuerySyntaxError, match="props"):
            _ = SearchRequest("  ", **not_alone).parsed
    assert "--prop" in empty_query("cli") and "--tag" in empty_query("cli")
    assert "props" in empty_query("agent") and "folder" in empty_query("agent")


def test_every_option_is_checked_from_its_declaration():
    """check_options reads each option's type and range from OPTIONS (no second list of
    parameters): every bounded option refuses a value past its range and a value of the wrong
    type, naming itself; every list option refuses a bare string."""
    from hybrid.retrieval.limits import BadSearchArgs
    from hybrid.retrieval.request import OPTIONS, SearchRequest, check_options
    for o in OPTIONS:
        wrong = {"bool": "yes", "int": "3", "float": "0.5", "choice": 3, "text": ["x"],
                 "texts": "work", "choices": "note"}[o.type]
        with pytest.raises(BadSearchArgs, match=rf"^{o.name} "):
            check_options({o.name: wrong})
        if o.high is not None:
            with pytest.raises(BadSearchArgs, match=rf"^{o.name} must be"):
                check_options({o.name: o.high + 1})
            check_options({o.name: o.high})  # the bound itself is allowed
    with pytest.raises(BadSearchArgs, match=r"top_k must be between 1 and 50 \(got 51\)"):
        SearchRequest("x", top_k=51, max_top_k=50)
