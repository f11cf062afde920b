"""Plain helpers shared by test modules (fixtures live in conftest.py).

Importable as ``helpers`` because pyproject's ``[tool.pytest.ini_options]`` puts ``tests/`` on
``sys.path`` (``pythonpath = ["tests"]``), whatever directory or import mode pytest runs with."""
import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import hybrid

REPO = Path(__file__).resolve().parents[1]  # the checkout: docs/, eval/, qrels/
SAMPLE_VAULT = Path(hybrid.__file__).parent / "sample_vault"
OBSIDIAN_HELP = Path(__file__).resolve().parents[2] / "shared" / "vaults" / "obsidian-help"

# Every store kind hybrid ships (hybrid.core.store_url): the stores the contract suite and every
# module with ``STORES = ALL_STORES`` run on (conftest.new_store_value makes a new one of each).
ALL_STORES = tuple(k.name for k in __import__("hybrid.core.store_url", fromlist=["BUILT_IN"]).BUILT_IN)


def write(root: Path, rel: str, text: str) -> Path:
    """Write ``text`` to ``root/rel``, creating folders; returns the path."""
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
    return p


def hybrid_cmd(home, *args, input=None, timeout=300) -> subprocess.CompletedProcess:
    """Run ``hybrid ARGS`` in a subprocess with ``HYBRID_HOME=home``; text output captured."""
    env = dict(os.environ, HYBRID_HOME=str(home))
    return subprocess.run([sys.executable, "-m", "hybrid", *args], env=env, capture_output=True,
                          text=True, timeout=timeout, input=input)


def indexed_vault(root: Path, notes: dict[str, str], name: str = "v", opener=None, **settings):
    """A handle on a fresh home under ``root`` with ``notes`` ({path: text}) written to
    ``root/vault``, registered as ``name`` and indexed (hash embedder unless ``settings`` say).
    ``opener``: what opens the handle (default ``hybrid.open``; the ``open_h`` fixture for a
    test run on every store)."""
    import hybrid
    for rel, text in notes.items():
        write(root / "vault", rel, text)
    h = (opener or hybrid.open)(root / "home", **{"embedder": "hash:64", **settings})
    h.add_vault(root / "vault", name)
    h.index()
    return h


def write_multilingual_vault(root: Path) -> Path:
    """Three notes in three languages (English, German, Russian), one topic each: tomatoes, a
    flat bicycle tyre, a tax return. For cross-lingual retrieval tests."""
    write(root, "garden.md", "# Growing tomatoes\n\nTomato plants need at least six hours of direct sun "
          "a day and deep watering twice a week. Pinch off the side shoots so the plant puts its "
          "energy into the fruit.\n")
    write(root, "fahrrad.md", "# Fahrradreparatur\n\nUm einen platten Reifen zu flicken, nimm den Schlauch "
          "heraus, suche das Loch im Wasserbad und klebe einen Flicken darauf.\n")
    write(root, "nalogi.md", "# Налоговая декларация\n\nДекларацию о доходах за прошлый год нужно подать "
          "в налоговую инспекцию до тридцатого апреля.\n")
    return root


class CountingEmbedder:
    """A built embedder (``hash:32`` by default) that counts the texts it embeds."""

    def __init__(self, spec: str = "hash:32"):
        from hybrid.embedders import make_embedder
        self.inner = make_embedder(spec)
        self.id, self.max_tokens, self.texts = self.inner.id, self.inner.max_tokens, 0

    @property
    def dim(self):
        return self.inner.dim

    def count_tokens(self, texts):
        return self.inner.count_tokens(texts)

    def embed_documents(self, texts):
        self.texts += len(texts)
        return self.inner.embed_documents(texts)

    def embed_query(self, text):
        return self.inner.embed_query(text)


