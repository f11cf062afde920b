"""`hybrid query` as a reader sees it (hybrid/faces/cli/render.py): hits grouped by note, --passages,
-l, colour and NO_COLOR, OSC 8 links, code fences and tables kept as lines, --explain, the
spelling correction announced (in-process, through /api/search, in the MCP text), and the JSON
shapes. In-process CliRunner with the hash embedder; one slow test through a real server."""
import json
import re
import subprocess
import sys
from http.server import BaseHTTPRequestHandler

import pytest
from click.testing import CliRunner
from helpers import JsonHandler, free_port, hash_home, health_ok, hybrid_cmd, local_server, server_env, write

import hybrid
from hybrid.faces.cli.main import main
from hybrid.faces.cli.render import Look, QueryView, block_excerpt, structured_lines
from hybrid.faces.cli.term import clean
from hybrid.faces.http import api_search_call, remote_result, server_file
from hybrid.faces.mcp import render_hits
from hybrid.retrieval.hits import Hit
from hybrid.retrieval.query import parse_query
from hybrid.retrieval.request import SearchRequest
from hybrid.retrieval.result import SearchResult

KAFKA = """# Kafka consumers

The consumer group rebalances when a member leaves. Tune `max.poll.interval.ms` for slow consumers.

## Settings

| setting | value |
|---|---|
| max.poll.interval.ms | 300000 |
| session.timeout.ms | 45000 |

## Restart

```bash
kafka-consumer-groups --bootstrap-server localhost:9092 \\
  --group orders --reset-offsets --to-earliest --execute
```

Consumers restart from the earliest offset after this.
"""
GARDEN = "# Garden\n\nTomatoes need six hours of sun. Water them twice a week; consumers of compost are worms.\n"
ANSI = "\x1b"
OSC8 = "\x1b]8;;"


@pytest.fixture
def kafka_home(hybrid_home, tmp_path):
    """A home whose config uses the hash embedder (the CLI reads the file), with two notes:
    work/kafka.md (three passages) and garden.md (one), indexed."""
    write(hybrid_home, "config.toml", '[settings]\nembedder = "hash:64"\n')
    write(tmp_path / "notes", "work/kafka.md", KAFKA)
    write(tmp_path / "notes", "garden.md", GARDEN)
    h = hybrid.open(hybrid_home)
    h.add_vault(tmp_path / "notes", "v")
    h.index()
    yield h
    h.close()


def run(*args, color=False, **env):
    """`hybrid query ARGS`; ``color``: as on a terminal, colour forced where click decides it
    (the context's ``color``, which hybrid's own styles follow too)."""
    main.context_settings["color"] = color
    try:
        result = CliRunner().invoke(main, ["query", *args], color=color,
                                    env={"COLUMNS": "80", "NO_COLOR": None, "TERM": "xterm", **env})
    finally:
        del main.context_settings["color"]
    assert result.exit_code == 0, result.output
    return result


def blocks(out: str) -> list[str]:
    """The first line of each numbered block."""
    return [line for line in out.splitlines() if re.match(r"\d+\. ", line)]


