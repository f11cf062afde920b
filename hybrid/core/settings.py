"""Every setting, declared once: its name, type, default, help text and the rule its value obeys.

:class:`Settings` is that table and the object code reads (``settings.rrf_k``). It is frozen, and
every instance is validated when it is made, so an override goes through one checked path::

    fast = replace(settings, rrf_k=10)          # or dataclasses.replace: the same checks run

docs/configuration.md documents each field (a test checks that it does); ``SETTINGS`` lists them as
``Setting(name, default, help)`` rows for that documentation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from hybrid.core.errors import ConfigError
from hybrid.core.kinds import folder_globs
from hybrid.core.store_url import is_store_value
from hybrid.core.wordlist import LANGUAGES as SPELL_LANGUAGES  # the lists typo repair can read


def _setting(default: Any, help: str, *, choices: tuple[str, ...] = (),  # noqa: A002 - as in datasette
             check: Callable[[Any], bool] | None = None, empty_ok: bool = False,
             hint: str = "", reindex: str = "") -> Any:
    return field(default=default, metadata={"help": help, "choices": choices, "check": check,
                                            "empty_ok": empty_ok, "hint": hint, "reindex": reindex})


# What a change of a setting asks of the indexes (a field's ``reindex``; none: nothing, the next
# query or run uses it), as `hybrid config set` says it. ``{scope}`` is the vaults it touches,
# ``{vault}`` the `--vault NAME` option naming them. Found from what the indexer records and
# reacts to: the embedder id and the chunking parameters in each vault's catalog
# (hybrid.indexing.indexer), the vector layout (hybrid.store.local.vector.needs_rebuild), the
# limits a skipped file was judged under (hybrid.indexing.skipped), the agent view's fingerprint
# (hybrid.store.agent.view).
REINDEX = {
    "reembed": "{scope} must be embedded again: run `hybrid index{vault} --reembed` (until then "
               "indexing refuses; a `mix:` holding the model already indexed is an upgrade that "
               "plain `hybrid index` makes)",
    "rechunk": "the next `hybrid index` re-reads and re-chunks every note of {scope} (only chunks "
               "whose text changed are embedded)",
    "files": "the next `hybrid index` adds and removes files of {scope} to match",
    "limits": "applies to the files the next `hybrid index` reads in {scope}: those skipped under "
              "the old value are tried again, files already indexed stay until they change",
    "vectors": "the next `hybrid index` rebuilds the vector index of {scope} from the stored "
               "vectors where this changes its layout (no re-embedding)",
    "ann_build": "applies when an approximate (IVF) vector index is next built; those built keep "
                 "their calibration",
    "agents": "agents see it at once; the agents' index of {scope} is rebuilt from the catalog by "
              "the next agent query or `hybrid index` (no re-embedding)",
    "store": "applies to vaults registered from now on; registered vaults keep theirs",
}


def _http_url(value: str) -> bool:
    """An http(s) URL with a host and no user or password in it (a key belongs in the
    environment), or empty."""
    from urllib.parse import urlsplit
    if value == "":
        return True
    try:
        parts = urlsplit(value)
        return (parts.scheme in ("http", "https") and bool(parts.hostname)
                and not parts.username and not parts.password)
    except ValueError:
        return False


# The last word of a variable's name that says it holds a key (OPENAI_API_KEY, HF_TOKEN,
# GITHUB_PAT); a word anywhere else says nothing (SSH_AUTH_SOCK, SSL_KEY_FILE, PASSWORD_STORE_DIR
# hold paths), nor do letters inside a word (KEYBOARD, monkey, GIT_ASKPASS).
KEY_WORDS = ("KEY", "APIKEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASS", "PAT", "AUTH", "CREDENTIAL",
             "CREDENTIALS", "CREDS")
_KEY_HINT = f"whose last word is {', '.join(KEY_WORDS[:-1])} or {KEY_WORDS[-1]}"


def _env_name(value: str) -> bool:
    """An environment variable's name that says it holds a key, or empty: a key pasted in its
    place is refused, and so is a variable every shell sets (``PATH``, ``HOME``) or one holding
    a path (``SSH_AUTH_SOCK``), whose value would be sent to the server as the key. Says it: its
    last ``_``-separated word, letter case aside and a number after it allowed
    (``OPENAI_API_KEY_2``), is one of :data:`KEY_WORDS`."""
    import re
    if value == "":
        return True
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,99}", value) is None:
        return False
    words = [w for w in re.sub(r"[0-9_]+$", "", value).upper().split("_") if w]
    return bool(words) and words[-1] in KEY_WORDS


def _base_url(help: str, example: str) -> Any:  # noqa: A002 - as _setting's
    """A model server's base URL: an http(s) URL with no user or password, or empty."""
    return _setting("", help, empty_ok=True, check=_http_url,
                    hint=f"an http(s) URL without a user or password, like {example}")