class JsonHandler(BaseHTTPRequestHandler):
    """Base of the fake HTTP servers tests start (Ollama's API): JSON replies, no access log."""

    def _send(self, code, payload):
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def local_server(handler: type[BaseHTTPRequestHandler]):
    """Serve ``handler`` on 127.0.0.1 (a free port) in a thread; yields the server (its ``url``
    set); shut down and closed on exit."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.url = f"http://127.0.0.1:{server.server_address[1]}"  # type: ignore[attr-defined]
    # a short poll: shutdown() waits for the loop to look (0.5 s by default, at every test's end)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def paths(hits) -> list[str]:
    return [h.path for h in hits]


def consistent(h, name="vault") -> int:
    """The ledger and both indexes (tantivy and FAISS, or Milvus's) agree on the set of chunks,
    nothing is pending, and each live note's tag set is its tags' (for a PostgreSQL vault:
    :func:`pg_consistent`). Returns the number of chunks."""
    import json

    from hybrid.core.store_url import kind_of
    from hybrid.store.base import tag_set
    v = h.config.vault(name)
    if kind_of(v.store).name == "postgresql":
        return pg_consistent(v)
    store = open_store(v)
    try:
        n = store.catalog.chunk_count()
        assert store.lexical.count() == n
        assert store.vector.count() == n
        assert store.catalog.journal() == []
        ids = set(store.catalog.all_chunk_ids())
        if n and kind_of(v.store).name == "local":
            import faiss
            idx = store.vector._load()
            assert set(faiss.vector_to_array(idx.id_map).tolist()) == ids
        db = store.catalog.db
        for fid, tags in db.execute("SELECT id, tags FROM files WHERE deleted=0").fetchall():
            held = {r[0] for r in db.execute("SELECT tag FROM file_tags WHERE file_id=?", (fid,))}
            assert held == set(tag_set(json.loads(tags))), (fid, tags, held)
        assert db.execute("SELECT count(*) FROM file_tags WHERE file_id NOT IN (SELECT id FROM files)"
                          ).fetchone()[0] == 0
        return n
    finally:
        store.close()


def fail_embedding_at(monkeypatch, embedder, call: int) -> dict:
    """Make ``embedder.embed_documents`` raise ModelUnavailable("model went away") on its
    ``call``-th call (a model that dies mid-run). Returns the call counter; undo with
    ``monkeypatch.undo()`` or by setting ``embed_documents`` back to ``counter["real"]``."""
    import hybrid.core.errors
    counter = {"n": 0, "real": embedder.embed_documents}

    def failing(texts):
        counter["n"] += 1
        if counter["n"] == call:
            raise hybrid.core.errors.ModelUnavailable("model went away")
        return counter["real"](texts)

    monkeypatch.setattr(embedder, "embed_documents", failing)
    return counter


def open_store(v):
    """Vault ``v``'s store, of whichever kind (a writer's open of one over the SQLite ledger)."""
    from hybrid.core.store_url import kind_of
    if kind_of(v.store).name == "postgresql":
        from hybrid.store.pg.store import open_store as open_pg
        return open_pg(v)
    from hybrid.store import backend
    from hybrid.store.local.store import VaultStore
    return VaultStore(v.index_dir, indexes=backend(v).indexes(v))


def pg_consistent(v) -> int:
    """A PostgreSQL vault's derived data agrees with its rows: every chunk has a vector and
    belongs to a live file, every section's chunks exist and are its note's, the document
    frequencies equal a recount from the tsvectors, the BM25 statistics their counts, and each
    note's tag set is its tags' (with their ancestors), as its chunks carry it."""
    import json

    from hybrid.store.base import tag_set
    from hybrid.store.pg.store import open_store
    from hybrid.store.pg.tsv import DF_COLUMN, field_df_counts, field_lengths, summed_lengths
    store = open_store(v)
    try:
        q, vid = store.query, store.vault_id
        n = store.catalog.chunk_count()
        assert store.vector.count() == n
        assert q("SELECT count(*) FROM hybrid_chunks c WHERE vault=%s AND NOT EXISTS (SELECT 1 FROM "
                 "hybrid_files f WHERE f.id=c.file_id AND f.vault=%s)", (vid, vid)).fetchone()[0] == 0
        assert q("SELECT count(*) FROM hybrid_sections s WHERE vault=%s AND EXISTS (SELECT 1 FROM "
                 "unnest(s.chunk_ids) i WHERE NOT EXISTS (SELECT 1 FROM hybrid_chunks c WHERE c.id=i "
                 "AND c.file_id=s.file_id))", (vid,)).fetchone()[0] == 0
        for unit, table in ((0, "hybrid_chunks"), (1, "hybrid_sections")):
            want = {r[0]: tuple(r[1:]) for r in q(
                f"SELECT u.lexeme, count(*), {field_df_counts()} FROM {table} c, unnest(c.tsv) u "
                f"WHERE c.vault=%s GROUP BY u.lexeme", (vid,))}
            got = {r[0]: tuple(r[1:]) for r in q(
                f"SELECT lexeme, df, {', '.join(DF_COLUMN.values())} FROM hybrid_terms WHERE vault=%s AND unit=%s",
                (vid, unit))}
            assert got == want
            # each unit's field lengths are its tsvector's positions per field (as a migration counts them)
            assert q(f"SELECT count(*) FROM {table} c WHERE c.vault=%s AND (c.lens <> {field_lengths('c.tsv')} "
                     f"OR c.agent_lens IS DISTINCT FROM (CASE WHEN c.agent_tsv IS NULL THEN NULL ELSE "
                     f"{field_lengths('c.agent_tsv')} END))", (vid,)).fetchone()[0] == 0
        stats = q("SELECT n_chunks, n_sections, chunk_lens, section_lens FROM hybrid_vaults WHERE id=%s",
                  (vid,)).fetchone()
        assert stats[0] == n
        assert stats[1] == q("SELECT count(*) FROM hybrid_sections WHERE vault=%s", (vid,)).fetchone()[0]
        assert stats[2] == q(f"SELECT {summed_lengths('hybrid_chunks', '%s')}", (vid,)).fetchone()[0]
        assert stats[3] == q(f"SELECT {summed_lengths('hybrid_sections', '%s')}", (vid,)).fetchone()[0]
        for tags, tags_of_file in q("SELECT tags, tag_set FROM hybrid_files WHERE vault=%s", (vid,)):
            assert tags_of_file == tag_set(json.loads(tags))
        assert q("SELECT count(*) FROM hybrid_chunks c JOIN hybrid_files f ON f.id = c.file_id WHERE "
                 "c.vault=%s AND c.tag_set <> f.tag_set", (vid,)).fetchone()[0] == 0
        packed_consistent(store)
        return n
    finally:
        store.close()


def packed_consistent(store) -> int:
    """Each packed posting of the keyword arm (hybrid.store.pg.packed) is its unit's term
    frequency per field as the SQL scorer computes it (ts_rank_cd weighted to one field) for
    the units of its build still there, and the base's field lengths are the units'; every row
    is of the base's build. How many postings were checked."""
    import numpy as np

    from hybrid.store.pg.tsv import FIELDS, UNIT_CODE, UNIT_TABLE, quote, tf_weights
    q, vid, checked = store.query, store.vault_id, 0
    for unit, table in UNIT_TABLE.items():
        base = q("SELECT build, max_id, ids FROM hybrid_packed_base WHERE vault=%s AND unit=%s",
                 (vid, UNIT_CODE[unit])).fetchone()
        if base is None:
            assert not q("SELECT count(*) FROM hybrid_packed WHERE vault=%s AND unit=%s",
                         (vid, UNIT_CODE[unit])).fetchone()[0]
            continue
        build, max_id, ids = base[0], base[1], np.frombuffer(base[2], ">i8")
        lens = q("SELECT lens FROM hybrid_packed_base WHERE vault=%s AND unit=%s", (vid, UNIT_CODE[unit])).fetchone()[0]
        base_lens = dict(zip(ids.tolist(), np.frombuffer(lens, ">i4").reshape(-1, len(FIELDS)).tolist()))
        live = dict(q(f"SELECT id, lens FROM {table} WHERE vault=%s AND id <= %s", (vid, max_id)).fetchall())
        assert {k: v for k, v in base_lens.items() if k in live} == live
        for lexeme, b, ords, tfs in q("SELECT lexeme, build, ords, tfs FROM hybrid_packed WHERE vault=%s "
                                      "AND unit=%s", (vid, UNIT_CODE[unit])).fetchall():
            assert b == build
            per_field = ", ".join(f"ts_rank_cd({tf_weights(x)}, tsv, %(q)s::tsquery, 0)::int" for x in FIELDS)
            exact = {r[0]: list(r[1:]) for r in q(
                f"SELECT id, {per_field} FROM {table} WHERE vault=%(v)s AND id <= %(m)s AND tsv @@ %(q)s::tsquery",
                {"q": quote(lexeme), "v": vid, "m": max_id})}
            got = dict(zip(ids[np.frombuffer(ords, ">i4")].tolist(),
                           np.frombuffer(tfs, ">i2").reshape(-1, len(FIELDS)).tolist()))
            assert {k: v for k, v in got.items() if k in live} == exact, lexeme
            checked += len(exact)
    return checked