# --- grouping, --passages, -n, -l ----------------------------------------------------------------
def test_passages_of_one_note_are_one_block_and_n_counts_notes(kafka_home):
    flat = run("consumers", "--passages", "-n", "2").stdout
    assert [b.split(":")[1] for b in blocks(flat)] == ["work/kafka.md", "work/kafka.md"]  # two passages, one note
    grouped = run("consumers", "-n", "2").stdout
    heads = blocks(grouped)
    assert [h.split()[1].rsplit(":", 1)[0] for h in heads] == ["v:work/kafka.md", "v:garden.md"]
    # kafka.md's other passages are indented sub-lines with their line ranges, under its block
    kafka_block = grouped.split("\n2. ")[0]
    subs = [line for line in kafka_block.splitlines() if line.lstrip().startswith("↳")]
    assert len(subs) == 2 and all(re.match(r"^   ↳ \d+-\d+ ", s) for s in subs)
    assert "↳" not in grouped.split("\n2. ")[1]
    one = run("consumers", "-n", "1").stdout
    assert len(blocks(one)) == 1 and "garden.md" not in one and one.count("↳") == 2


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_n_notes_even_when_one_note_fills_the_first_fetch(kafka_home, tmp_path):
    """A note with more matching passages than the first fetch holds (n * 4) must not crowd out
    the other notes: -n 2 still shows two notes."""
    big = "\n\n".join(f"## Part {i}\n\n" + f"consumers of part {i} lag behind. " * 40 for i in range(30))
    write(tmp_path / "notes", "work/huge.md", "# Huge\n\n" + big)
    kafka_home.index()
    assert len(kafka_home.search("consumers", top_k=8, mode="lexical")) == 8  # the first fetch
    heads = blocks(run("consumers", "-n", "2", "--mode", "lexical").stdout)
    assert len(heads) == 2 and len({h.split()[1].rsplit(":", 1)[0] for h in heads}) == 2
    assert len(run("consumers", "-l", "-n", "3", "--mode", "lexical").stdout.splitlines()) == 3


def test_files_with_matches_prints_bare_references(kafka_home):
    assert run("consumers", "-l").stdout == "v:work/kafka.md\nv:garden.md\n"
    assert run("consumers", "-l", "-n", "1").stdout == "v:work/kafka.md\n"
    bad = CliRunner().invoke(main, ["query", "consumers", "-l", "--json"])
    assert bad.exit_code == 2 and "use one of them" in bad.output


def test_no_hits_line_is_kept(kafka_home):
    r = run("zzzqqq", "--mode", "lexical")
    assert r.stdout == "" and "no hits" in r.stderr


# --- JSON ----------------------------------------------------------------------------------------
def test_json_is_notes_with_their_passages_and_passages_on_request(kafka_home):
    flat = json.loads(run("consumers", "--json", "--passages", "-n", "2").stdout)
    assert [x["path"] for x in flat] == ["work/kafka.md", "work/kafka.md"]  # -n counts passages
    assert set(flat[0]) == set(Hit.from_dict(flat[0]).to_dict())  # every Hit field plus citation
    assert "\n" not in flat[1]["snippet"]  # the JSON snippet stays flat, fence or not
    grouped = json.loads(run("consumers", "--json", "-n", "2").stdout)
    # -n counts notes, however many passages the first one has (it was 1 note for `--group -n 2`)
    assert [(n["vault"], n["path"]) for n in grouped] == [("v", "work/kafka.md"), ("v", "garden.md")]
    assert set(grouped[0]) == {"vault", "path", "title", "uri", "citation", "best_score", "confidence", "passages"}
    assert grouped[0]["title"] == "Kafka consumers" and grouped[0]["uri"].startswith("obsidian://")
    assert [p["citation"] for p in grouped[0]["passages"]][:2] == [x["citation"] for x in flat]
    assert grouped[0]["best_score"] == flat[0]["score"] and grouped[0]["citation"] == flat[0]["citation"]
    assert json.loads(run("consumers", "--json", "--group", "-n", "2").stdout) == grouped  # old scripts


# --- colour, NO_COLOR, links -------------------------------------------------------------------
def test_colour_and_links_only_when_styled(kafka_home):
    styled = run("consumers", "-n", "1", color=True).stdout
    assert "\x1b[1m" in styled  # bold citation, highlighted words
    assert OSC8 + "obsidian://open?vault=notes&file=work%2Fkafka\x1b\\v:work/kafka.md:1-3" in styled
    assert re.search(r"\x1b\[33m\x1b\[1mconsumers\x1b\[0m", styled)  # a query word highlighted
    assert ANSI not in run("consumers", "-n", "1", color=True, NO_COLOR="1").stdout  # no-color.org
    assert ANSI not in run("consumers", "-n", "1").stdout  # not a terminal
    dumb = run("consumers", "-n", "1", color=True, TERM="dumb").stdout
    assert "\x1b[1m" in dumb and OSC8 not in dumb
    # an empty NO_COLOR does not count (no-color.org: "present and not an empty string")
    assert OSC8 in run("consumers", "-n", "1", color=True, NO_COLOR="").stdout


