"""One sanitiser for everything hybrid prints (issue #47): a note's title and text, a file name,
an agent's words reach the terminal with no control character or escape sequence of their own
(clear screen, window title, OSC 8 links, C1 CSI, a lone carriage return, bidi overrides), piped
or not, in `query`, `get` and `related`; hybrid's own styles and links still work; `--json`
means the same after it."""
import json
import re

import pytest
from click.testing import CliRunner
from helpers import hybrid_cmd, write

import hybrid
from hybrid.faces.cli.main import main
from hybrid.faces.cli.term import clean, escape, own

CLEAR = "\x1b[2J\x1b[H"
TITLE = "\x1b]0;pwned\x07"
LINK = "\x1b]8;;https://evil.example/\x1b\\click here\x1b]8;;\x1b\\"
CSI_C1 = "\x9b2J"
BIDI = "\u202egnp.exe"
HOSTILE = f"# Router {TITLE}setup{CLEAR}\n\nThe router{CSI_C1} password lives {LINK} in the hall{BIDI}.\rFAKE\n"
# hybrid's own: SGR styles, and OSC 8 links to the note's file or obsidian:// URI
OWN_RE = re.compile(r"\x1b\[[0-9;]*m|\x1b\]8;;(?:(?:obsidian|file)://[!-~]*)?\x1b\\")
BAD = ("\x1b", "\x9b", "\x07", "\u202e", "\x00")


def hostile_left(text: str) -> list[str]:
    rest = OWN_RE.sub("", text)
    found = [c for c in BAD if c in rest]
    if re.search(r"\r(?!\n)", rest):
        found.append("lone CR")
    return found


@pytest.mark.parametrize("text, shown", [
    ("plain text\n\twith a tab", "plain text\n\twith a tab"),
    ("clear\x1b[2J", "clear\\u001b[2J"),
    ("bell\x07 del\x7f c1\x9b", "bell\\u0007 del\\u007f c1\\u009b"),
    ("crlf\r\nline", "crlf\nline"),
    ("over\rwrite", "over\\u000dwrite"),
    ("rtl \u202eevil\u202c", "rtl \\u202eevil\\u202c"),
    ("isolate \u2066x\u2069", "isolate \\u2066x\\u2069"),
    ("smuggled \U000e0041\U000e0042", "smuggled \\udb40\\udc41\\udb40\\udc42"),  # tag characters
    ("family 👨\u200d👩\u200d👧, שָׁלוֹם\u200f, nbsp\u00a0x", "family 👨\u200d👩\u200d👧, שָׁלוֹם\u200f, nbsp\u00a0x"),
    ("line\u2028sep", "line\\u2028sep"),
])
def test_escape_shows_controls_and_keeps_text(text, shown):
    assert clean(text) == shown


def test_only_hybrids_own_marked_sequences_pass():
    styled = own("\x1b[1m") + "bold" + own("\x1b[0m")
    assert clean(styled) == "\x1b[1mbold\x1b[0m"
    forged = "\x00" + "0" * 16 + "1b5b324a" + "\x00"  # a marker without this process's nonce
    assert "\x1b" not in clean(forged) and "\\u0000" in clean(forged)
    assert escape("a\tb\nc", one_line=True, strict=True) == "a\\tb\\nc"
    assert escape("x\u200dy", strict=True) == "x\\u200dy"  # an agent's text: even joiners shown


@pytest.mark.parametrize("value", ["\x1b]0;t\x07", "c1\x85\x9b", "bidi\u202e", "tag\U000e0041", "lone\udc80",
                                   "emoji 👍 and \u200d", "cr\r\n", "nul\x00"])
def test_json_means_the_same_after_it(value):
    data = {"title": value, "list": [value, 1]}
    out = clean(json.dumps(data, ensure_ascii=False, indent=2))
    assert hostile_left(out) == [] and json.loads(out) == data


@pytest.fixture
def hostile_home(hybrid_home, tmp_path):
    write(hybrid_home, "config.toml", '[settings]\nembedder = "hash:64"\n')
    write(tmp_path / "notes", "router.md", HOSTILE)
    write(tmp_path / "notes", f"evil{TITLE}name.md", "# Plain title\n\nthe router is in the hall too\n")
    write(tmp_path / "notes", "hall.md", "# Hall\n\nthe router and the hall lamp, [[router]]\n")
    h = hybrid.open(hybrid_home)
    h.add_vault(tmp_path / "notes", "v")
    h.index()
    yield h
    h.close()


@pytest.mark.parametrize("color", [False, True])
@pytest.mark.parametrize("args", [["query", "router hall"], ["query", "router hall", "--passages", "--full"],
                                  ["query", "router", "--explain"], ["query", "router", "-l"],
                                  ["get", "router"], ["get", "router", "--links"], ["related", "hall"],
                                  ["query", "router", "--context", "300"]])
def test_no_hostile_sequence_reaches_the_terminal(hostile_home, args, color, monkeypatch):
    monkeypatch.setitem(main.context_settings, "color", color)  # True: as on a terminal
    r = CliRunner().invoke(main, args, color=color, env={"COLUMNS": "100", "NO_COLOR": None, "TERM": "xterm"})
    assert r.exit_code == 0, r.output
    assert r.stdout.strip()
    assert hostile_left(r.stdout) == [] and hostile_left(r.stderr) == []
    if args in (["get", "router"], ["query", "router hall"]):
        assert "\\u001b]0;pwned\\u0007" in r.stdout  # shown, not run


@pytest.mark.slow  # a subprocess: the streams of a real process, piped
def test_piped_output_of_a_real_process_is_clean(hostile_home):
    home = hostile_home.config.path.parent
    for args in (["query", "router hall", "--local"], ["get", "router"], ["related", "hall"],
                 ["query", "router", "--json", "--local"]):
        r = hybrid_cmd(home, *args)
        assert r.returncode == 0, r.stderr
        assert hostile_left(r.stdout) == [] and hostile_left(r.stderr) == [], args
    hits = json.loads(hybrid_cmd(home, "query", "router", "--json", "--local").stdout)
    assert any(TITLE in n["title"] for n in hits)  # --json keeps the value, escaped the JSON way

