"""The agent view: which notes an agent may see, and the text it is shown.

An agent (an MCP client, a caller of the HTTP API) searches a vault in which the notes it may
not see do not exist. Those are the notes matched by an ``agent_exclude`` glob (this vault's, or
that of another registered vault whose folder holds this one or lies inside it: a folder hidden
from agents stays hidden whichever vault reaches it), carrying a ``private_tags`` tag (or a nested
child of one), with frontmatter ``private: true``, whose front block cannot be read (its privacy
cannot be known: fail closed), and unreviewed proposals (the ``proposals_folder``, and notes an
agent proposed that still say ``status: proposed``). Paths, globs and tags are compared in NFC
and case-folded, so ``Privé/**`` hides a folder a sync tool wrote decomposed, and ``#Личное``
is the tag ``личное``. Text it is shown has credentials replaced by ``[redacted secret]``; so
are the tags, titles and headings it is shown.

:meth:`AgentView.hides` is the one decision. It is applied to what the catalog recorded when
the note was indexed and, for a note read from disk (``get_note``) or one whose file changed
since it was indexed, to the file as it is now: a note made private after it was indexed is
hidden before the next index run.

Enforced in the engine, inside each arm, so no private note can surface through hits, ranks,
scores, snippets, counts, spelling corrections or a short result list:

- **lexical arm**: a second tantivy index (``lexical-agent/``, chunks and sections) holds only
  the visible notes, with their secrets already redacted. BM25's statistics (document count,
  document frequencies, average length) therefore come from the visible notes alone: an agent's
  scores and ranks are those of a vault in which the private notes were never written, and a
  secret's value cannot be searched for. It is rebuilt from the catalog (no re-embedding) when
  the view's settings change; its settings' fingerprint is kept in the catalog meta.
- **vector arm**: the FAISS search bans the chunk ids of hidden notes (a cosine score does not
  depend on other documents, so this is exact), and scores a chunk shown redacted by the vector
  of its redacted text (:mod:`hybrid.store.agent.vectors`).
- **rows**: hydrated rows of hidden notes are dropped (defence in depth) and the text, heading,
  title and tags of every row are redacted before any snippet, coverage or exact-first test sees
  them.

The hidden set is computed from the catalog (path, tags, frontmatter) with the settings in force
at query time, so a changed ``agent_exclude`` hides a folder at once, even before the agent index
is rebuilt. This module decides and keeps the agent index in step; :mod:`hybrid.store.agent.store`
is the store as an agent reads it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import re
import threading
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hybrid.core.errors import HybridError

if TYPE_CHECKING:
    from hybrid.store.agent.vectors import Redacted
    from hybrid.store.local.catalog import Catalog, ChunkRow
    from hybrid.core.config import Vault
    from hybrid.core.settings import Settings
    from hybrid.store.local.store import VaultStore

log = logging.getLogger("hybrid")
AGENT_LEXICAL = "lexical-agent"   # the agent index's folder, beside ``lexical/``
META_KEY = "agent_view"           # catalog meta: the fingerprint the agent index was built with
TRUE_WORDS = {"true", "yes", "on", "1"}


class AgentViewStale(HybridError):
    """The agent index does not match the agent settings and cannot be rebuilt right now."""


# Bump when what :meth:`AgentView.hides` decides changes for the same settings (it feeds the
# fingerprint: an index built under older rules is brought in step before an agent is served).
PRIVACY_REVISION = 2


def fold(text: str) -> str:
    """``text`` as the agent view compares paths, globs and tags: NFC, case-folded."""
    if text.isascii():
        return text.lower()
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", text).casefold())


@dataclass(frozen=True)
class Reach:
    """Another registered vault whose folder overlaps this vault's: its ``agent_exclude`` globs
    (and its proposals folder) apply to the notes of this vault that lie in its folder.
    ``inside``: this vault's folder lies inside the other's at ``prefix`` (a path ``p`` here is
    ``prefix + p`` there); else the other lies inside this one at ``prefix``."""
    vault: str
    prefix: str
    inside: bool
    exclude: tuple[str, ...]


@dataclass(frozen=True)
class AgentView:
    """What an agent may see of one vault."""
    exclude: tuple[str, ...] = ()
    private_tags: tuple[str, ...] = ("private",)
    proposals_folder: str = ""
    see_proposals: bool = False
    redact: bool = True
    reach: tuple[Reach, ...] = ()

    @classmethod
    def of(cls, vault: Vault, settings: Settings) -> AgentView:
        return cls(exclude=tuple(vault.agent_exclude),
                   private_tags=tuple(fold(t.lstrip("#").strip("/")) for t in settings.private_tags),
                   proposals_folder=settings.proposals_folder.strip("/"),
                   see_proposals=settings.agents_see_proposals,
                   redact=settings.redact_secrets,
                   reach=tuple(Reach(n, prefix, inside, tuple(ex))
                               for n, prefix, inside, ex in vault.agent_reach))

    @functools.cached_property
    def exclude_patterns(self) -> list[re.Pattern[str]]:
        """``agent_exclude`` as regexes over :func:`fold`-ed paths (hiding too much is the safe
        side on a case-insensitive file system). A bare folder name (``journal``) hides the folder."""
        return _patterns(self.exclude)

    @functools.cached_property
    def _reach_patterns(self) -> list[tuple[Reach, str, list[re.Pattern[str]]]]:
        out = []
        for r in self.reach:
            globs = list(r.exclude)
            if self.proposals_folder and not self.see_proposals:
                globs.append(self.proposals_folder + "/**")
            if globs:
                out.append((r, fold(r.prefix), _patterns(globs)))
        return out

    def hides(self, path: str, tags: Iterable[str] = (), properties: dict | None = None) -> str | None:
        """Why the note at ``path`` is hidden from agents, or None when they may see it. The
        one decision of the agent view: ``tags`` and ``properties`` are the note's as read."""
        from hybrid.sources.markdown import FRONT_UNREADABLE
        p = fold(path)
        if any(r.match(p) for r in self.exclude_patterns):
            return "agent_exclude"
        for reach, prefix, pats in self._reach_patterns:
            there = prefix + p if reach.inside else p[len(prefix):] if p.startswith(prefix) else None
            if there is not None and any(r.match(there) for r in pats):
                return f"agent_exclude of vault {reach.vault}"
        props = {str(k).lower(): v for k, v in (properties or {}).items()}
        if FRONT_UNREADABLE in props:
            return f"front block unreadable: {props[FRONT_UNREADABLE]}"
        if not self.see_proposals:
            folder = fold(self.proposals_folder)
            if folder and p.startswith(folder + "/"):
                return "proposal"
            if props.get("proposed_by") and str(props.get("status", "")).strip().lower() == "proposed":
                return "proposal"
        for t in tags:
            t = fold(str(t))
            if any(t == q or t.startswith(q + "/") for q in self.private_tags):
                return "private tag"
        if _truthy(props.get("private")):
            return "private"
        return None

    @functools.cached_property
    def fingerprint(self) -> str:
        """Changes whenever the agent index must be rebuilt: the settings above, the vaults
        that reach this one, what ``hides`` decides, and the redaction rules (detector version
        and project rule file)."""
        data = {"exclude": sorted(self.exclude), "tags": sorted(self.private_tags),
                "proposals": [self.proposals_folder, self.see_proposals],
                "reach": sorted([r.vault, r.prefix, r.inside, sorted(r.exclude)] for r in self.reach),
                "rules": PRIVACY_REVISION,
                "redact": rules_version() if self.redact else None}
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:20]

    @property
    def by_path(self) -> bool:
        """Whether a note can be hidden for its path alone (so every path must be looked at)."""
        return bool(self.exclude_patterns or self._reach_patterns
                    or (self.proposals_folder and not self.see_proposals))

    def sql_candidates(self) -> tuple[str, list[str]]:
        """A WHERE clause over ``files f`` that every note hidden for its tags or frontmatter
        satisfies (a cheap prefilter: the JSON is then parsed for those rows only). Tags are
        stored as JSON with non-ASCII characters escaped: a private tag that is not ASCII is
        looked for in every note with a non-ASCII tag (few), whatever its case or form."""
        from hybrid.sources.markdown import FRONT_UNREADABLE
        where, args = ["f.properties LIKE '%\"private\"%' COLLATE NOCASE",
                       "f.properties LIKE '%\"proposed_by\"%' COLLATE NOCASE",
                       f"f.properties LIKE '%\"{FRONT_UNREADABLE}\"%'"], []
        for t in self.private_tags:
            if t.isascii():
                where.append("f.tags LIKE ? ESCAPE '\\'")
                args.append("%\"" + _like(t) + "%")
        if not all(t.isascii() for t in self.private_tags):
            where.append("f.tags LIKE ? ESCAPE '\\'")
            args.append("%\\\\u%")
        return " OR ".join(where), args


