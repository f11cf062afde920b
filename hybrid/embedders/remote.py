"""Model servers reached over HTTP: where a spec sends text, and one way of calling them.

Three backends send text to a server: ``openai:<model>`` (any OpenAI-compatible
``/v1/embeddings``: OpenAI, vLLM, llama.cpp's server, LM Studio, TEI, Ollama's ``/v1``),
``rerank:<model>`` (the ``/rerank`` API of TEI, Jina, Cohere, vLLM) and the Ollama ones. The
rules they share live here, once:

- **Where.** :func:`destinations` lists, from specs and settings alone (nothing loaded, no
  request made), every server a spec would send text to; ``hybrid status`` shows them, and the
  application asks the user to confirm a server that is not on this machine before any text
  goes there (:mod:`hybrid.app.remote`).
- **What.** Text bound for another machine passes through the secrets redactor first
  (:func:`outbound`); with ``redact_outbound = "always"`` text for this machine too (a
  server reached through an SSH tunnel listens on 127.0.0.1). Without a redactor a backend
  refuses to send text off the machine: it fails closed.
- **How.** :class:`Endpoint` posts JSON with a per-request timeout, retries 429 and 5xx
  answers and dropped connections with exponential backoff (honouring ``Retry-After``), and
  fails with one line that names the endpoint and never the key: a server quoting it back, in
  any letter case, whole or any :data:`MIN_ECHO` characters of it, in base64 or as HTML
  entities, is masked (:func:`mask_key`). That line is the owner's (the CLI, the server's log); an agent is told
  only which server is unavailable (``EndpointError.for_agents``). The key comes from an
  environment variable the settings name (``OPENAI_API_KEY`` by default), never from the
  config file.
"""

from __future__ import annotations

import ipaddress
import os
import random
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from hybrid.core.errors import ConfigError, ModelUnavailable
from hybrid.embedders.base import WordPieceCounter, minilm_path
from hybrid.embedders.registry import Options

OPENAI_DEFAULT_URL = "https://api.openai.com/v1"
BACKOFF = 0.5          # seconds before the first retry; doubled each time
MAX_BACKOFF = 20.0     # … up to this; a Retry-After above it is capped to it
RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
# A stretch of the key this long, in any letter case, is masked wherever a server quotes it:
# shorter ones turn up in ordinary words by chance (a key holding "model" or "1234"), and seven
# random characters of a key leave the rest of it to guess.
MIN_ECHO = 8


@dataclass(frozen=True)
class Destination:
    """A server text goes to: its base URL, what it does there, and whether it is this machine."""
    url: str
    what: str     # "embeddings (openai:text-embedding-3-small)", "rerank (rerank:bge-reranker)"
    local: bool   # on this machine (a loopback address or ``localhost``)


def is_local(url: str) -> bool:
    """Whether ``url``'s host is this machine: ``localhost`` or a loopback address."""
    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_base_url(url: str, setting: str) -> str:
    """``url`` without a trailing slash, or ConfigError: an http(s) URL with a host and no
    user or password in it (a key belongs in an environment variable)."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{setting} {url!r} is not an http(s) URL like https://api.openai.com/v1")
    if parts.username or parts.password:
        raise ConfigError(f"{setting} must not carry a user or password; put the key in the "
                          f"environment variable the *_api_key_env setting names")
    return url.strip().rstrip("/")


def openai_url(o: Options) -> str:
    """The OpenAI-compatible base URL: the setting, else $OPENAI_BASE_URL, else OpenAI's."""
    if o.openai_base_url:
        return check_base_url(o.openai_base_url, "openai_base_url")
    env = os.environ.get("OPENAI_BASE_URL", "").strip()
    return check_base_url(env, "$OPENAI_BASE_URL") if env else OPENAI_DEFAULT_URL


def rerank_url(o: Options) -> str:
    """The ``/rerank`` API's base URL: the setting, else $RERANK_BASE_URL; ConfigError when
    neither is set (there is no one obvious server to guess)."""
    if o.rerank_base_url:
        return check_base_url(o.rerank_base_url, "rerank_base_url")
    env = os.environ.get("RERANK_BASE_URL", "").strip()
    if env:
        return check_base_url(env, "$RERANK_BASE_URL")
    raise ConfigError("`rerank:<model>` needs the server's address: set rerank_base_url (or "
                      "$RERANK_BASE_URL), e.g. http://127.0.0.1:8080 for TEI, "
                      "https://api.jina.ai/v1 or https://api.cohere.com/v2")