def write_pdf(path: Path, pages: list[str], *, title: str | None = None,
              password: str | None = None, images_only: bool = False) -> Path:
    """A real PDF at ``path`` with one page per text of ``pages`` (fpdf2); ``password``: only
    readable with it (AES-128); ``images_only``: each page a filled box, no text layer (a scan)."""
    from fpdf import FPDF
    pdf = FPDF()
    pdf.set_font("helvetica", size=11)
    if title:
        pdf.set_title(title)
    for text in pages:
        pdf.add_page()
        if images_only:
            pdf.rect(20, 20, 120, 160, style="F")
        else:
            pdf.multi_cell(0, 6, text)
    if password:
        from fpdf.enums import EncryptionMethod
        pdf.set_encryption(owner_password=password + "-owner", user_password=password,
                           encryption_method=EncryptionMethod.AES_128)
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(path))
    return path


@contextlib.contextmanager
def app_server(h, token: str | None = None, owner_key: str = "OWNER-KEY", watcher=None):
    """``hybrid serve --http``'s app for handle ``h`` on 127.0.0.1 (a free port), served by
    uvicorn in a thread; yields its base URL; stopped on exit."""
    from hybrid.faces.http import build_app
    port = free_port()
    with uvicorn_thread(build_app(h, "127.0.0.1", port, token, watcher, owner_key=owner_key), port):
        yield f"http://127.0.0.1:{port}"


