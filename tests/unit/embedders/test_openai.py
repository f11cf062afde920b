"""`openai:<model>` against small servers on 127.0.0.1 that speak the OpenAI embeddings API and
check what they are sent: batch sizes, headers, retries after 429/5xx, wrong answers (too few
vectors, another dimension), keys never shown, secrets redacted, and the user's yes before text
goes to another machine."""
import json
import threading

import pytest
from click.testing import CliRunner
from helpers import JsonHandler, local_server

import hybrid
from hybrid.app.remote import RemoteNotConfirmed, confirmed
from hybrid.core.errors import ConfigError, ModelUnavailable
from hybrid.embedders import HashEmbedder, make_embedder
from hybrid.embedders import remote as remote_mod
from hybrid.embedders.registry import Options

KEY = "sk-test-0123456789abcdefXYZ"
SECRET = "AKIAIOSFODNN7EXAMPLQ"  # an AWS access key id's shape


class FakeOpenAI(JsonHandler):
    """``POST /v1/embeddings``. Class attributes steer it: ``script`` is a list of status codes
    to answer before serving (429 with Retry-After 0, 503...), ``dims`` the dimension per
    request (cycled), ``short`` drops the last vector."""
    inner = HashEmbedder(48)
    seen: list = []
    auth: list = []
    script: list = []
    short = False
    nan = False  # answer NaN in the vectors (JSON's NaN, which Python's parser reads)
    dims: list = []
    echo = ""  # what a 401 quotes as the key (default: the key as sent)
    down = ""  # set: every request gets a 500 whose error message is this
    lock = threading.Lock()

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with FakeOpenAI.lock:
            FakeOpenAI.auth.append(self.headers.get("Authorization"))
            if FakeOpenAI.down:
                return self._send(500, {"error": {"message": FakeOpenAI.down}})
            if FakeOpenAI.script:
                code = FakeOpenAI.script.pop(0)
                if code == 401:
                    echo = FakeOpenAI.echo or KEY
                    return self._send(401, {"error": {"message": f"Incorrect API key provided: {echo}"}})
                self.send_response(code)
                self.send_header("Retry-After", "0")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")
                return
            if self.path != "/v1/embeddings":
                return self._send(404, {"error": {"message": "no such route"}})
            texts = body["input"]
            assert body["model"] == "emb-small" and isinstance(texts, list)
            FakeOpenAI.seen.append(list(texts))
            vecs = self.inner.embed_documents(texts).tolist()
            if FakeOpenAI.dims:
                d = FakeOpenAI.dims[(len(FakeOpenAI.seen) - 1) % len(FakeOpenAI.dims)]
                vecs = [v[:d] for v in vecs]
            if FakeOpenAI.short:
                vecs = vecs[:-1]
            if FakeOpenAI.nan:
                vecs = [[float("nan")] + v[1:] for v in vecs]
        data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vecs)]
        data.reverse()  # servers may answer out of order: the index says which is which
        self._send(200, {"object": "list", "data": data, "model": body["model"]})


@pytest.fixture
def server(monkeypatch):
    FakeOpenAI.seen, FakeOpenAI.auth, FakeOpenAI.script, FakeOpenAI.dims = [], [], [], []
    FakeOpenAI.short, FakeOpenAI.echo, FakeOpenAI.down, FakeOpenAI.nan = False, "", "", False
    monkeypatch.setattr(remote_mod, "BACKOFF", 0.01)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with local_server(FakeOpenAI) as s:
        yield s.url + "/v1"


def handle(url, **kw):
    return hybrid.open(embedder="openai:emb-small", openai_base_url=url, **kw)


def test_index_and_search_in_batches_with_the_key(server, vault):
    h = handle(server, batch_size=3)
    h.add_vault(vault, "vault")
    r = h.index()[0]
    assert r.chunks_embedded == r.chunks > 3
    sizes = [len(b) for b in FakeOpenAI.seen]
    assert max(sizes) == 3 and sum(sizes) == r.chunks
    assert set(FakeOpenAI.auth) == {f"Bearer {KEY}"}
    assert h.search("tomatoes sun", mode="vector")[0].path == "home/garden.md"
    assert FakeOpenAI.seen[-1] == ["tomatoes sun"]
    st = h.status()[0]
    assert st.embedder == "openai:emb-small" and st.dim == 48
    assert st.sends_to == [f"{server} (embeddings (openai:emb-small), this machine)"]


