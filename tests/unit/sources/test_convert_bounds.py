"""One file must never stop indexing: PDFs and web pages are converted in a separate worker
process under a memory bound (``convert_max_memory_mb``, RLIMIT_AS) and a deadline
(``convert_timeout``). A decompression bomb, a converter that hangs or crashes, and a page
nested too deep to parse each cost one warning naming the file; the rest is indexed, a version
indexed before keeps its chunks, and no worker outlives the run. Real PDFs (fpdf2, and a bomb
built byte by byte with zlib), real worker processes, the hash embedder."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from helpers import REPO, hybrid_cmd, local_server, write, write_pdf

import hybrid
from hybrid.core.errors import ConfigError, PathRefused
from hybrid.sources import sandbox, worker
from hybrid.sources.convert import to_note
from hybrid.sources.sandbox import ConvertError, Limits

# RLIMIT_AS is enforced on Linux only, and the checks for left-over workers read /proc
pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Linux: RLIMIT_AS and /proc")
BENCH = REPO / "eval" / "bench"
WORKER = os.path.abspath(worker.__file__)
MEMORY = 512  # MB: the bombs below need ~12 bytes per inflated byte, gigabytes in all


def bomb_pdf(path: Path, inflated: int) -> Path:
    """The bench's bomb (eval/bench/convert_bounds.py): one FlateDecode content stream that
    inflates to ``inflated`` bytes of text operators."""
    sys.path.insert(0, str(BENCH))
    try:
        import convert_bounds
    finally:
        sys.path.remove(str(BENCH))
    convert_bounds.bomb_pdf(path, inflated)
    return path


@pytest.fixture(scope="module")
def bomb(tmp_path_factory) -> bytes:
    """A real-size bomb: ~1.4 MB on disk, 400 MB of operators inflated (PDFium: ~4.6 GB)."""
    return bomb_pdf(tmp_path_factory.mktemp("bomb") / "bomb.pdf", 400_000_000).read_bytes()


@pytest.fixture(autouse=True)
def fresh_workers():
    """Each test starts its own workers (a fault hook is read when one starts) and leaves none."""
    sandbox.shutdown()
    yield
    sandbox.shutdown()


def my_converters() -> set[int]:
    """Converter processes whose parent is this process (Linux: from /proc)."""
    found = set()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            cmd = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == os.getpid() and WORKER.encode() in cmd:
            found.add(int(d.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def notes_vault(root: Path) -> Path:
    write(root, "notes/river.md", "# River\n\nThe zebra walks to the river at dawn.\n")
    write(root, "notes/garden.md", "# Garden\n\nTomatoes need six hours of sun.\n")
    write_pdf(root / "papers/z-manual.pdf", ["Calibrate the periscope lens every spring."],
              title="Periscope manual")
    return root


@pytest.mark.slow  # starts converter processes
def test_bomb_pdf_is_skipped_with_one_warning_and_the_rest_indexed(tmp_path, bomb, monkeypatch):
    from hybrid.sources import pdf
    converted: list[str] = []  # the documents sent to the worker, in order

    def counting(op, name, *args, **kwargs):
        converted.append(name)
        return sandbox.convert(op, name, *args, **kwargs)
    monkeypatch.setattr(pdf, "convert", counting)
    root = notes_vault(tmp_path / "vault")
    write_pdf(root / "papers/bomb.pdf", ["Quarterly pelican census, the version before the bomb."])
    h = hybrid.open(tmp_path / "home", embedder="hash:64", convert_max_memory_mb=MEMORY)
    h.add_vault(root, "v")
    first = h.index()[0]
    assert first.added == 4 and first.skipped == 0, first.warnings
    (root / "papers/bomb.pdf").write_bytes(bomb)  # the same file, now a bomb
    converted.clear()
    report = h.index()[0]
    assert report.warnings == [f"papers/bomb.pdf: converting it needed more than {MEMORY} MB of "
                               "memory (convert_max_memory_mb); skipped"]
    assert report.skipped == 1 and converted == ["papers/bomb.pdf"]
    # the rest of the vault is indexed and searchable, the PDF after the bomb included (a new worker)
    (root / "notes/later.md").write_text("# Later\n\nA heron fishes in the shallows.\n", encoding="utf-8")
    write_pdf(root / "papers/z-manual.pdf", ["Calibrate the periscope lens every autumn."])
    converted.clear()
    again = h.index()[0]
    assert again.added == 1 and again.updated == 1 and again.skipped == 1
    # the bomb is not converted again, nor warned about, while neither it nor the bounds change
    assert again.warnings == [] and converted == ["papers/z-manual.pdf"]
    os.utime(root / "papers/bomb.pdf")  # touched: hashed, found the same, still not converted
    converted.clear()
    touched = h.index()[0]
    assert (touched.skipped, touched.warnings, converted) == (1, [], [])
    for query, path in [("zebra river", "notes/river.md"), ("heron shallows", "notes/later.md"),
                        ("periscope autumn", "papers/z-manual.pdf")]:
        assert h.search(query, mode="lexical")[0].path == path
    # the version indexed before the bomb keeps its chunks
    assert h.search("pelican census", mode="lexical")[0].path == "papers/bomb.pdf"
    # and reading it is a one-line refusal naming the bound (the handle's own)
    with pytest.raises(PathRefused, match=rf"needed more than {MEMORY} MB of memory \(convert_max_memory_mb\)"):
        h.get("papers/bomb.pdf")
    h.close()
    assert not my_converters()


@pytest.mark.slow  # starts converter processes
def test_hung_converter_is_killed_at_the_deadline_and_the_next_document_converts(tmp_path, monkeypatch):
    monkeypatch.setenv("HYBRID_FAULT", "convert-hang:a-hangs.pdf")
    root = tmp_path / "vault"
    write_pdf(root / "a-hangs.pdf", ["This one never finishes."])
    write_pdf(root / "b-fine.pdf", ["The periscope lens is calibrated in spring."])
    write(root, "c.html", "<html><body><article><p>" + "Herons fish in the shallows at dusk. " * 5
          + "</p></article></body></html>")
    h = hybrid.open(tmp_path / "home", embedder="hash:64", convert_timeout=2)
    h.add_vault(root, "v")
    start = time.monotonic()
    report = h.index()[0]
    assert time.monotonic() - start < 20
    assert report.warnings == ["a-hangs.pdf: converting it took longer than 2 s (convert_timeout); skipped"]
    assert report.added == 2 and report.skipped == 1
    assert h.search("periscope", mode="lexical")[0].path == "b-fine.pdf"
    assert h.search("herons dusk", mode="lexical")[0].path == "c.html"
    assert not my_converters()


@pytest.mark.slow  # starts converter processes
def test_worker_restarts_after_a_crash(tmp_path, monkeypatch):
    monkeypatch.setenv("HYBRID_FAULT", "convert-crash:a.pdf")
    for name in ("a.pdf", "b.pdf", "c.pdf"):
        write_pdf(tmp_path / name, [f"Page of {name}"])
    limits = Limits(1024, 30)
    with pytest.raises(ConvertError, match=r"^a\.pdf: the converter crashed on it \(signal SIGABRT\); skipped$"):
        to_note("a.pdf", None, str(tmp_path / "a.pdf"), limits)
    first = sandbox.running_pids()
    assert first == []  # the crashed one is gone (reaped), none started yet
    assert "Page of b.pdf" in to_note("b.pdf", None, str(tmp_path / "b.pdf"), limits).lines
    (pid,) = sandbox.running_pids()
    assert "Page of c.pdf" in to_note("c.pdf", None, str(tmp_path / "c.pdf"), limits).lines
    assert sandbox.running_pids() == [pid]  # kept across documents
    os.kill(pid, signal.SIGKILL)  # killed from outside while idle: the next document starts another
    while alive(pid) and pid in my_converters():
        time.sleep(0.05)
    assert "Page of b.pdf" in to_note("b.pdf", None, str(tmp_path / "b.pdf"), limits).lines
    assert sandbox.running_pids() not in ([], [pid])


@pytest.mark.slow  # starts converter processes
def test_conversion_happens_in_the_worker_and_none_is_left_after_index_get_and_close(tmp_path):
    root = notes_vault(tmp_path / "vault")
    write(root, "saved/page.html", "<html><head><title>Herons</title></head><body><article><p>"
          + "Herons fish in the shallows at dusk. " * 5 + "</p></article></body></html>")
    h = hybrid.open(tmp_path / "home", embedder="hash:64")
    h.add_vault(root, "v")
    report = h.index()[0]
    assert report.added == 4 and not report.warnings
    assert not my_converters() and sandbox.running_pids() == []  # the run's worker ended with it
    assert "Calibrate the periscope lens every spring." in h.get("papers/z-manual.pdf").text
    assert len(my_converters()) == 1  # `get` started one, kept for the next read
    h.close()
    assert not my_converters()
    # the parent never loaded PDFium or trafilatura: a fresh process indexes, then tells
    code = textwrap.dedent(f"""
        import sys, hybrid
        h = hybrid.open({str(tmp_path / 'home2')!r}, embedder="hash:64")
        h.add_vault({str(root)!r}, "v")
        r = h.index()[0]
        assert r.added == 4 and not r.warnings, r.warnings
        print(sorted(m for m in ("pypdfium2", "trafilatura", "lxml") if m in sys.modules))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.slow  # starts converter processes