def test_look_detect_follows_no_color_and_term(monkeypatch):
    import click
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.delenv("NO_COLOR", raising=False)
    with click.Context(main, color=True).scope():  # colour forced, as on a terminal
        assert (Look.detect().styled, Look.detect().links) == (True, True)
        monkeypatch.setenv("TERM", "dumb")
        assert (Look.detect().styled, Look.detect().links) == (True, False)
        monkeypatch.setenv("NO_COLOR", "1")
        assert (Look.detect().styled, Look.detect().links) == (False, False)
    monkeypatch.delenv("NO_COLOR")
    with click.Context(main, color=False).scope():
        assert Look.detect().styled is False


def test_links_fall_back_to_the_file(tmp_path):
    lines: list[str] = []
    hit = Hit("v", "dir/a b.md", "A", [], 1, 3, "text", 0.5, text="text")
    view = QueryView(look=Look(styled=True, links=True), roots={"v": tmp_path},
                     echo=lambda text="", err=False: lines.append(text))
    view.show(SearchResult([hit], query="text"), SearchRequest("text"))
    shown = clean(lines[0])  # as the command's output stream writes it (hybrid.faces.cli.term)
    assert OSC8 + (tmp_path / "dir" / "a b.md").resolve().as_uri() + "\x1b\\v:dir/a b.md:1-3" in shown


# --- code fences and tables ----------------------------------------------------------------------
def test_code_fence_and_table_keep_their_line_breaks(kafka_home):
    out = run("kafka-consumer-groups earliest", "--passages", "-n", "1").stdout
    assert "   ```bash\n   kafka-consumer-groups --bootstrap-server localhost:9092 \\\n" \
           "     --group orders --reset-offsets --to-earliest --execute\n   ```\n" in out
    table = run("session.timeout.ms", "--passages", "-n", "1", "--mode", "lexical").stdout
    assert "   | setting | value |\n   |---|---|\n   | max.poll.interval.ms | 300000 |\n" in table
    full = run("kafka-consumer-groups", "--full", "-n", "1").stdout
    assert "\n     --group orders --reset-offsets" in full  # --full: verbatim lines as well


def test_block_excerpt_picks_the_query_window_and_caps_it():
    text = "\n".join([f"prose line {i} about nothing" for i in range(30)]
                     + ["```", "docker compose up -d", "docker compose logs traefik", "```"]
                     + [f"more prose {i}" for i in range(10)])
    lines = block_excerpt(text, ["traefik", "docker"], cap=8)
    assert lines is not None and lines[0] == "…" and lines[-1] == "…" and len(lines) <= 10
    assert "docker compose logs traefik" in lines and "```" in lines
    assert block_excerpt("just prose\nmore prose", ["prose"]) is None  # no fence: flat snippet
    assert block_excerpt(text, ["nothing"], cap=3) is None  # the window has no fence
    assert structured_lines(["a", "| x |", "|---|", "b"]) == [False, True, True, False]
    assert structured_lines(["a | b |"]) == [False]


def test_long_prose_wraps_with_a_hanging_indent(kafka_home):
    out = run("consumers", "--passages", "-n", "1", COLUMNS="50").stdout
    body = out.splitlines()[2:]
    assert len(body) >= 3 and all(line.startswith("   ") and len(line) <= 50 for line in body)