MCP_ACCEPT = "application/json, text/event-stream"  # what an MCP client sends


def raw_http(port: int, method: str, path: str, body: bytes = b"", source: str | None = None,
             **headers: str) -> tuple[int, dict[str, str], bytes]:
    """One request to 127.0.0.1:``port`` on a connection of its own (from address ``source``
    when given, e.g. another 127.x): (status, lower-cased headers, body). JSON and MCP's Accept
    by default."""
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30,
                                      source_address=(source, 0) if source else None)
    try:
        conn.request(method, path, body, {"Host": f"127.0.0.1:{port}", "Content-Type": "application/json",
                                          "Accept": MCP_ACCEPT, **headers})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def health_ok(port: int, timeout: float = 30) -> float:
    """Seconds ``GET /health`` took on 127.0.0.1:``port``, asserted to be a 200."""
    import urllib.request
    t0 = time.monotonic()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=timeout) as resp:
        assert resp.status == 200
    return time.monotonic() - t0


def hash_home(home: Path, vault: Path) -> Path:
    """A config whose default embedder is the hash embedder (so server subprocesses use it
    too), with ``vault`` indexed as ``vault``."""
    write(home, "config.toml", '[settings]\nembedder = "hash:64"\n')
    h = hybrid.open(home)
    h.add_vault(vault, "vault")
    h.index()
    h.close()
    return home


