"""`hybrid query` takes text that starts with a dash: `-wifi router` (an exclusion) and
`--advertise-routes` (a flag searched for verbatim) are query text, not "No such option"; real
options keep working, and `--` makes everything after it text. In-process, hash embedder."""
import json

import pytest
from click.testing import CliRunner
from helpers import hash_home, write

from hybrid.faces.cli.main import main


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    root = tmp_path_factory.mktemp("dash")
    v = root / "notes"
    write(v, "wifi.md", "# Wifi\n\nThe router serves wifi to the flat.\n")
    write(v, "wired.md", "# Wired\n\nThe router in the rack is wired to the switch.\n")
    write(v, "tailscale.md", "# Tailscale\n\nRun `tailscale up --advertise-routes=10.0.0.0/24` on the pi.\n")
    write(v, "modes.md", "# Modes\n\nPass `--mode lexical` for exact strings.\n")
    write(v, "modem review.md", "---\nrating: 5\n---\n# Modem review\n\nThe best modem we had.\n")
    return hash_home(root / "home", v)


@pytest.fixture
def home(indexed, monkeypatch):
    monkeypatch.setenv("HYBRID_HOME", str(indexed))
    return indexed


def query(*args):
    out = CliRunner().invoke(main, ["query", "--json", "--local", "--mode", "lexical", *args])
    return out, (json.loads(out.stdout) if out.exit_code == 0 else None)


@pytest.mark.parametrize("args", [["-wifi router"], ["-wifi", "router"], ["router", "-wifi"],
                                  ["router", "-n", "5", "-wifi"], ["-wifi", "router", "-n5"]])
def test_a_leading_exclusion_is_query_text(home, args):
    out, hits = query(*args)
    assert out.exit_code == 0, out.output
    assert {h["path"] for h in hits} == {"wired.md"}  # router, not wifi


def test_a_flag_is_searched_for_as_written(home):
    out, hits = query("--advertise-routes")
    assert out.exit_code == 0, out.output
    assert hits[0]["path"] == "tailscale.md"
    assert "No such option" not in out.stderr and "note:" not in out.stderr


def test_after_double_dash_even_an_option_is_text(home):
    out, hits = query("-n", "1", "--", "--mode")
    assert out.exit_code == 0, out.output
    assert [h["path"] for h in hits] == ["modes.md"]


def test_real_options_still_parse_and_fail_as_options(home):
    out, hits = query("router", "-n1")
    assert out.exit_code == 0 and len(hits) == 1
    bad = CliRunner().invoke(main, ["query", "router", "-n", "many"])
    assert bad.exit_code == 2 and "Invalid value for '-n'" in bad.stderr


def test_a_near_miss_of_an_option_is_searched_and_pointed_out(home):
    out, _ = query("router", "--top-kk")
    assert out.exit_code == 0, out.output
    assert "--top-kk is not an option" in out.stderr and "did you mean --top-k?" in out.stderr


def test_help_documents_the_double_dash():
    out = CliRunner().invoke(main, ["query", "--help"])
    assert out.exit_code == 0 and "-- --explain" in out.stdout and "-wifi router" in out.stdout


def test_a_property_filter_alone_lists_the_notes_passing_it(home):
    """`--prop` stands without words as --tag and --folder do (it was a usage error, exit 2, while
    MCP, the HTTP API and `rating>=5` typed as a word listed the notes); no words and no filter at
    all is still a usage error naming every filter that may stand alone."""
    out, hits = query("--prop", "rating>=5")
    assert out.exit_code == 0, out.output
    assert [h["path"] for h in hits] == ["modem review.md"]
    bare = CliRunner().invoke(main, ["query", "--local"])
    assert bare.exit_code == 2 and "--prop" in bare.stderr and "--tag" in bare.stderr


def test_a_min_score_above_every_hit_says_they_matched(home):
    """Hits that matched but fell under --min-score are not "no hits": stderr says how many and the best."""
    out, hits = query("router", "--min-score", "1")
    assert out.exit_code == 0, out.output
    assert hits == [] and "2 notes matched, all under min_score 1 (the best: " in out.stderr
    assert "no hits" not in out.stderr
