import time

import pytest

from hybrid.core.dates import parse_date
from hybrid.core.errors import QuerySyntaxError
from hybrid.retrieval.query import parse_query


def test_parts():
    q = parse_query('tailscale "subnet router" -wifi -"exit node" --advertise-routes '
                    'tag:#Home-Lab folder:home/ since:2025-01-01')
    assert q.terms == ["tailscale", "--advertise-routes"]
    assert q.phrases == ["subnet router"]
    assert q.excludes == ["wifi", "exit node"]
    assert q.tags == ["home-lab"] and q.folders == ["home"]
    assert q.since == parse_date("2025-01-01")
    assert q.text == "subnet router tailscale --advertise-routes"


def test_cjk_parts_split_at_the_ideographic_space_and_take_the_operators():
    q = parse_query('保管庫\u3000同期 -同步 "文件同步" tag:日記')
    assert (q.terms, q.excludes, q.phrases, q.tags) == (["保管庫", "同期"], ["同步"], ["文件同步"], ["日記"])


@pytest.mark.parametrize("bad, msg", [("", "empty"), ("   ", "empty"), ('foo "bar', "unbalanced"),
                                      ("-foo", "only exclusions"), ("-foo tag:x", "only exclusions"),
                                      ("x since:yesterday", "bad date")])
def test_bad_queries(bad, msg):
    with pytest.raises(QuerySyntaxError, match=msg):
        parse_query(bad)


def test_relative_dates():
    assert abs(parse_date("30d") - (time.time() - 30 * 86400)) < 5