def _key_env(default: str, help: str, example: str) -> Any:  # noqa: A002 - as _setting's
    """The name of the environment variable holding a model server's key, or empty."""
    return _setting(default, help, empty_ok=True, check=_env_name,
                    hint=f"a variable name like {example} ({_KEY_HINT}), never the key")


# the fusion settings whose default a store kind's fit may replace (hybrid.retrieval.fitted)
_FITTED = (" Where a fit for a vault's store kind is shipped (hybrid/data/fitted.json; none is today) it "
           "replaces this while this is at its default.")


@dataclass(frozen=True)
class Settings:
    """The settings of one handle. Values are checked on creation (ConfigError names the setting
    and an example of a good value); list settings are stored as tuples."""

    embedder: str = _setting(
        "mix:minilm,use-multilingual",
        "Embedding model: `mix:minilm,use-multilingual` (the default: all-MiniLM-L6-v2 for "
        "English and USE-multilingual for 16 languages, weighed per query by its language), "
        "`minilm` (bundled all-MiniLM-L6-v2, English only, on ONNX Runtime), "
        "`use-multilingual` (16 languages alone), `mix:<spec>,<spec>` (any two), `e5-small` "
        "(multilingual-e5-small, ~100 languages), `minilm-int8` (MiniLM quantized), "
        "`minilm-torch` / `e5-small-torch` (the same vectors on torch; `pip install "
        "'hybrid[torch]'`), `ollama:<model>`, `openai:<model>` (any OpenAI-compatible "
        "embeddings API: see `openai_base_url`), `st:<directory>` (a local sentence-transformers "
        "model; the torch extra), `hash:<dim>` (tests only).", reindex="reembed")
    ollama_host: str = _setting("http://127.0.0.1:11434", "Where the Ollama server listens.")
    openai_base_url: str = _base_url(
        "Base URL of the OpenAI-compatible API that `embedder = \"openai:<model>\"` calls "
        "(`…/v1`: OpenAI, vLLM, llama.cpp's server, LM Studio, TEI); empty = $OPENAI_BASE_URL, "
        "else https://api.openai.com/v1.", "http://127.0.0.1:8000/v1")
    openai_api_key_env: str = _key_env(
        "OPENAI_API_KEY", "Name of the environment variable holding that API's key (the key "
                          "itself never goes in the config); empty = send no key.", "OPENAI_API_KEY")
    rerank_base_url: str = _base_url(
        "Base URL of the `/rerank` API that `rerank_model = \"rerank:<model>\"` calls (TEI: "
        "http://127.0.0.1:8080, Jina: https://api.jina.ai/v1, Cohere: "
        "https://api.cohere.com/v2, vLLM); empty = $RERANK_BASE_URL.", "http://127.0.0.1:8080")
    rerank_api_key_env: str = _key_env(
        "RERANK_API_KEY", "Name of the environment variable holding the `/rerank` API's key; "
                          "empty = send no key.", "JINA_API_KEY")
    remote_timeout: float = _setting(
        60, "Seconds one request to a model server (`openai:`, `rerank:`) may take before it is "
            "retried.", check=lambda v: v > 0, hint="a number of seconds, more than 0")
    remote_retries: int = _setting(
        4, "How often a request to a model server is retried after a 429, a 5xx or a dropped "
           "connection (with exponential backoff, honouring Retry-After).")
    redact_outbound: str = _setting(
        "remote", "Which text sent to model servers goes through the secrets redactor first: "
                  "`remote` (text for another machine) or `always` (also a server on this "
                  "machine's loopback address, such as an SSH tunnel to a GPU box).",
        choices=("remote", "always"))
    store: str = _setting(
        "", "Where vaults registered without `--store` keep their index: empty for local files, "
            "`postgresql` for the PostgreSQL database in $HYBRID_DATABASE_URL, a "
            "postgresql://USER@HOST/DB URL without a password (team mode), or a milvus:// URL "
            "(both indexes in Milvus: docs/scale-out.md).", empty_ok=True,
        check=lambda v: v == "" or is_store_value(v),
        hint="empty, `postgresql`, or a postgresql:// or milvus:// URL", reindex="store")
    chunk_tokens: int = _setting(
        128, "Target chunk size in the embedder's own tokens (header included); never more than "
             "the model reads.", reindex="rechunk")
    chunk_overlap: int = _setting(
        32, "Tokens of trailing context repeated at the start of the next chunk when a long "
            "section is split.", reindex="rechunk")
    context_header: bool = _setting(True, "Prefix each embedded chunk with `title > heading path`.", reindex="rechunk")
    batch_size: int = _setting(32, "Texts per embedding batch.")
    max_file_bytes: int = _setting(5_000_000, "Larger notes (and text or HTML files) are skipped "
                                              "with a warning.", reindex="limits")
    max_pdf_bytes: int = _setting(200_000_000, "Larger PDFs are skipped with a warning (a PDF is "
                                               "read page by page, never whole into memory).", reindex="limits")
    convert_max_memory_mb: int = _setting(
        1024, "Memory (address space, in MB) the separate process that reads PDFs and web pages "
              "may use for one document; a document that needs more (a decompression bomb) is "
              "skipped with a warning. Enforced on Linux; elsewhere only `convert_timeout` applies.",
        check=lambda v: v >= 128, hint="a number of MB, at least 128", reindex="limits")
    convert_timeout: float = _setting(
        120, "Seconds one PDF or web page may take to be read; a slower one is skipped with a "
             "warning (its converter process is stopped and started again).",
        check=lambda v: v > 0, hint="a number of seconds, more than 0", reindex="limits")
    include: tuple[str, ...] = _setting(
        folder_globs(),  # every kind a folder indexes by default (hybrid.core.kinds)
        "Globs (vault-relative) of files to index; a vault may override. Markdown notes, PDFs "
        "(text per page), plain text, saved web pages (their main text), canvases (card by card), "
        "Excalidraw drawings (their text), Word files (by heading) and images (their text, by OCR) "
        "are read.", reindex="files")
    ocr: bool = _setting(
        True, "Read text in images and in scanned PDF pages with Tesseract (OCR; `bash scripts/ocr.sh` "
              "installs it). Off: images are not indexed and a PDF page without a text layer has no "
              "text. A vault may set its own.", reindex="files")
    ocr_languages: tuple[str, ...] = _setting(
        (), "Languages OCR reads, as ISO codes (`en`, `de`) or Tesseract's (`eng`, `chi_sim`), at most "
            "four; empty = English and the languages the vault's notes are in. Only those Tesseract "
            "has data for are used (Debian: `tesseract-ocr-deu` …). A vault may set its own.",
        check=lambda v: all(isinstance(x, str) and x.strip() and len(x) <= 16 for x in v),
        hint='a list like ["en", "de"]', reindex="rechunk")
    exclude: tuple[str, ...] = _setting((), "Globs of files to leave out; a vault may add its own.", reindex="files")
    exclude_sections: tuple[str, ...] = _setting(
        (), "Headings whose sections (subsections included) are left out of markdown notes and "
            "Excalidraw drawings before they are chunked: not searched, not in snippets, context "
            "or an agent's `get_note`. Matched on the heading's text, case and runs of spaces "
            "aside; `*` is any run of "
            "characters, `?` one (`Journal prompts*`). A vault may add its own.",
        check=lambda v: all(p.strip() for p in v),
        hint='a list of headings like ["Journal prompts", "Template*"] (none empty)', reindex="rechunk")
    exclude_blocks: tuple[str, ...] = _setting(
        (), "Languages of fenced code blocks left out of markdown notes and drawings before they "
            "are chunked, like `query`, `dataview`, `tasks` (Obsidian's embedded queries); the first word after "
            "the fence, case aside, `*` and `?` as in `exclude_sections`. A vault may add its own.",
        check=lambda v: all(p.strip() and len(p.split()) == 1 for p in v),
        hint='a list of code block languages like ["query", "dataview"] (one word each)', reindex="rechunk")
    fetch_private: bool = _setting(
        False, "Let `hybrid index --fetch` fetch bookmarked pages (or follow redirects) to loopback, "
               "private-network and other non-public addresses; link-local and cloud metadata "
               "addresses (169.254.169.254 …) are refused always.")
    rrf_k: float = _setting(10, "Reciprocal-rank-fusion constant k." + _FITTED)
    weight_lexical: float = _setting(1.0, "Weight of the BM25 ranking in fusion." + _FITTED)
    weight_vector: float = _setting(1.5, "Weight of the vector ranking in fusion." + _FITTED)
    lexical_unit: str = _setting(
        "section", "What BM25 ranks: `chunk` (each chunk alone), `section` (whole heading sections, a "
                "note without headings being one; hits cite the section's best chunk) or `both` "
                "(the two rankings fused).", choices=("chunk", "section", "both"))
    adaptive_fusion: bool = _setting(
        True, "Scale the BM25 weight by how much of the query's content words the best BM25 hits "
              "contain: full weight at 60 % or more, a tenth at 30 % or less (a question asked in "
              "other words than the notes use), so fusion does not lose to the vector arm.")
    candidates: int = _setting(
        100, "How many hits each arm contributes to fusion (hybrid eval ranks the top 100, so the "
             "same depth keeps it faithful).")
    fuzzy: bool = _setting(True, "Typo repair: a word of 5+ letters that no searched vault holds (as "
                                 "typed or by its stem) and no word list has is rewritten to its "
                                 "likeliest spelling, or only matched within one edit when in doubt.")
    spell_languages: tuple[str, ...] = _setting(
        ("en",), "Word lists whose words typo repair never rewrites, even when no vault holds them "
                 "(`bread` in a vault about servers): any of en, es, fr, de, pt, it, ru, nl, ar, eu, "
                 "fa, lv (shipped with pyspellchecker). The languages the searched vaults' notes are in "
                 "count too; empty = only the vaults' own words and languages count.",
        check=lambda v: set(v) <= set(SPELL_LANGUAGES), hint='a list like ["en", "de"]')
    stopwords: bool = _setting(True, "Drop English function words from free-text queries in the "
                                     "BM25 arm (never from phrases or the index).")
    exact_first: bool = _setting(
        True, "In hybrid mode, chunks containing every literal of the query (identifiers like "
              "`orders-created`, codes like `K7QX2M`) rank first, in fused order (BM25 order when "
              "the query is only literals).")
    recency_months: float = _setting(0, "Demote notes whose date (frontmatter, else file name, else mtime) is older "
                                        "than this many months (0 = off).")
    recency_penalty: float = _setting(0.1, "Fraction of the fused score taken off stale notes.")
    snippet_chars: int = _setting(300, "Length of the snippet shown with each hit.")
    duplicate_similarity: float = _setting(
        0.7, "Fold a hit into a better one whose text it resembles at least this much (Jaccard "
             "over 3-word shingles, 0-1): it is listed under that hit's `also_in` instead of "
             "taking a place of its own. 1 = only identical text (whitespace and case aside); "
             "0 = off.", check=lambda v: 0 <= v <= 1,
        hint="like 0.7 (a fraction from 0 to 1)")
    rerank_model: str = _setting(
        "", "Reranker for `--rerank`: `late` (late interaction over the bundled MiniLM; works "
            "offline after install), `ollama:<model>` (an LLM on the Ollama server), "
            "`rerank:<model>` (a `/rerank` API: see `rerank_base_url`), or a "
            "cross-encoder: a local directory or a model name already in the Hugging Face cache "
            "(empty = none).", empty_ok=True)
    rerank_top_n: int = _setting(30, "How many fused candidates the cross-encoder rescores.")
    ann_threshold: int = _setting(
        50_000, "Vectors per vault at which an approximate FAISS IVF index replaces the exact flat "
                "one (0 = always exact). Rebuilt automatically when the vault crosses it.", reindex="vectors")
    ann_recall: float = _setting(
        0.99, "Recall@10 against exact search that the IVF index's nprobe is calibrated to reach "
              "when it is built, as a fraction of what the stored codes allow (sq8 codes alone "
              "reach ~0.98); higher = slower queries.", check=lambda v: 0 < v <= 1,
        hint="like 0.99 (a fraction above 0, at most 1)", reindex="ann_build")
    hnsw_m: int = _setting(
        16, "PostgreSQL vaults: neighbours per node of the HNSW graph (pgvector's `m`, 2-100). "
            "More finds more of the exact top 10 at the same `ef_search`, for a slower build "
            "(measured at 300k vectors: 32 with `hnsw_ef_construction` 128 gave recall@10 0.97 "
            "in 56 ms where 16/64 gave 0.92 in 63, and built 4.2x slower).",
        check=lambda v: 2 <= v <= 100, hint="like 16 (2 to 100)", reindex="vectors")
    hnsw_ef_construction: int = _setting(
        64, "PostgreSQL vaults: candidates kept while the HNSW graph is built (pgvector's "
            "`ef_construction`, at most 1000; raised to twice `hnsw_m` when lower); higher = a "
            "better graph, a slower build.", check=lambda v: 4 <= v <= 1000, hint="like 64 (4 to 1000)",
        reindex="vectors")
    vector_storage: str = _setting(
        "float32", "How FAISS stores vectors: `float32`, `float16` (half the memory) or `sq8` "
                   "(8-bit scalar quantization, a quarter). Changing it rebuilds the vector index "
                   "from the catalog, without re-embedding.", choices=("float32", "float16", "sq8"), reindex="vectors")

    agent_exclude: tuple[str, ...] = _setting(
        (), "Globs (vault-relative, like `exclude`) of notes that agents never see: not in MCP or "
            "HTTP API search hits, `get_note`, counts or snippets. The owner's CLI still shows them "
            "(`--as-agent` shows what an agent sees). A vault may add its own.", reindex="agents")
    private_tags: tuple[str, ...] = _setting(
        ("private",), "Notes carrying one of these tags (or a nested child: `private/health`) are "
                      "never shown to agents; frontmatter `private: true` does the same for one note.",
        reindex="agents")
    redact_secrets: bool = _setting(
        True, "Replace credentials (cloud keys, tokens, private keys, passwords in URLs, "
              "`password: …` lines) with `[redacted secret]` in all text shown to agents.", reindex="agents")
    proposals_folder: str = _setting(
        "", "Vault-relative folder where agents may write new notes with the MCP tool "
            "`propose_note`, and nowhere else (empty = agents cannot write). `hybrid proposals` "
            "reviews them.", check=lambda v: _safe_folder(v), empty_ok=True,
            hint="a folder inside the vault, like 'agent_learnings' (no '..', no hidden part, none of "
                 "* \" \\ < > : | ? # ^ [ ], no name Windows reserves such as con or nul, no part ending in "
                 "a dot or space)", reindex="agents")
    agents_see_proposals: bool = _setting(
        False, "Let agents search and read unreviewed proposals (by default they never see them, "
               "so an agent never cites its own unreviewed text).", reindex="agents")
    proposal_max_chars: int = _setting(20_000, "Largest proposal an agent may write, in characters.",
                                       check=lambda v: v >= 1,
                                       hint="like 20000 (a whole number, at least 1)")
    audit_log: bool = _setting(
        True, "Append every agent call (tool, arguments, client, returned citations) to "
              "`audit.jsonl` in the data dir; `hybrid audit` shows it.")
    audit_max_mb: float = _setting(10, "Size at which the audit log rotates, in MB.",
                                   check=lambda v: v > 0, hint="like 10 (a number of MB, more than 0)")
    audit_keep: int = _setting(5, "How many rotated audit logs to keep.")
    http_header_timeout: float = _setting(
        10, "Seconds a client of `hybrid serve --http` has to send a request's head (from connecting, "
            "or from the previous answer); then its connection is closed.", check=lambda v: v > 0,
        hint="like 10 (a number of seconds, more than 0)")
    http_body_timeout: float = _setting(
        30, "Seconds a client of `hybrid serve --http` has to send a request's body, once its head "
            "is in; then it gets 408 and its connection is closed.", check=lambda v: v > 0,
        hint="like 30 (a number of seconds, more than 0)")

    def __post_init__(self) -> None:
        for f in fields(self):
            object.__setattr__(self, f.name, _checked(f, getattr(self, f.name)))

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], where: str,
                     base: Settings | None = None) -> Settings:
        """``base`` (default: the defaults) with ``values`` applied; ConfigError prefixed with
        ``where`` (the config file, or "override") for an unknown name or a bad value."""
        unknown = sorted(set(values) - set(NAMES))
        if unknown:
            raise ConfigError(f"{where}: unknown setting {unknown[0]!r} "
                              f"(known: {', '.join(sorted(NAMES))})")
        try:
            return dataclasses.replace(base or cls(), **values)
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None

    def as_dict(self) -> dict[str, Any]:
        """Every setting as a TOML/JSON-ready value (lists, not tuples)."""
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}

    def changed(self) -> dict[str, Any]:
        """The settings that differ from their defaults: what the config file needs to hold."""
        defaults = Settings().as_dict()
        return {k: v for k, v in self.as_dict().items() if v != defaults[k]}