# --- --explain and corrections -------------------------------------------------------------------
def test_explain_shows_the_parsed_query_and_per_arm_ranks(kafka_home):
    out = run('kafka "consumer group" -tomatoes max.poll.interval.ms folder:work', "--explain",
              "--exclude", "archive", "--passages").stdout
    head = out.split("\n\n")[0].splitlines()
    assert head[1] == "words     kafka max.poll.interval.ms"
    assert head[2] == 'phrases   "consumer group" (required)'
    assert head[3] == "excluded  tomatoes"
    assert head[4].startswith("literals  max.poll.interval.ms (matched as written")
    assert head[5] == "filters   folder work · exclude archive" and head[6] == "mode      hybrid"
    # the literal max.poll.interval.ms lifts the hit that names it: exact-first says so
    assert re.search(r"^   bm25 #1 \([\d.]+\) · vector #\d+ \([\d.]+\) · pinned \((literal|verbatim)\) · fused [\d.]+"
                     r" · dated \d{4}-\d\d-\d\d \(file mtime\)( · confidence (strong|fair|weak) [\d.]+)?$", out, re.M)
    assert "bm25#1" not in out  # the short arms are replaced by the long line
    grouped = run("consumers", "--explain", "-n", "1").stdout.splitlines()
    sub = next(i for i, line in enumerate(grouped) if line.startswith("   ↳ "))
    assert re.match(r"^     bm25 #\d+ \([\d.]+\) · vector #\d+ \([\d.]+\) · fused ", grouped[sub + 1])


def test_misspelled_query_is_announced(kafka_home):
    r = run("consumrs")
    assert "showing results for: consumers" in r.stderr and "consumers" in r.stdout
    assert "showing results for" not in run("consumers").stderr
    explained = run("consumrs", "--explain").stdout
    assert "corrected consumrs → consumers" in explained
    result = kafka_home.search("consumrs", top_k=3)
    assert isinstance(result, list) and isinstance(result, SearchResult)
    assert result.corrections == {"consumrs": "consumers"} and result.parsed.terms == ["consumers"]
    assert result.query == "consumrs" and result.corrected_query == "consumers"
    assert "consumers" in result.needles


def test_corrected_query_leaves_phrases_exclusions_and_filters_alone():
    r = SearchResult(query='Tailscal "exact phrse" -phrse folder:phrse', corrections={"tailscal": "tailscale",
                                                                                     "phrse": "phrase"})
    assert r.corrected_query == 'tailscale "exact phrse" -phrse folder:phrse'
    assert SearchResult(query="as is").corrected_query == "as is"


def test_a_suggestion_says_maybe_you_meant_and_claims_no_rewrite():
    """A typo repaired in doubt: the query ran as typed, so no "showing results for" line."""
    lines: list[tuple[str, bool]] = []
    result = SearchResult([], query="sourdough bred", suggestions={"bred": "bread"})
    request = SearchRequest("sourdough bred")
    QueryView(echo=lambda text="", err=False: lines.append((text, err)), explain=True).show(result, request)
    assert ("maybe you meant: sourdough bread", True) in lines
    assert not any("showing results for" in text for text, _ in lines)
    assert any(text.startswith("maybe     bred → bread (searched as typed") for text, _ in lines)
    assert result.corrected_query == "sourdough bred" and result.response_extras()["suggestions"] == {"bred": "bread"}
    rebuilt = SearchResult.from_response({"hits": [], **result.response_extras()}, result.query,
                                         parse_query(result.query))
    assert rebuilt.suggestions == {"bred": "bread"} and rebuilt.parsed.terms == ["sourdough", "bred"]


def test_a_notice_is_said_on_stderr_before_the_answer():
    """Why the answer is what it is (a query in a script no model reads): one line on stderr."""
    lines: list[tuple[str, bool]] = []
    notice = "no model here reads Georgian script: searched by keywords only"
    result = SearchResult([], query="ყველი", notices=[notice])
    QueryView(echo=lambda text="", err=False: lines.append((text, err))).show(result, SearchRequest("ყველი"))
    assert lines[0] == (notice, True) and ("no hits", True) in lines


def test_mcp_text_says_showing_results_for():
    hit = Hit("v", "a.md", "A", [], 1, 2, "snippet", 0.5).to_dict(text=False)
    assert render_hits("consumrs", {"hits": [hit]}, "consumers").startswith("showing results for 'consumers'")
    assert "showing" not in render_hits("consumers", {"hits": [hit]}, "consumers")
    assert render_hits("consumrs", {"notes": []}, "consumers").splitlines()[1].startswith("No notes matched")
    brief = {"citation": "v:a.md:9-9", "heading_path": [], "snippet": "s", "confidence": 0.2}  # MCP's brief form
    assert "also v:a.md:9-9 — " in render_hits("q", {"notes": [{"passages": [hit, brief]}]})
    maybe = render_hits("rasberry", {"hits": [hit]}, "", "raspberry")
    assert maybe.startswith("maybe you meant 'raspberry' (searched as typed)") and "showing" not in maybe


