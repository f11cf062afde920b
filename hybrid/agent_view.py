"""The agent view: which notes an agent may see, and the text it is shown.

An agent (an MCP client, a caller of the HTTP API) searches a vault in which the notes it may
not see do not exist. Those are the notes matched by an ``agent_exclude`` glob, carrying a
``private_tags`` tag (or a nested child of one), with frontmatter ``private: true``, and
unreviewed proposals (the ``proposals_folder``, and notes an agent proposed that still say
``status: proposed``). Text it is shown has credentials replaced by ``[redacted secret]``.

Enforced in the engine, inside each arm, so no private note can surface through hits, ranks,
scores, snippets, counts, spelling corrections or a short result list:

- **lexical arm**: a second tantivy index (``lexical-agent/``, chunks and sections) holds only
  the visible notes, with their secrets already redacted. BM25's statistics (document count,
  document frequencies, average length) therefore come from the visible notes alone: an agent's
  scores and ranks are those of a vault in which the private notes were never written, and a
  secret's value cannot be searched for. It is rebuilt from the catalog (no re-embedding) when
  the view's settings change; its settings' fingerprint is kept in the catalog meta.
- **vector arm**: the FAISS search bans the chunk ids of hidden notes (a cosine score does not
  depend on other documents, so this is exact).
- **rows**: hydrated rows of hidden notes are dropped (defence in depth) and the text, heading
  and title of every row are redacted before any snippet, coverage or exact-first test sees them.

The hidden set is computed from the catalog (path, tags, frontmatter) with the settings in force
at query time, so a changed ``agent_exclude`` hides a folder at once, even before the agent index
is rebuilt.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import re
import threading
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import HybridError

if TYPE_CHECKING:
    from .catalog import Catalog, ChunkRow
    from .config import Vault
    from .lexical import LexicalIndex
    from .settings import Settings
    from .store import VaultStore

log = logging.getLogger("hybrid")
AGENT_LEXICAL = "lexical-agent"   # the agent index's folder, beside ``lexical/``
META_KEY = "agent_view"           # catalog meta: the fingerprint the agent index was built with
TRUE_WORDS = {"true", "yes", "on", "1"}


class AgentViewStale(HybridError):
    """The agent index does not match the agent settings and cannot be rebuilt right now."""


@dataclass(frozen=True)
class AgentView:
    """What an agent may see of one vault."""
    exclude: tuple[str, ...] = ()
    private_tags: tuple[str, ...] = ("private",)
    proposals_folder: str = ""
    see_proposals: bool = False
    redact: bool = True

    @classmethod
    def of(cls, vault: Vault, settings: Settings) -> AgentView:
        return cls(exclude=tuple(vault.agent_exclude),
                   private_tags=tuple(t.lower().lstrip("#").strip("/") for t in settings.private_tags),
                   proposals_folder=settings.proposals_folder.strip("/"),
                   see_proposals=settings.agents_see_proposals,
                   redact=settings.redact_secrets)

    @functools.cached_property
    def exclude_patterns(self) -> list[re.Pattern[str]]:
        """``agent_exclude`` as regexes, case-insensitive (hiding too much is the safe side on a
        case-insensitive file system). A bare folder name (``journal``) hides the folder."""
        from .notes import glob_to_regex
        out: list[re.Pattern[str]] = []
        for g in self.exclude:
            g = g.strip().lstrip("./").rstrip("/") if g.strip() not in ("**", "*") else g.strip()
            if not g:
                continue
            pats = [g] if any(c in g for c in "*?[") or g.endswith(".md") else [g, g + "/**"]
            out.extend(re.compile(glob_to_regex(p).pattern, re.IGNORECASE) for p in pats)
        return out

    def hides(self, path: str, tags: Iterable[str] = (), properties: dict | None = None) -> str | None:
        """Why the note at ``path`` is hidden from agents, or None when they may see it."""
        if any(r.match(path) for r in self.exclude_patterns):
            return "agent_exclude"
        props = {str(k).lower(): v for k, v in (properties or {}).items()}
        if not self.see_proposals:
            folder = self.proposals_folder
            if folder and path.lower().startswith(folder.lower() + "/"):
                return "proposal"
            if props.get("proposed_by") and str(props.get("status", "")).strip().lower() == "proposed":
                return "proposal"
        for t in tags:
            t = str(t).lower()
            if any(t == p or t.startswith(p + "/") for p in self.private_tags):
                return "private tag"
        if _truthy(props.get("private")):
            return "private"
        return None

    @functools.cached_property
    def fingerprint(self) -> str:
        """Changes whenever the agent index must be rebuilt: the settings above, and the
        redaction rules (detector version and project rule file)."""
        data = {"exclude": sorted(self.exclude), "tags": sorted(self.private_tags),
                "proposals": [self.proposals_folder, self.see_proposals],
                "redact": rules_version() if self.redact else None}
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:20]

    def sql_candidates(self) -> tuple[str, list[str]]:
        """A WHERE clause over ``files f`` that every note hidden for its tags or frontmatter
        satisfies (a cheap prefilter: the JSON is then parsed for those rows only)."""
        where, args = ["f.properties LIKE '%\"private\"%' COLLATE NOCASE",
                       "f.properties LIKE '%\"proposed_by\"%' COLLATE NOCASE"], []
        for t in self.private_tags:
            where.append("f.tags LIKE ? ESCAPE '\\'")
            args.append("%\"" + _like(t) + "%")
        return " OR ".join(where), args


@functools.lru_cache(maxsize=1)
def rules_version() -> str:
    """The detector's version and the project rule file's hash: when either changes, what is
    redacted may change, so the agent index is rebuilt."""
    from importlib import metadata

    from .redact import FILTER_REVISION, RULES_FILE
    try:
        version = metadata.version("kingfisher-secret-scanner")
    except metadata.PackageNotFoundError:
        version = "absent"
    return f"{version}:{FILTER_REVISION}:{hashlib.sha256(RULES_FILE.read_bytes()).hexdigest()[:12]}"


def agent_redactor():
    """The process's redactor. Its compiled rules (3-4 s to build) are cached in the user's
    cache folder, shared by every hybrid home: they hold no note text."""
    import platformdirs

    from .redact import redactor
    return redactor(Path(platformdirs.user_cache_dir("hybrid")) / "kingfisher")


def _truthy(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value == 1
    return isinstance(value, str) and value.strip().lower() in TRUE_WORDS


def _like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


# --- the hidden set --------------------------------------------------------------------------
def hidden_files(catalog: Catalog, view: AgentView) -> dict[int, str]:
    """``{file id: path}`` of every file (live or deleted) an agent may not see."""
    out: dict[int, str] = {}
    if view.exclude_patterns or (view.proposals_folder and not view.see_proposals):
        for fid, path in catalog.db.execute("SELECT id, path FROM files"):
            if view.hides(path):
                out[fid] = path
    where, args = view.sql_candidates()
    for fid, path, tags, props in catalog.db.execute(
            f"SELECT id, path, tags, properties FROM files f WHERE {where}", args):
        if fid not in out and view.hides(path, json.loads(tags), json.loads(props)):
            out[fid] = path
    return out


def hidden_chunk_ids(catalog: Catalog, file_ids: Iterable[int]) -> set[int]:
    """Every chunk id (live or dead: FAISS may still hold a replaced one) of ``file_ids``."""
    ids = list(file_ids)
    out: set[int] = set()
    for i in range(0, len(ids), 900):
        part = ids[i:i + 900]
        out.update(r[0] for r in catalog.db.execute(
            f"SELECT id FROM chunks WHERE file_id IN ({','.join('?' * len(part))})", part))
    return out


@dataclass
class Hidden:
    """The hidden notes of one vault at one catalog state, and the rows redacted for it."""
    files: dict[int, str]
    chunks: set[int]
    version: tuple
    rows: RowCache


# --- redaction of rows ------------------------------------------------------------------------
def redact_rows(catalog: Catalog, rows: Sequence[ChunkRow], redactor) -> list[ChunkRow]:
    """``rows`` with their text redacted as part of their whole note (a secret cut across two
    chunks is found in the note and removed from both), and their heading, title and aliases."""
    by_file: dict[int, list[ChunkRow]] = {}
    for r in rows:
        by_file.setdefault(r.file_id, []).append(r)
    notes = catalog.note_texts(list(by_file))
    out: dict[int, ChunkRow] = {}
    short: dict[str, str] = {}  # headings and titles repeat: each string is scanned once

    def field(text: str) -> str:
        if text not in short:
            short[text] = redactor.redact(text)
        return short[text]

    for fid, group in by_file.items():
        siblings = notes.get(fid, [])
        texts = dict(zip([i for i, _ in siblings], redactor.redact_parts([t for _, t in siblings])))
        for r in group:
            text = texts.get(r.id)
            if text is None:  # replaced since the search ran: judged alone
                text = redactor.redact(r.text)
            out[r.id] = replace(r, text=text, heading=field(r.heading), title=field(r.title),
                                aliases=[field(a) for a in r.aliases])
    return [out[r.id] for r in rows]


def visible(rows: Iterable[ChunkRow], view: AgentView) -> list[ChunkRow]:
    """The rows of notes an agent may see (judged on the row's own note: path, tags, frontmatter)."""
    verdict: dict[int, bool] = {}
    out = []
    for r in rows:
        ok = verdict.get(r.file_id)
        if ok is None:
            ok = verdict[r.file_id] = view.hides(r.path, r.tags, r.properties) is None
        if ok:
            out.append(r)
    return out


def agent_batches(catalog: Catalog, batches: Iterable[list[ChunkRow]], view: AgentView,
                  redactor) -> Iterator[list[ChunkRow]]:
    """The rows of ``batches`` an agent may see, redacted, in the same order."""
    for batch in batches:
        rows = visible(batch, view)
        yield redact_rows(catalog, rows, redactor) if (view.redact and rows) else rows


# --- keeping the agent index in step --------------------------------------------------------
def visible_counts(catalog: Catalog, view: AgentView) -> tuple[int, int]:
    """(notes, chunks) an agent may see: the live ones of notes not hidden."""
    notes, chunks = catalog.file_count(), catalog.chunk_count()
    ids = list(hidden_files(catalog, view))
    for i in range(0, len(ids), 900):
        part, marks = ids[i:i + 900], ",".join("?" * len(ids[i:i + 900]))
        notes -= catalog.db.execute(f"SELECT count(*) FROM files WHERE deleted=0 AND id IN ({marks})",
                                    part).fetchone()[0]
        chunks -= catalog.db.execute(f"SELECT count(*) FROM chunks WHERE dead=0 AND file_id IN ({marks})",
                                     part).fetchone()[0]
    return notes, chunks


def apply_journal(store: VaultStore, ids: Sequence[int], view: AgentView, redactor,
                  batch: int) -> None:
    """The agent index's share of a journal replay: delete ``ids``, add those live and visible."""
    def rows():
        for part in store.catalog.iter_chunks(ids, batch):
            yield [r for r in part if not r.dead]
    store.agent_lexical.apply(ids, agent_batches(store.catalog, rows(), view, redactor))


def current(store: VaultStore, view: AgentView) -> bool:
    """Whether the agent index was built with ``view``'s settings (else :func:`check` rebuilds
    it whole, and a journal replay into it would be wasted work)."""
    return store.catalog.get_meta(META_KEY) == view.fingerprint


def check(store: VaultStore, view: AgentView, redactor, batch: int) -> bool:
    """Rebuild the agent index from the catalog when it was built with other settings, holds
    another number of documents than the visible chunks, or carries deleted documents in its
    statistics (as the owner's index, see ``store._lexical_drifted``). Whether it was rebuilt."""
    from .store import LEXICAL_DRIFT, LEXICAL_EXACT_BELOW
    lex = store.agent_lexical
    want = visible_counts(store.catalog, view)[1]
    deleted = lex.deleted_docs()
    if not current(store, view):
        log.info("%s: building the agent view (agent settings changed)", store.directory.name)
    elif lex.count() != want or (want and not lex.section_count()):
        log.warning("%s: agent index out of step (%d docs, %d visible chunks); rebuilding",
                    store.directory.name, lex.count(), want)
    elif deleted and (want <= LEXICAL_EXACT_BELOW or deleted > LEXICAL_DRIFT * want):
        log.info("%s: compacting the agent index", store.directory.name)
    else:
        return False
    rebuild(store, view, redactor, batch)
    return True


def rebuild(store: VaultStore, view: AgentView, redactor, batch: int = 5000) -> None:
    store.catalog.set_meta(META_KEY, "")  # a crash mid-build leaves it marked stale
    store.agent_lexical.rebuild(agent_batches(store.catalog, store.catalog.iter_chunks(batch=batch),
                                              view, redactor))
    store.catalog.set_meta(META_KEY, view.fingerprint)


# --- the store as an agent sees it -------------------------------------------------------------
class AgentStore:
    """A :class:`~hybrid.store.VaultStore` seen through an :class:`AgentView`: what
    :func:`hybrid.search.run_search` reads (``lexical``, ``vector``, ``catalog``,
    ``embedder_id``), each filtered."""

    def __init__(self, store: VaultStore, view: AgentView, redactor, hidden: Hidden):
        self.store, self.view, self.hidden = store, view, hidden
        self.embedder_id = store.embedder_id
        arms = getattr(store, "agent_arms", None)  # a PostgreSQL store: hidden notes left out in SQL
        lexical, vector = arms(hidden.files, view) if arms else (store.agent_lexical, store.vector)
        self.lexical = _AgentLexical(lexical, hidden)
        self.vector = _AgentVector(vector, hidden)
        self.catalog = _AgentCatalog(store.catalog, view, hidden, redactor if view.redact else None,
                                     hidden.rows)


class _AgentLexical:
    """The agent index, its results also checked against the current hidden set (empty unless
    the settings changed since it was built: then nothing hidden gets out meanwhile)."""

    def __init__(self, lex: LexicalIndex | Any, hidden: Hidden):
        self._lex, self._hidden = lex, hidden.chunks
        self.stem = lex.stem

    def corrections(self, words):
        return self._lex.corrections(words)

    def search(self, q, limit, **opts):
        return [(i, s) for i, s in self._lex.search(q, limit, **opts) if i not in self._hidden]

    def search_units(self, q, limit, unit="chunk", **opts):
        return [(ids, s) for ids, s in self._lex.search_units(q, limit, unit=unit, **opts)
                if not self._hidden.intersection(ids)]

    def matching_ids(self, q, limit=1_000_000, **opts):
        return self._lex.matching_ids(q, limit, **opts) - self._hidden


class _AgentVector:
    def __init__(self, vector, hidden: Hidden):
        self._vector, self._hidden = vector, hidden.chunks

    @property
    def exact(self) -> bool:
        return self._vector.exact

    def count(self) -> int:
        return self._vector.count()

    def search(self, query, k, allowed=None, banned=()):
        banned = set(banned) | self._hidden if self._hidden else banned
        return self._vector.search(query, k, allowed, banned)


class _AgentCatalog:
    def __init__(self, catalog: Catalog, view: AgentView, hidden: Hidden, redactor, cache: RowCache):
        self._catalog, self._view, self._hidden, self._redactor = catalog, view, hidden, redactor
        self._cache = cache

    def filter_ids(self, folders=(), tags=(), since=None, among=None, sources=()) -> set[int]:
        return self._catalog.filter_ids(folders, tags, since, among, sources) - self._hidden.chunks

    def note_ids(self, folders=(), tags=(), since=None, sources=()) -> Iterator[int]:
        return (fid for fid in self._catalog.note_ids(folders, tags, since, sources)
                if fid not in self._hidden.files)

    def chunks(self, ids: Sequence[int]) -> dict[int, ChunkRow]:
        # judged again on each row's own note: a note made private while this search ran (its
        # chunks newer than the hidden set) is caught here, before any text is looked at
        rows = visible((r for r in self._catalog.chunks(ids).values()
                        if r.id not in self._hidden.chunks), self._view)
        if self._redactor is None:
            return {r.id: r for r in rows}
        done = {r.id: got for r in rows if (got := self._cache.get(r)) is not None}
        todo = [r for r in rows if r.id not in done]
        for r in redact_rows(self._catalog, todo, self._redactor) if todo else ():
            self._cache.put(r)
            done[r.id] = r
        return {r.id: done[r.id] for r in rows}


class RowCache:
    """Redacted rows by chunk id, for one catalog (ids are never reused in it: a chunk's text
    never changes under its id), the most recently used kept."""

    def __init__(self, size: int = 20_000):
        from collections import OrderedDict
        self._rows: OrderedDict[int, ChunkRow] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, row: ChunkRow) -> ChunkRow | None:
        with self._lock:
            got = self._rows.get(row.id)
            if got is not None and got.embed_hash == row.embed_hash and got.dead == row.dead:
                self._rows.move_to_end(row.id)
                return got
            return None

    def put(self, row: ChunkRow) -> None:
        with self._lock:
            self._rows[row.id] = row
            if len(self._rows) > self._size:
                self._rows.popitem(last=False)