def _patterns(globs: Iterable[str]) -> list[re.Pattern[str]]:
    """Agent-exclude globs as regexes over :func:`fold`-ed paths; a bare folder name hides the
    folder."""
    from hybrid.sources.markdown import glob_to_regex
    out: list[re.Pattern[str]] = []
    for g in globs:
        g = g.strip().lstrip("./").rstrip("/") if g.strip() not in ("**", "*") else g.strip()
        if not g:
            continue
        g = fold(g)
        pats = [g] if any(c in g for c in "*?[") or g.endswith(".md") else [g, g + "/**"]
        out.extend(re.compile(glob_to_regex(p).pattern, re.IGNORECASE) for p in pats)
    return out


@functools.lru_cache(maxsize=1)
def rules_version() -> str:
    """The detector's version and the project rule file's hash: when either changes, what is
    redacted may change, so the agent index is rebuilt."""
    from importlib import metadata

    from hybrid.store.agent.redact import FILTER_REVISION, RULES_FILE
    try:
        version = metadata.version("kingfisher-secret-scanner")
    except metadata.PackageNotFoundError:
        version = "absent"
    return f"{version}:{FILTER_REVISION}:{hashlib.sha256(RULES_FILE.read_bytes()).hexdigest()[:12]}"


def agent_redactor():
    """The process's redactor. Its compiled rules (3-4 s to build) are cached in the user's
    cache folder, shared by every hybrid home: they hold no note text."""
    import platformdirs

    from hybrid.store.agent.redact import redactor
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
    return {fid: path for fid, (path, _) in _verdicts(catalog, view).items()}