def server_env(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a subprocess on ``home``: no token or allowed hosts of the caller's."""
    env = {k: v for k, v in os.environ.items() if k not in ("HYBRID_TOKEN", "HYBRID_ALLOWED_HOSTS")}
    return {**env, "HYBRID_HOME": str(home), **(extra or {})}


class ServerProcess:
    """A running `hybrid serve --http` subprocess (see :func:`http_servers`)."""

    def __init__(self, proc, port, home):
        self.proc, self.port, self.home = proc, port, home

    @property
    def info(self) -> Path:
        """Its address file (server.json)."""
        from hybrid.faces.http import server_file
        return server_file(hybrid.open(self.home))


@contextlib.contextmanager
def http_servers(home: Path, logs: Path):
    """Yields ``start(*args, env=None, port=None)``: start `hybrid serve --http` on ``home``
    (a free port unless given), wait for /health, return a :class:`ServerProcess`. Every one
    started is stopped on exit; their stderr goes to files in ``logs``."""
    import urllib.request
    procs = []

    def start(*args, env=None, port=None):
        port = port or free_port()
        log_path = logs / f"server-{port}-{len(procs)}.log"
        log = open(log_path, "wb")
        p = subprocess.Popen([sys.executable, "-m", "hybrid", "serve", "--http", "--port", str(port), *args],
                             env=server_env(home, env), stdout=subprocess.DEVNULL, stderr=log)
        procs.append((p, log))
        deadline = time.time() + 60
        while time.time() < deadline and p.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=30) as resp:
                    if resp.status == 200:
                        return ServerProcess(p, port, home)
            except OSError:
                time.sleep(0.2)
        raise AssertionError(log_path.read_text() if p.poll() is not None else "server did not start")

    try:
        yield start
    finally:
        for p, log in procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
            log.close()


@contextlib.contextmanager
def uvicorn_thread(app, port: int | None = None, **config):
    """Serve ASGI ``app`` with uvicorn on 127.0.0.1 (a free port unless given) in a thread,
    with extra ``uvicorn.Config`` keywords (e.g. ``http=`` a protocol class); yields the port;
    stopped on exit. For tests that patch the server's internals (a subprocess cannot be)."""
    import uvicorn
    port = port or free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                           access_log=False, **config))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def set_chunking_version(vault, version: int) -> None:
    """Record ``vault``'s index as made by chunking ``version`` (an older one: the next index
    run re-reads every note, as after an upgrade)."""
    from hybrid.store import open_store
    store = open_store(vault)
    try:
        old = json.loads(store.catalog.get_meta("chunking"))
        store.catalog.set_meta("chunking", json.dumps({**old, "version": version}))
    finally:
        store.close()


def index_on_backend(request, tmp_path_factory, notes: dict[str, str]):
    """A handle (hash embedder) on a new home whose vault ``v`` holds ``notes`` ({path: text}),
    indexed on the backend of ``request.param`` (one of :data:`ALL_STORES`: a new store of that
    kind, :func:`conftest.new_store_value`), for module-scoped fixtures run on every backend."""
    from conftest import new_store_value
    settings = {}
    if (store := new_store_value(request.param, request)) is not None:
        settings["store"] = store
    root = tmp_path_factory.mktemp("vault")
    for rel, text in notes.items():
        write(root, rel, text)
    h = hybrid.open(tmp_path_factory.mktemp("home"), embedder="hash:64", **settings)
    h.add_vault(root, "v")
    return h


def mcp_search(h, args: dict):
    """The MCP ``search`` tool's result for ``args``, through a real client session on ``h``
    (asserted not to be an error)."""
    import anyio
    from mcp import Client

    from hybrid.faces.mcp import build_server

    async def run():
        async with Client(build_server(h)) as c:
            return await c.call_tool("search", args)
    res = anyio.run(run)
    assert not res.is_error, res.content
    return res


def link_graph(h, name="v"):
    """The link graph (hybrid.store.graph) of vault ``name`` as its ledger holds it, and
    ``{path: file id}``."""
    from hybrid.store import open_store
    from hybrid.store.graph import LinkGraph
    store = open_store(h.config.vault(name))
    try:
        g = LinkGraph.build(store.catalog.notes())
    finally:
        store.close()
    return g, {n.path: fid for fid, n in g.notes.items()}


def text_image(path: Path, lines: list[str], size: int = 30, rotate: int = 0, fmt: str = "PNG") -> Path:
    """``lines`` drawn black on white in DejaVu Sans at ``size`` px, turned ``rotate`` degrees
    counter-clockwise."""
    from PIL import Image, ImageDraw, ImageFont
    font = ImageFont.truetype("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", size)
    img = Image.new("L", (60 + max(int(font.getlength(x)) for x in lines), 60 + int(size * 1.6) * len(lines)), 255)
    draw = ImageDraw.Draw(img)
    for i, line in enumerate(lines):
        draw.text((30, 30 + int(size * 1.6) * i), line, font=font, fill=0)
    if rotate:
        img = img.rotate(rotate, expand=True, fillcolor=255)
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path, format=fmt)
    return path