class HiddenCache:
    """The hidden set per vault, recomputed only when the catalog or the view changed."""

    def __init__(self):
        self._lock = threading.Lock()
        self._by_vault: dict[str, Hidden] = {}

    def get(self, name: str, catalog: Catalog, view: AgentView) -> Hidden:
        version = (catalog.data_version(), view.fingerprint, id(catalog))
        with self._lock:
            got = self._by_vault.get(name)
            if got is None or got.version != version:
                files = hidden_files(catalog, view)
                # redacted rows stay good while the catalog file and the rules are the same
                same = got is not None and got.version[1:] == version[1:]
                rows = got.rows if same and got is not None else RowCache()
                got = Hidden(files, hidden_chunk_ids(catalog, files), version, rows)
                self._by_vault[name] = got
            return got


def base_catalog(store: Any) -> Catalog:
    """The catalog under ``store`` (an AgentStore's own VaultStore's), for SQL over columns
    that hold no note text; callers still leave out :func:`hidden_files`."""
    inner = getattr(store, "store", None)
    return (inner or store).catalog


def hidden_file_ids(store: Any) -> Collection[int]:
    """File ids ``store``'s reader may not see: an AgentStore's hidden notes, none otherwise."""
    hidden = getattr(store, "hidden", None)
    return hidden.files if hidden is not None else frozenset()