# --- confidence ----------------------------------------------------------------------------------
def _hit(path, start, confidence=None, score=0.5):
    return Hit("v", path, "T", ["T", "Sec"], start, start + 2, "some snippet words", score,
               lexical_rank=1, confidence=confidence, text="some snippet words")


def test_confidence_word_shown_only_when_known():
    lines: list[str] = []
    view = QueryView(top_k=5, echo=lambda text="", err=False: lines.append(text))
    view.show(SearchResult([_hit("a.md", 1, 0.83), _hit("a.md", 9, 0.35), _hit("b.md", 1)], query="words",
                           grouped=True), SearchRequest("words"))
    assert lines[0] == "1. v:a.md:1-3  strong 0.83"
    assert any(line.startswith("   ↳ 9-11") and line.endswith("weak 0.35  some snippet words") for line in lines)
    assert lines[lines.index(next(x for x in lines if x.startswith("2. ")))] == "2. v:b.md:1-3"
    same: list[str] = []  # a note's passages share its confidence: said once, on the note's line
    QueryView(echo=lambda text="", err=False: same.append(text)).show(
        SearchResult([_hit("a.md", 1, 0.5), _hit("a.md", 9, 0.5)], query="words", grouped=True),
        SearchRequest("words"))
    assert same[0].endswith("fair 0.50") and "fair" not in next(x for x in same if "↳" in x)


# --- through a server --------------------------------------------------------------------------
def test_api_search_reports_corrections_and_old_answers_still_parse(kafka_home):
    status, data = api_search_call(kafka_home, b'{"query": "consumrs", "top_k": 2}', None)
    assert status == 200 and data["corrections"] == {"consumrs": "consumers"} and len(data["notes"]) == 2
    request = SearchRequest("consumrs")
    rebuilt = SearchResult.from_response(json.loads(json.dumps(data)), request.query, request.parsed)
    assert rebuilt.corrections == {"consumrs": "consumers"} and rebuilt.parsed.terms == ["consumers"]
    passages = [p for n in data["notes"] for p in n["passages"]]
    assert rebuilt.grouped and [h.citation for h in rebuilt] == [p["citation"] for p in passages]
    old = SearchResult.from_response({"hits": passages[:2]}, "consumrs", parse_query("consumrs"))
    assert old.corrections == {} and old.parsed.terms == ["consumrs"] and len(old) == 2 and not old.grouped


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_cli_through_a_server_announces_the_correction(kafka_home, monkeypatch):
    """A stand-in for `hybrid serve --http` answering /api/search with the real handler: the
    CLI (no --local) takes its answer, corrections included."""
    calls = []

    class Api(JsonHandler):
        def do_POST(self):  # noqa: N802 - http.server's naming
            body = self.rfile.read(int(self.headers["Content-Length"]))
            calls.append(json.loads(body))
            status, data = api_search_call(kafka_home, body, None)
            self._send(status, data)

    handler: type[BaseHTTPRequestHandler] = Api
    with local_server(handler) as server:
        server_file(kafka_home).write_text(json.dumps({"url": server.url, "pid": 0, "owner_key": "k"}))
        r = run("consumrs", "-n", "1")
        # one note asked for (the server answers by note); `passages` left out at its default, so
        # a server from before the field answers as ever
        assert calls and calls[0]["query"] == "consumrs" and calls[0]["top_k"] == 1 and "passages" not in calls[0]
        assert "showing results for: consumers" in r.stderr and len(blocks(r.stdout)) == 1
        assert "↳" in r.stdout  # the note's other passages came with it
        result = remote_result(kafka_home, SearchRequest("consumrs"))
        assert result is not None and result.corrections == {"consumrs": "consumers"}
        assert result.needles and isinstance(result[0], Hit)


@pytest.fixture
def home(hybrid_home, vault):
    """The small test vault indexed with the hash embedder, for the `serve` fixture's servers."""
    return hash_home(hybrid_home, vault)