# Windows refuses these as a file or folder name, alone or before a dot (con, NUL.txt, Com1)
_WINDOWS_RESERVED = frozenset({"CON", "PRN", "AUX", "NUL", *(f"{p}{n}" for p in ("COM", "LPT")
                                                         for n in "0123456789\u00b9\u00b2\u00b3")})
# characters Obsidian refuses in a name (* " \ < > : | ?) and those that break a link to a note
# inside the folder (# ^ [ ], which Obsidian warns about)
_NOT_IN_NAMES = '*"\\<>:|?#^[]'


def _safe_folder(value: str) -> bool:
    """A vault-relative folder with no way out (not absolute, no `..`, no hidden part) that
    Obsidian can show, link into and sync on every system: none of the characters it refuses in
    a name or that break a link (:data:`_NOT_IN_NAMES`), no control character, no line or
    paragraph separator, no name Windows reserves (``con``, ``nul``, ``com1``, also before a dot)
    and no part ending in a dot or space (Windows drops them)."""
    import unicodedata
    parts = value.strip("/").split("/")
    return value == "" or (not value.startswith("/") and not any(c in _NOT_IN_NAMES for c in value)
                           and not any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in value)
                           and all(p and p not in (".", "..") and not p.startswith(".") and p == p.strip()
                                   and not p.endswith(".")
                                   and p.split(".")[0].upper() not in _WINDOWS_RESERVED for p in parts))


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def replace(settings: Settings, **changes: Any) -> Settings:
    """``settings`` with ``changes`` applied and checked (ConfigError for an unknown name or a
    bad value). The one way code overrides a setting."""
    return Settings.from_mapping(changes, "override", settings)