def test_no_orphan_worker_after_exit_or_a_killed_parent(tmp_path):
    write_pdf(tmp_path / "a.pdf", ["Some text."])
    code = textwrap.dedent(f"""
        import sys, time
        from hybrid.sources import sandbox
        from hybrid.sources.convert import to_note
        to_note("a.pdf", None, {str(tmp_path / 'a.pdf')!r})
        print(sandbox.running_pids()[0], flush=True)
        if sys.argv[1] == "hang":
            time.sleep(600)
    """)
    # a normal exit: atexit stops the worker
    out = subprocess.run([sys.executable, "-c", code, "exit"], capture_output=True, text=True, timeout=60)
    pid = int(out.stdout)
    deadline = time.monotonic() + 5
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid)
    # a parent killed outright (SIGKILL: no atexit): the idle worker reads end of input and exits
    proc = subprocess.Popen([sys.executable, "-c", code, "hang"], stdout=subprocess.PIPE, text=True)
    pid = int(proc.stdout.readline())
    assert alive(pid)
    proc.kill()
    proc.wait()
    proc.stdout.close()
    deadline = time.monotonic() + 10
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid)


@pytest.mark.slow  # starts converter processes
def test_pdf_text_cap_is_kept_by_the_worker(tmp_path, monkeypatch):
    """The worker sends at most the cap (the page that passes it cut short), so a PDF of
    enormous text costs the parent no more than the cap; the note keeps whole pages only."""
    from hybrid.sources import pdf
    pages = ["alpha " * 100, "bravo " * 100, "charlie " * 100]
    path = str(write_pdf(tmp_path / "long.pdf", pages))
    full = pdf.pdf_text(path, "long.pdf")
    cap = len(full.texts[0][1]) + 50
    got = pdf.pdf_text(path, "long.pdf", cap)
    assert (got.pages, got.cut_from, len(got.texts)) == (3, 2, 2)
    assert sum(len(t) for _, t in got.texts) <= cap and got.texts[1][1].startswith("bravo")
    monkeypatch.setattr(pdf, "MAX_TEXT_CHARS", cap)
    note = pdf.pdf_note("long.pdf", path)
    assert "bravo" not in " ".join(note.lines) and note.properties == {"pages": 3}
    assert note.warnings == [f"long.pdf: text beyond {cap:,} characters left out (from page 2 on)"]