@pytest.mark.slow
def test_real_server_carries_corrections(serve, home):
    """(`tailscal` would be no typo: the stemmed fields read `tailscale` as it.)"""
    serve()
    h = hybrid.open(home)
    try:
        result = remote_result(h, SearchRequest("tailscael", top_k=2))
        assert result is not None and result.corrections == {"tailscael": "tailscale"}
        assert result[0].path == "home/network.md" and result.parsed.terms == ["tailscale"]
    finally:
        h.close()
    r = hybrid_cmd(home, "query", "tailscael", "-n", "1")
    assert r.returncode == 0 and "showing results for: tailscale" in r.stderr
    assert r.stdout.startswith("1. vault:home/network.md:")


ENGINE = ("hybrid.app.api", "hybrid.retrieval.pipeline", "numpy", "tantivy", "faiss", "onnxruntime", "sqlite3")


@pytest.mark.slow
def test_cli_through_a_real_server_imports_none_of_the_engine(serve, home):
    """`hybrid query` with a server up is a small client: its answer is the server's, and it
    imports no index, model or store (issue #48)."""
    serve()
    code = ("import sys, runpy\nsys.argv = ['hybrid', 'query', 'tailscale', '-n', '1']\n"
            "try:\n    runpy.run_module('hybrid.cli', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            f"print('LOADED', sorted(m for m in {ENGINE!r} if m in sys.modules), file=sys.stderr)\n")
    r = subprocess.run([sys.executable, "-c", code], env=server_env(home), capture_output=True, text=True,
                       timeout=120)
    assert "LOADED []" in r.stderr, r.stderr
    assert r.stdout.startswith("1. vault:home/network.md:")


@pytest.mark.slow
def test_the_server_says_it_is_ready_once_its_vaults_are_warm(home):
    port = free_port()
    p = subprocess.Popen([sys.executable, "-m", "hybrid", "-v", "serve", "--http", "--port", str(port)],
                         env=server_env(home), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        for line in p.stderr:  # type: ignore[union-attr]
            lines.append(line)
            if "search page at" in line:
                break
        warm = [i for i, ln in enumerate(lines) if "vault vault warm (models loaded, indexes open)" in ln]
        assert warm and warm[0] < len(lines) - 1, "".join(lines)
        assert health_ok(port) < 30  # listening when it says so
    finally:
        p.terminate()
        p.wait(timeout=30)


def test_a_note_lists_its_further_passages_under_it():
    lines: list[str] = []
    hits = [_hit("a.md", 1 + 10 * i) for i in range(4)]
    QueryView(echo=lambda text="", err=False: lines.append(text)).show(
        SearchResult(hits, query="words", grouped=True), SearchRequest("words"))
    subs = [line for line in lines if line.startswith("   ↳ ")]
    assert [s.split()[1] for s in subs] == ["11-13", "21-23", "31-33"]



def test_styles_kept_exactly_where_click_echo_keeps_them(monkeypatch):
    """Look.detect reads click's public parts (the context's colour, the stream's isatty) as
    click.echo decides: on every kind of stdout, in and out of a context, the two agree."""
    import io

    import click

    class Tty(io.StringIO):
        def isatty(self):
            return True

    class Broken(io.StringIO):
        def isatty(self):
            raise ValueError("closed")

    monkeypatch.delenv("NO_COLOR", raising=False)
    for color in (None, True, False):
        for kind in (Tty, io.StringIO, Broken):
            with click.Context(main, color=color).scope():
                echoed = kind()
                click.echo(click.style("x", bold=True), file=echoed)
                monkeypatch.setattr("sys.stdout", kind())
                assert Look.detect().styled is ("\x1b[" in echoed.getvalue()), (color, kind)
    for kind in (Tty, io.StringIO, Broken):  # no context at all: the stream decides
        echoed = kind()
        click.echo(click.style("x", bold=True), file=echoed)
        monkeypatch.setattr("sys.stdout", kind())
        assert Look.detect().styled is ("\x1b[" in echoed.getvalue()), kind