def hidden_report(catalog: Catalog, view: AgentView) -> dict[str, list[str]]:
    """The live notes hidden from agents, by why (``agent_exclude``, ``private tag``,
    ``private``, ``proposal``, ``front block unreadable``, …): for the owner's ``status``. A
    note whose front block is unreadable is listed as ``path (what is wrong with it)``."""
    out: dict[str, list[str]] = {}
    for path, why in _verdicts(catalog, view, live=True).values():
        reason, _, detail = why.split(" of vault ")[0].partition(": ")
        out.setdefault(reason, []).append(f"{path} ({detail})" if detail else path)
    return {k: sorted(v) for k, v in sorted(out.items())}


def _verdicts(catalog: Catalog, view: AgentView, live: bool = False) -> dict[int, tuple[str, str]]:
    """``{file id: (path, why it is hidden)}`` of the files (``live``: only those not deleted)
    an agent may not see."""
    out: dict[int, tuple[str, str]] = {}
    only = " WHERE deleted=0" if live else ""
    if view.by_path:
        for fid, path in catalog.db.execute(f"SELECT id, path FROM files{only}"):
            why = view.hides(path)
            if why:
                out[fid] = (path, why)
    where, args = view.sql_candidates()
    for fid, path, tags, props in catalog.db.execute(
            f"SELECT id, path, tags, properties FROM files f WHERE ({where}){' AND f.deleted=0' if live else ''}",
            args):
        if fid not in out and (why := view.hides(path, json.loads(tags), json.loads(props))):
            out[fid] = (path, why)
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
    on_disk: dict[int, tuple[int, int, bool]] = field(default_factory=dict)  # see stale_verdicts
    lock: threading.Lock = field(default_factory=threading.Lock)
    redacted: Redacted | None = None  # the chunks shown redacted (hybrid.store.agent.vectors)


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



# --- redaction of rows ------------------------------------------------------------------------
def redact_rows(catalog: Catalog, rows: Sequence[ChunkRow], redactor) -> list[ChunkRow]:
    """``rows`` with their text redacted as part of their whole note (a secret cut across two
    chunks is found in the note and removed from both), and their heading, title, aliases and
    tags (``#ghp_…`` is a tag too)."""
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
                                aliases=[field(a) for a in r.aliases], tags=[field(t) for t in r.tags])
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
                  redactor, redacted: list | None = None) -> Iterator[list[ChunkRow]]:
    """The rows of ``batches`` an agent may see, redacted, in the same order; the entries of
    those redaction changed (:func:`hybrid.store.agent.vectors.entries`) go to ``redacted``."""
    from hybrid.store.agent.vectors import entries, header_setting
    header = header_setting(catalog.get_meta("chunking"))
    for batch in batches:
        rows = visible(batch, view)
        shown = redact_rows(catalog, rows, redactor) if (view.redact and rows) else rows
        if redacted is not None and shown is not rows:
            redacted.extend(entries(rows, shown, header))
        yield shown


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
    redacted: list = []
    store.agent_lexical.apply(ids, agent_batches(store.catalog, rows(), view, redactor, redacted))
    store.catalog.set_redacted(redacted, drop=ids)


def current(store: VaultStore, view: AgentView) -> bool:
    """Whether the agent index was built with ``view``'s settings (else :func:`check` rebuilds
    it whole, and a journal replay into it would be wasted work)."""
    return store.catalog.get_meta(META_KEY) == view.fingerprint


def check(store: VaultStore, view: AgentView, redactor, batch: int) -> bool:
    """Rebuild the agent index from the catalog when it was built with other settings, holds
    another number of documents than the visible chunks, or carries deleted documents in its
    statistics (as the owner's index, see ``store._lexical_drifted``). Whether it was rebuilt."""
    from hybrid.store.local.store import LEXICAL_DRIFT, LEXICAL_EXACT_BELOW
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
    redacted: list = []
    store.agent_lexical.rebuild(agent_batches(store.catalog, store.catalog.iter_chunks(batch=batch),
                                              view, redactor, redacted))
    store.catalog.set_redacted(redacted)
    store.catalog.set_meta(META_KEY, view.fingerprint)