@pytest.mark.slow  # starts converter processes
def test_html_nested_too_deep_or_without_text_warns(tmp_path):
    root = tmp_path / "vault"
    depth = 100_000
    write(root, "deep.html", "<html><head><title>Deep</title></head><body>" + "<div>" * depth
          + "the text at the bottom" + "</div>" * depth + "</body></html>")
    write(root, "partly.html", "<html><body><article><p>" + "Herons fish in the shallows. " * 5
          + "</p></article>" + "<div>" * 1000 + "lost below" + "</div>" * 1000 + "</body></html>")
    write(root, "empty.html", "<html><head><title>Nothing</title></head><body><div></div></body></html>")
    write(root, "ok.md", "# Ok\n\nA plain note.\n")
    h = hybrid.open(tmp_path / "home", embedder="hash:64")
    h.add_vault(root, "v")
    report = h.index()[0]
    assert sorted(report.warnings) == [
        "deep.html: nested too deep to parse (over 256 levels of elements); no text extracted; skipped",
        "empty.html: no text extracted; skipped",
        "partly.html: nested too deep to parse (over 256 levels of elements); the text inside "
        "them is left out",
    ]
    assert report.added == 2 and report.skipped == 2
    assert h.search("herons shallows", mode="lexical")[0].path == "partly.html"
    with pytest.raises(PathRefused, match="nested too deep to parse"):
        h.get("deep.html")
    h.close()


@pytest.mark.slow  # starts converter processes
def test_cli_get_of_a_bomb_is_a_one_line_refusal(tmp_path, bomb):
    root = tmp_path / "vault"
    (root).mkdir()
    (root / "bomb.pdf").write_bytes(bomb)
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(f'[settings]\nembedder = "hash:64"\nconvert_max_memory_mb = {MEMORY}\n'
                                      f'[vaults.v]\npath = "{root}"\n', encoding="utf-8")
    out = hybrid_cmd(home, "get", "bomb.pdf", timeout=120)
    assert out.returncode != 0 and out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr
    assert lines[0] == (f"error: 'bomb.pdf' is not a readable note in vault 'v': converting it needed "
                        f"more than {MEMORY} MB of memory (convert_max_memory_mb)")