def destinations(spec: str, o: Options, *, rerank: bool = False) -> list[Destination]:
    """The servers embedder spec ``spec`` (or with ``rerank``, the ``rerank_model`` spec) sends
    text to; empty for models that run in this process. Raises nothing for a spec it does not
    know (the registry reports those)."""
    kind, _, arg = spec.partition(":")
    if kind == "mix" and not rerank:
        from hybrid.embedders.mix import split_spec
        from hybrid.embedders.registry import UnknownSpec
        try:
            parts = split_spec(arg)
        except UnknownSpec:
            return []
        return [d for p in parts for d in destinations(p, o)]
    served = "rerank" if rerank else "openai"  # the spec kind served at a configured URL
    if not arg or kind not in (served, "ollama"):
        return []
    what = f"{'rerank' if rerank else 'embeddings'} ({spec})"
    if kind == "ollama":
        return [Destination(o.ollama_host.rstrip("/"), what, is_local(o.ollama_host))]
    try:
        url = rerank_url(o) if rerank else openai_url(o)
    except ConfigError:
        return []
    return [Destination(url, what, is_local(url))]


def outbound(texts: Sequence[str], url: str, o: Options) -> list[str]:
    """``texts`` as they may be sent to ``url``: through the redactor when ``url`` is another
    machine (or always, with ``redact_outbound = "always"``). ModelUnavailable when they must
    be redacted and no redactor was given: nothing is sent unredacted."""
    if is_local(url) and o.redact_outbound != "always":
        return list(texts)
    if o.redact is None:
        raise ModelUnavailable(f"refusing to send text to {url}: no secrets redactor is available "
                               f"to this embedder")
    return [o.redact(t) for t in texts]


def api_key(env_name: str) -> str:
    """The key in environment variable ``env_name`` ("" when the name is empty or unset)."""
    return os.environ.get(env_name, "").strip() if env_name else ""


def mask_key(text: str, key: str) -> str:
    """``text`` with ``[key]`` wherever it holds ``key`` in any letter case, whole or any stretch
    of :data:`MIN_ECHO` characters of it (all of a shorter key): a server's error may quote the
    key upper-cased, or its start and end around asterisks. Two encodings a server echoing its
    request's headers may use are masked too: base64 (standard or URL-safe) of any text holding
    the key (the header's value, a ``user:key`` pair: :func:`_base64_cores`), and the key written
    as HTML entities, all or some of its characters (``&#115;&#107;``, ``&#x73;``, named ones).

    Left as they are, on purpose: the key reversed, spaced out, interleaved with zero-width or
    other characters, percent-encoded, hashed, or fewer than :data:`MIN_ECHO` characters of it
    in a row. No server was seen to quote a key so; and this line is the owner's (the CLI, the
    server's log: an agent is told only ``EndpointError.for_agents``), showing the owner's own
    key on the owner's own terminal, so the mask guards against a plain echo landing in a
    shared log or screenshot, not against a server that hides the key on purpose."""
    if not key:
        return text
    n = min(MIN_ECHO, len(key))
    forms = [_fold(key), *(_fold(core) for core in _base64_cores(key))]
    pieces = {form[i:i + n] for form in forms for i in range(len(form) - n + 1)}
    hit = [False] * len(text)
    for i in _matches(_fold(text), pieces, n):
        hit[i:i + n] = [True] * n
    if "&" in text:  # the same search in the text as a browser shows it, mapped back
        shown, spans = _unescaped(text)
        for i in _matches(_fold(shown), pieces, n):
            start, end = spans[i][0], spans[i + n - 1][1]
            hit[start:end] = [True] * (end - start)
    out: list[str] = []
    for i, ch in enumerate(text):
        if not hit[i]:
            out.append(ch)
        elif i == 0 or not hit[i - 1]:
            out.append("[key]")
    return "".join(out)


def _matches(folded: str, pieces: set[str], n: int) -> list[int]:
    return [i for i in range(len(folded) - n + 1) if folded[i:i + n] in pieces]