def test_no_key_variable_sends_no_authorization(server, vault, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    emb = make_embedder("openai:emb-small", options=Options(openai_base_url=server))
    assert emb.embed_query("x").shape == (48,)
    assert FakeOpenAI.auth == [None]


def test_retries_after_429_and_5xx(server):
    FakeOpenAI.script = [429, 503, 500]
    emb = make_embedder("openai:emb-small", options=Options(openai_base_url=server, remote_retries=3))
    assert emb.embed_documents(["a", "b"]).shape == (2, 48)
    assert len(FakeOpenAI.auth) == 4 and FakeOpenAI.seen == [["a", "b"]]


def test_gives_up_after_the_retries_in_one_line_without_the_key(server, vault):
    h = handle(server)
    h.add_vault(vault, "vault")
    h.index()
    (vault / "new.md").write_text("# New\n\nfresh words\n")
    FakeOpenAI.script = [503] * 10
    down = handle(server, remote_retries=2)
    with pytest.raises(ModelUnavailable) as err:
        down.index()
    msg = str(err.value)
    assert "HTTP 503" in msg and "after 3 tries" in msg and server in msg and "\n" not in msg
    assert len(FakeOpenAI.auth) - 1 - len(FakeOpenAI.seen) == 2  # 3 tries, no more
    FakeOpenAI.script = []
    assert [x.path for x in down.search("tomatoes", mode="lexical")] == ["home/garden.md"]
    assert h.index()[0].added == 1


def test_a_401_names_the_endpoint_never_the_key(server):
    FakeOpenAI.script = [401]
    emb = make_embedder("openai:emb-small", options=Options(openai_base_url=server))
    with pytest.raises(ModelUnavailable) as err:
        emb.embed_query("x")
    msg = str(err.value)
    assert KEY not in msg and "[key]" in msg and "HTTP 401" in msg and server in msg
    assert len(FakeOpenAI.auth) == 1  # a 401 is not retried


@pytest.mark.parametrize("echo", [KEY.upper(), KEY.lower(), KEY.swapcase(), KEY[3:14], f"…{KEY[-9:].upper()}",
                                  f"{KEY[:10]}***{KEY[-8:]}"])
def test_an_echo_of_the_key_is_masked_in_any_case_and_in_part(server, echo):
    FakeOpenAI.script, FakeOpenAI.echo = [401], echo
    emb = make_embedder("openai:emb-small", options=Options(openai_base_url=server))
    with pytest.raises(ModelUnavailable) as err:
        emb.embed_query("x")
    msg = str(err.value)
    folded, key = msg.lower(), KEY.lower()
    assert not any(key[i:i + remote_mod.MIN_ECHO] in folded for i in range(len(key) - remote_mod.MIN_ECHO + 1))
    assert "[key]" in msg and "HTTP 401" in msg and server in msg  # the owner's line names the server


def _b64(text: str, urlsafe: bool = False) -> str:
    import base64
    return (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(text.encode()).decode()


def _entities(text: str, form: str) -> str:
    return "".join(form % ord(c) for c in text)


# Encoded copies of the key a server echoing its request's headers may quote: base64 of the key,
# of the header's value and of a basic-auth pair (the key at each of the 3 offsets base64 groups
# bytes by), URL-safe too; the key as HTML entities, decimal or hex, or only some of it.
ENCODED_ECHOES = [
    _b64(KEY), _b64(f"Bearer {KEY}"), _b64(f"user:{KEY}"), _b64(f"x{KEY}", urlsafe=True),
    _b64(KEY)[4:24],  # part of it
    _entities(KEY, "&#%d;"), _entities(KEY, "&#x%X;"), KEY.replace("-", "&#45;").replace("t", "&#116;"),
    KEY.replace("-", "&#x2d;"), _entities(KEY[2:14], "&#%d;"),
]


@pytest.mark.parametrize("echo", ENCODED_ECHOES, ids=[str(i) for i in range(len(ENCODED_ECHOES))])
def test_a_base64_or_html_entity_echo_of_the_key_is_masked(server, echo):
    FakeOpenAI.script, FakeOpenAI.echo = [401], echo
    emb = make_embedder("openai:emb-small", options=Options(openai_base_url=server))
    with pytest.raises(ModelUnavailable) as err:
        emb.embed_query("x")
    msg = str(err.value)
    assert "[key]" in msg and "HTTP 401" in msg and server in msg
    import html
    decoded = html.unescape(msg)
    assert not any(KEY[i:i + remote_mod.MIN_ECHO] in decoded for i in range(len(KEY) - remote_mod.MIN_ECHO + 1))
    # what is left of the echo is what surrounds the key ('Bearer ' encoded: QmVhcmVyIH), the
    # base64 characters it shares with it and the padding: a few at most
    left = msg.split("Incorrect API key provided: ")[1].split(") (check the key)")[0]
    assert len(left.replace("[key]", "")) <= 13, left


def test_encoded_forms_of_other_text_are_left_alone():
    """Base64 and entities of other text, and the key's own alphabet in ordinary words, stay."""
    text = f"rate limited; {_b64('some other header value')} &#60;b&#62; &amp; sk-test"
    assert remote_mod.mask_key(text, KEY) == text


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_agents_get_one_plain_line_when_the_embedding_server_fails(server, vault, caplog):
    """An agent's search (MCP, /api/search) once got the owner's line: the server's URL and
    its error text. The owner (CLI, the owner key) still gets it; the server's log has it."""
    import anyio
    from mcp import Client
    from starlette.testclient import TestClient

    from hybrid.faces.http import build_app
    from hybrid.faces.mcp import build_server
    h = handle(server, remote_retries=0)
    h.add_vault(vault, "vault")
    h.index()
    FakeOpenAI.down = f"model emb-small crashed on GPU 0 (key {KEY})"
    plain = "the embedding server is unavailable; the owner can see details in the server's log"

    async def mcp_search():
        async with Client(build_server(h)) as c:
            return await c.call_tool("search", {"query": "tomatoes"})
    res = anyio.run(mcp_search)
    assert res.is_error and res.content[0].text.endswith(plain)
    app = TestClient(build_app(h, owner_key="OWNER"), base_url="http://127.0.0.1:8765")
    r = app.post("/api/search", json={"query": "tomatoes"})
    assert r.status_code == 503 and r.json() == {"error": plain}
    r = app.post("/api/related", json={"note": "home/garden.md"})  # related embeds nothing new: served
    assert r.status_code == 200
    r = app.post("/api/search", json={"query": "tomatoes"}, headers={"X-Hybrid-Owner": "OWNER"})
    assert r.status_code == 422 and server in r.json()["error"] and "crashed on GPU 0" in r.json()["error"]
    with pytest.raises(ModelUnavailable, match="crashed on GPU 0") as err:
        h.search("tomatoes")  # the CLI's `hybrid query`
    assert KEY not in str(err.value)
    logged = [rec.getMessage() for rec in caplog.records if rec.levelname == "WARNING"]
    assert any(server in m and "crashed on GPU 0" in m and KEY not in m for m in logged)
    records = [json.loads(line) for line in (h.config.data / "audit.jsonl").read_text().splitlines()]
    assert [x["error"] for x in records if x["error"]] == [plain, plain]  # what the agents were told


@pytest.mark.parametrize("fault, words", [("short", "2 embeddings for 3 texts"),
                                          ("dims", "different dimensions"),
                                          ("nan", "not finite")])  # taken silently: never found by meaning
def test_wrong_answers_are_refused_and_lose_nothing(server, vault, fault, words):
    h = handle(server, batch_size=3)
    h.add_vault(vault, "vault")
    h.index()
    for i in range(3):
        (vault / f"more{i}.md").write_text(f"# More {i}\n\nextra words number {i}\n")
    if fault == "short":
        FakeOpenAI.short = True
    elif fault == "nan":
        FakeOpenAI.nan = True
    else:
        FakeOpenAI.dims = [48, 32]
    with pytest.raises(ModelUnavailable, match=words) as err:
        handle(server, batch_size=2 if fault == "dims" else 3).index()
    assert "\n" not in str(err.value)
    FakeOpenAI.short, FakeOpenAI.dims, FakeOpenAI.nan = False, [], False
    assert h.search("tomatoes sun", mode="vector")[0].path == "home/garden.md"


def test_a_model_that_changes_dimension_is_not_mixed_into_the_index(server, vault):
    h = handle(server)
    h.add_vault(vault, "vault")
    h.index()
    (vault / "new.md").write_text("# New\n\nfresh words\n")
    FakeOpenAI.dims = [32]
    with pytest.raises(Exception, match="32") as err:
        handle(server).index()
    assert "\n" not in str(err.value)
    FakeOpenAI.dims = []
    assert h.search("tomatoes sun", mode="vector")[0].path == "home/garden.md"


def test_secrets_are_redacted_before_they_leave(server, vault):
    (vault / "keys.md").write_text(f"# Keys\n\nThe deploy key is {SECRET} for the bucket.\n")
    h = handle(server, redact_outbound="always")
    h.add_vault(vault, "vault")
    h.index()
    sent = " ".join(t for batch in FakeOpenAI.seen for t in batch)
    assert SECRET not in sent and "[redacted secret]" in sent and "deploy key" in sent
    h.search(f"where is {SECRET}", mode="vector")
    assert SECRET not in FakeOpenAI.seen[-1][0]
    # text for this machine is sent as it is by default (nothing leaves it)
    FakeOpenAI.seen = []
    local = handle(server)
    local.search(f"where is {SECRET}", mode="vector")
    assert FakeOpenAI.seen == [[f"where is {SECRET}"]]


def test_a_password_typed_in_a_query_is_redacted_before_it_leaves(server, vault):
    """Issue #47: "database password Xk9mP2vL7qZ" typed as a query went to a model server on
    another machine as it was (a password with no colon was not found). The query is redacted
    where any text bound elsewhere is (remote.outbound); "always" makes 127.0.0.1 count as elsewhere."""
    h = handle(server, redact_outbound="always")
    h.add_vault(vault, "vault")
    h.index()
    for query in ("database password Xk9mP2vL7qZ", "Das Passwort lautet Xk9mP2vL7qZ", "wifi şifresi Xk9mP2vL7qZ"):
        h.search(query, mode="vector")
        assert FakeOpenAI.seen[-1] == [query.replace("Xk9mP2vL7qZ", "[redacted secret]")]


def test_another_machine_needs_a_yes_first(vault, monkeypatch):
    far = "http://192.0.2.1:9/v1"  # TEST-NET-1: never reached here
    h = handle(far, remote_timeout=0.3, remote_retries=0)
    h.add_vault(vault, "vault")
    assert h.status()[0].sends_to == [f"{far} (embeddings (openai:emb-small), another machine, "
                                      f"not confirmed yet)"]
    with pytest.raises(RemoteNotConfirmed, match="hybrid index --yes") as err:
        h.index()
    assert "\n" not in str(err.value) and far in str(err.value)
    assert confirmed(h.config) == {}


def test_cli_asks_once_and_yes_records_it(vault, tmp_path, monkeypatch):
    from hybrid.cli import main
    far = "http://192.0.2.1:9/v1"
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        f'[settings]\nembedder = "openai:emb-small"\nopenai_base_url = "{far}"\nremote_timeout = 0.3\n'
        f'remote_retries = 0\n\n[vaults.v]\npath = "{vault}"\n')
    monkeypatch.setenv("HYBRID_HOME", str(home))
    runner = CliRunner()
    out = runner.invoke(main, ["index"])
    assert out.exit_code == 1 and "hybrid index --yes" in out.output and "not confirmed" in out.output
    out = runner.invoke(main, ["status"])
    assert f"text sent to: {far} (embeddings (openai:emb-small), another machine, not confirmed yet)" in out.output
    out = runner.invoke(main, ["serve"])  # never asks (stdin may be an MCP client): refuses to start
    assert out.exit_code == 1 and "hybrid index --yes" in out.output
    out = runner.invoke(main, ["index", "--yes"])
    assert "confirmed: text may be sent to" in out.output
    assert "cannot connect" in out.output or "no answer within" in out.output  # it did try, once confirmed
    out = runner.invoke(main, ["status"])
    assert "not confirmed" not in out.output and far in out.output


def test_key_settings_take_names_never_keys():
    with pytest.raises(ConfigError) as err:
        hybrid.open(openai_api_key_env=KEY)
    assert KEY not in str(err.value) and "never the key" in str(err.value)
    with pytest.raises(ConfigError, match="without a user or password"):
        hybrid.open(openai_base_url="https://me:pw@api.example.com/v1")


def test_environment_gives_the_base_url(server, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", server)
    emb = make_embedder("openai:emb-small", options=Options())
    assert emb.embed_query("x").shape == (48,) and FakeOpenAI.seen == [["x"]]
    monkeypatch.delenv("OPENAI_BASE_URL")
    assert make_embedder("openai:emb-small", options=Options()).base_url == "https://api.openai.com/v1"


def test_choosing_a_far_model_in_config_asks_once(vault, tmp_path, monkeypatch):
    from hybrid.cli import main
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(f'# my settings\n[settings]\nopenai_base_url = "http://192.0.2.1:9/v1"\n\n'
                                      f'[vaults.v]\npath = "{vault}"\n')
    monkeypatch.setenv("HYBRID_HOME", str(home))
    runner = CliRunner()
    out = runner.invoke(main, ["config", "set", "embedder", "openai:emb-small"])
    assert out.exit_code == 0, out.output
    assert "nothing is sent until you confirm" in out.output and "192.0.2.1" in out.output
    assert confirmed(hybrid.open().config) == {}
    out = runner.invoke(main, ["config", "set", "rerank_model", "rerank:bge", "--yes"])
    assert out.exit_code == 0 and "confirmed: text may be sent to http://192.0.2.1:9/v1" in out.output
    assert list(confirmed(hybrid.open().config)) == ["http://192.0.2.1:9/v1"]
    assert (home / "config.toml").read_text().startswith("# my settings\n")