class _Site(BaseHTTPRequestHandler):
    bomb = b""

    def do_GET(self):
        if self.path == "/bomb.pdf":
            body, ctype = self.bomb, "application/pdf"
        else:
            body = ("<html><head><title>Herons</title></head><body><article><p>"
                    + "Herons fish in the shallows at dusk. " * 5 + "</p></article></body></html>").encode()
            ctype = "text/html"
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.mark.slow  # starts converter processes
def test_fetched_bomb_is_one_failed_page(tmp_path, bomb):
    """The fetch cap (5 MB) bounds the compressed body only: the converter's bound stops it."""
    _Site.bomb = bomb
    with local_server(_Site) as server:
        export = write(tmp_path, "bookmarks.html", "<!DOCTYPE NETSCAPE-Bookmark-file-1>\n<DL><p>\n"
                       f'<DT><A HREF="{server.url}/bomb.pdf" ADD_DATE="1700000000">Report</A>\n'
                       f'<DT><A HREF="{server.url}/herons" ADD_DATE="1700000000">Herons</A>\n</DL><p>\n')
        h = hybrid.open(tmp_path / "home", embedder="hash:64", fetch_private=True,
                        convert_max_memory_mb=MEMORY)  # fetching uses the user's bounds
        h.add_source("bookmarks", export, "reading")
        report = h.index(fetch="new")[0]
    assert (report.fetched, report.fetch_failed) == (1, 1)
    assert f"{server.url}/bomb.pdf: not fetched (converting it needed more than {MEMORY} MB of " \
           "memory (convert_max_memory_mb)); indexed by its title" in report.warnings
    assert h.search("herons dusk", mode="lexical")[0].title == "Herons"
    h.close()


@pytest.mark.slow  # a real-size bomb under the real CLI
@pytest.mark.skipif(not Path("/usr/bin/prlimit").exists() or sys.platform != "linux",
                    reason="needs prlimit (util-linux)")
def test_cli_index_of_a_real_size_bomb_under_3_gb_of_address_space(tmp_path, bomb):
    """The issue as reported: `hybrid index` under a 3 GB address-space limit died by SIGABRT
    with no message and nothing indexed. Now it finishes, warns about the PDF, and indexes
    the rest (default bounds)."""
    root = notes_vault(tmp_path / "vault")
    (root / "bomb.pdf").write_bytes(bomb)
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[settings]\nembedder = "hash:64"\n', encoding="utf-8")
    env = dict(os.environ, HYBRID_HOME=str(home))
    assert subprocess.run([sys.executable, "-m", "hybrid", "vault", "add", str(root), "--name", "v"],
                          env=env, capture_output=True, timeout=60).returncode == 0
    run = subprocess.run(["prlimit", "--as=3000000000", sys.executable, "-m", "hybrid", "index"],
                         env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    limit = hybrid.Settings().convert_max_memory_mb
    assert f"bomb.pdf: converting it needed more than {limit:,} MB of memory (convert_max_memory_mb); " \
           "skipped" in run.stderr
    (status,) = json.loads(hybrid_cmd(home, "status", "--json").stdout)
    assert status["notes"] == 3 and status["sources"] == {"note": 2, "pdf": 1}


def test_bounds_are_settings_checked_on_load():
    with pytest.raises(ConfigError, match="convert_max_memory_mb"):
        hybrid.Settings(convert_max_memory_mb=16)
    with pytest.raises(ConfigError, match="convert_timeout"):
        hybrid.Settings(convert_timeout=0)


def test_out_of_memory_is_told_from_a_crash():
    """A death by signal after using at least half the limit is the limit; a crash early is a crash."""
    mb = 2**20
    assert sandbox._out_of_memory(-6, (900 * mb, 1000 * mb), 1024)
    assert sandbox._out_of_memory(-6, (300 * mb, 1000 * mb), 1024)  # address space at the limit
    assert not sandbox._out_of_memory(-11, (40 * mb, 300 * mb), 1024)
    assert not sandbox._out_of_memory(0, (900 * mb, 1000 * mb), 1024)  # it exited by itself
    assert not sandbox._out_of_memory(-6, (0, 0), 1024)  # no usage known (Windows)


@pytest.mark.slow  # starts converter processes
def test_a_crash_is_not_taken_for_out_of_memory_when_the_parent_is_big(tmp_path, monkeypatch):
    """A worker spawned by a parent holding a model inherits the parent's peak memory through
    fork (wait4's ru_maxrss): its crash must still read as a crash, its own peak being small."""
    big = bytearray(700 * 2**20)  # the parent now holds more than half the worker's limit
    for i in range(0, len(big), 4096):
        big[i] = 1
    monkeypatch.setenv("HYBRID_FAULT", "convert-crash:a.pdf")
    write_pdf(tmp_path / "a.pdf", ["Page of a"])
    with pytest.raises(ConvertError, match=r"the converter crashed on it \(signal SIGABRT\)"):
        to_note("a.pdf", None, str(tmp_path / "a.pdf"), Limits(1024, 30))
    del big