# the rule a value of each type obeys, named in the error when the field has no hint of its own
# (by the field's annotation: "float" for rrf_k although its default is written 10)
_RULE = {"bool": "true or false", "int": "a whole number, 0 or more", "float": "a number, 0 or more",
         "tuple": "a list of strings", "str": "a non-empty string"}


def _checked(f: dataclasses.Field, value: Any) -> Any:
    """``value`` as field ``f`` stores it (a list becomes a tuple, an integral float an int),
    or ConfigError naming the rule."""
    default, meta = f.default, f.metadata
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, (int, float)):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0
        if ok and f.type == "int":
            ok = float(value).is_integer()
            value = int(value) if ok else value
    elif isinstance(default, tuple):
        ok = isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)
        value = tuple(value) if ok else value
    else:
        ok = isinstance(value, str) and (value != "" or meta["empty_ok"])
    if ok and meta["choices"]:
        ok = value in meta["choices"]
    if ok and meta["check"] is not None:
        ok = meta["check"](value)
    if not ok:
        shown = list(default) if isinstance(default, tuple) else default
        hint = meta["hint"] or (f"one of {', '.join(meta['choices'])}" if meta["choices"]
                                else f"like {shown!r} ({_RULE[str(f.type).split('[')[0]]})")
        got = "a value that is not one" if f.name.endswith("_key_env") else repr(value)  # a pasted key stays unsaid
        raise ConfigError(f"setting {f.name!r} must be {hint}, got {got}")
    return value


@dataclass(frozen=True)
class Setting:
    """One row of the documented table."""
    name: str
    default: Any
    help: str


SETTINGS: tuple[Setting, ...] = tuple(
    Setting(f.name, _plain(f.default), f.metadata["help"])
    for f in fields(Settings))
NAMES = tuple(s.name for s in SETTINGS)