def _base64_cores(key: str) -> list[str]:
    """The base64 characters any encoding of a text holding ``key`` holds, whatever precedes
    and follows it: one stretch for each of the 3 places the key may start at in base64's 3-byte
    groups (the characters that hold bits of the key alone), in both alphabets."""
    import base64
    raw = key.encode("utf-8", "replace")
    cores = []
    for lead in range(3):
        encoded = base64.b64encode(bytes(lead) + raw).decode("ascii")
        core = encoded[-(-8 * lead // 6):8 * (lead + len(raw)) // 6]  # characters of key bits alone
        cores += [core, core.translate(str.maketrans("+/", "-_"))]
    return cores


_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")


def _unescaped(text: str) -> tuple[str, list[tuple[int, int]]]:
    """``text`` with its HTML entities replaced by what they stand for, and for each character of
    that the span of ``text`` it came from."""
    import html
    chars: list[str] = []
    spans: list[tuple[int, int]] = []
    pos = 0
    for m in _ENTITY.finditer(text):
        chars += text[pos:m.start()]
        spans += [(i, i + 1) for i in range(pos, m.start())]
        value = html.unescape(m[0])
        if value == m[0]:  # not an entity HTML knows: its own characters
            value = m[0]
            spans += [(i, i + 1) for i in range(m.start(), m.end())]
        else:
            spans += [(m.start(), m.end())] * len(value)
        chars += value
        pos = m.end()
    chars += text[pos:]
    spans += [(i, i + 1) for i in range(pos, len(text))]
    return "".join(chars), spans


def _fold(text: str) -> str:
    """Lower case, one character for one (so positions in it are positions in ``text``)."""
    return "".join(low if len(low := ch.lower()) == 1 else ch for ch in text)


class EndpointError(ModelUnavailable):
    """A model server's failure: a refusal, no answer, or an answer that is not what was asked;
    ``status`` is the HTTP status of a refusal (0 otherwise). An agent is told only which
    server (``role``: embedding, reranking) is unavailable."""

    def __init__(self, text: str, status: int = 0, role: str = "model"):
        super().__init__(text)
        self.status = status
        self.for_agents = f"the {role} server is unavailable; the owner can see details in the server's log"


class Endpoint:
    """JSON over HTTP to one model server, with retries; see the module docstring."""

    def __init__(self, base_url: str, key_env: str, timeout: float, retries: int, label: str,
                 role: str = "model"):
        self.base_url = base_url.rstrip("/")
        self.key_env = key_env
        self.timeout = timeout
        self.retries = retries
        self.label = label   # "OpenAI-compatible embeddings", named in every error
        self.role = role     # "embedding", "reranking": what an agent is told is unavailable
        self._client: Any = None

    def _http(self) -> Any:
        if self._client is None:
            import httpx
            self._client = httpx.Client(timeout=self.timeout, follow_redirects=False)
        return self._client

    def _fail(self, path: str, why: str, key: str, status: int = 0) -> EndpointError:
        text = mask_key(f"{self.label} at {self.base_url}{path} failed: {why}", key)
        return EndpointError(" ".join(text.split()), status, self.role)

    def bad_answer(self, path: str, what: str) -> EndpointError:
        """The error for an answer that is not what was asked (``what`` it returned)."""
        return EndpointError(f"{self.label} at {self.base_url}{path} returned {what}", 0, self.role)

    def post(self, path: str, body: dict) -> Any:
        """The decoded JSON answer to ``body`` posted at ``path``; ModelUnavailable (one line)
        after the retries, for an answer that is not JSON, or for a 4xx other than 408/409/429."""
        import httpx
        key = api_key(self.key_env)
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        url = self.base_url + path
        attempt = 0
        while True:
            wait: float | None = None
            try:
                resp = self._http().post(url, json=body, headers=headers)
            except httpx.TimeoutException:
                why = f"no answer within {self.timeout:g} s (setting remote_timeout)"
            except httpx.HTTPError as exc:
                why = f"cannot connect ({exc.__class__.__name__})"
            else:
                if resp.status_code < 300:
                    try:
                        return resp.json()
                    except ValueError:
                        raise self._fail(path, f"HTTP {resp.status_code} with an answer that is not JSON",
                                         key) from None
                why = f"HTTP {resp.status_code}{_message(resp)}"
                if resp.status_code == 401:
                    why += (f" (set ${self.key_env} to the server's key)" if self.key_env and not key
                            else " (check the key)")
                if resp.status_code not in RETRY_STATUS:
                    raise self._fail(path, why, key, resp.status_code)
                wait = _retry_after(resp.headers.get("Retry-After"))
            if attempt >= self.retries:
                tries = f" after {attempt + 1} tries" if attempt else ""
                raise self._fail(path, why + tries, key)
            delay = min(MAX_BACKOFF, BACKOFF * 2 ** attempt) * (0.5 + random.random() / 2)
            time.sleep(min(MAX_BACKOFF, wait) if wait is not None else delay)
            attempt += 1


def _retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (a number; an HTTP date is not honoured)."""
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _message(resp: Any) -> str:
    """The error message a server put in its JSON answer (OpenAI's ``error.message``, TEI's
    ``error``, FastAPI's ``detail``), cut to 200 characters, as `` (…)``; "" when none."""
    try:
        doc = resp.json()
    except ValueError:
        return ""
    msg: Any = doc
    if isinstance(doc, dict):
        msg = doc.get("error") or doc.get("detail") or doc.get("message") or ""
        if isinstance(msg, dict):
            msg = msg.get("message") or ""
    msg = " ".join(str(msg).split())
    return f" ({msg[:200]})" if msg else ""


class ServedEmbedder:
    """What the embedders behind a server share: the dimension learnt from the first answer,
    and token counts by BERT's uncased WordPiece vocabulary (the bundled MiniLM's; most
    served embedding models use it or one close to it), else a words-based estimate.
    Subclasses define ``_embed(texts) -> np.ndarray``."""

    _dim: int | None = None

    def __init__(self) -> None:
        self._counter: WordPieceCounter | None
        try:
            self._counter = WordPieceCounter(minilm_path() / "tokenizer.json")
        except ModelUnavailable:
            self._counter = None

    def _embed(self, texts: list[str]) -> Any:
        raise NotImplementedError

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._embed(["dimension probe"])
        return self._dim  # type: ignore[return-value]

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        if self._counter is not None:
            return self._counter(texts)
        return [int(len(t.split()) * 1.3) + 1 for t in texts]
