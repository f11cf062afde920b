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
import json
import logging
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hybrid.core.errors import HybridError
from hybrid.core.folding import fold  # paths, globs and tags are compared folded

if TYPE_CHECKING:
    from hybrid.core.config import Vault
    from hybrid.core.settings import Settings
    from hybrid.store.agent.vectors import Redacted
    from hybrid.store.base import ChunkRow
    from hybrid.store.ledger import Ledger

log = logging.getLogger("hybrid")
META_KEY = "agent_view"           # catalog meta: the fingerprint the agent index was built with
SETTINGS_KEY = "agent_settings"   # a shared ledger's meta: the view its indexer wrote (in_force)
FALSE_WORDS = {"", "false", "no", "off", "n", "0", "none", "null"}  # a `private` that says "not private"


class AgentViewStale(HybridError):
    """The agent index does not match the agent settings and cannot be rebuilt right now."""


# Bump when what :meth:`AgentView.hides` decides changes for the same settings (it feeds the
# fingerprint: an index built under older rules is brought in step before an agent is served).
# 4: a note with tags left out (markdown.TAGS_CUT); 5: a picture holding words of a hidden note
# (hybrid.indexing.context), and PostgreSQL's agent rows written with their tags redacted
PRIVACY_REVISION = 5


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

    def to_json(self) -> str:
        """The settings, as a shared ledger keeps them (:func:`in_force`)."""
        return json.dumps({"exclude": list(self.exclude), "private_tags": list(self.private_tags),
                           "proposals_folder": self.proposals_folder, "see_proposals": self.see_proposals,
                           "redact": self.redact,
                           "reach": [[r.vault, r.prefix, r.inside, list(r.exclude)] for r in self.reach]},
                          sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> AgentView:
        """The view :meth:`to_json` wrote (ValueError, KeyError or TypeError for anything else)."""
        d = json.loads(text)
        return cls(exclude=tuple(str(x) for x in d["exclude"]),
                   private_tags=tuple(str(x) for x in d["private_tags"]),
                   proposals_folder=str(d["proposals_folder"]), see_proposals=bool(d["see_proposals"]),
                   redact=bool(d["redact"]),
                   reach=tuple(Reach(str(n), str(p), bool(i), tuple(str(x) for x in ex))
                               for n, p, i, ex in d["reach"]))

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
        from hybrid.sources.markdown import FRONT_UNREADABLE, TAGS_CUT
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
        if TAGS_CUT in props:  # a private tag may be among those not indexed
            return f"too many tags: {props[TAGS_CUT]}"
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
        import hashlib
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:20]

    @property
    def by_path(self) -> bool:
        """Whether a note can be hidden for its path alone (so every path must be looked at)."""
        return bool(self.exclude_patterns or self._reach_patterns
                    or (self.proposals_folder and not self.see_proposals))

    def telling_keys(self) -> tuple[str, ...]:
        """The frontmatter keys whose presence may hide a note (``private``, ``proposed_by``,
        the mark of a front block that could not be read and that of tags left out): with
        :attr:`private_tags`, what the catalog looks for to find the notes this view may hide
        by their fields (:meth:`hybrid.store.port.Ledger.files_mentioning`)."""
        from hybrid.sources.markdown import FRONT_UNREADABLE, TAGS_CUT
        return ("private", "proposed_by", FRONT_UNREADABLE, TAGS_CUT)


_warned: set[tuple[str, str, str]] = set()
_warned_lock = threading.Lock()


def in_force(vault: Vault, settings: Settings, catalog: Ledger) -> AgentView:
    """The agent view a reader of ``vault`` follows: the one its indexer wrote into a shared
    ledger (a PostgreSQL vault: one truth for every server on it, so none re-indexes to
    impose its own), else this machine's settings (a local vault, or a shared one indexed
    before the ledger kept them). A server whose own settings differ says so once, as one
    warning line, and follows the ledger."""
    own = AgentView.of(vault, settings)
    stored = catalog.get_meta(SETTINGS_KEY)
    if not stored:
        return own
    try:
        shared = AgentView.from_json(stored)
    except (ValueError, KeyError, TypeError):
        log.warning("vault %s: the agent settings in its store cannot be read; this machine's apply "
                    "until the next `hybrid index`", vault.name)
        return own
    if shared != own:
        key = (vault.name, own.fingerprint, shared.fingerprint)
        with _warned_lock:
            first = key not in _warned
            _warned.add(key)
        if first:
            log.warning("vault %s: this machine's agent settings differ from those its indexer wrote "
                        "into the shared store (%s); following the store's (`hybrid index` where the "
                        "folder is makes that machine's the vault's)", vault.name, _difference(own, shared))
    return shared


def _difference(own: AgentView, shared: AgentView) -> str:
    """Which settings differ, as ``name here -> name in the store``."""
    names = {"exclude": "agent_exclude", "private_tags": "private_tags",
             "proposals_folder": "proposals_folder", "see_proposals": "agents_see_proposals",
             "redact": "redact_secrets", "reach": "overlapping vaults' agent_exclude"}
    return "; ".join(f"{label} {list(a) if isinstance(a, tuple) else a!r} here, "
                     f"{list(b) if isinstance(b, tuple) else b!r} in the store"
                     for field_, label in names.items()
                     if (a := getattr(own, field_)) != (b := getattr(shared, field_)))


def _patterns(globs: Iterable[str]) -> list[re.Pattern[str]]:
    """Agent-exclude globs as regexes over :func:`fold`-ed paths; a bare folder name hides the
    folder."""
    from hybrid.sources.walk import glob_to_regex
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
    import hashlib
    return f"{version}:{FILTER_REVISION}:{hashlib.sha256(RULES_FILE.read_bytes()).hexdigest()[:12]}"


def agent_redactor():
    """The process's redactor. Its compiled rules (3-4 s to build) are cached in the user's
    cache folder, shared by every hybrid home: they hold no note text."""
    import platformdirs

    from hybrid.store.agent.redact import redactor
    return redactor(Path(platformdirs.user_cache_dir("hybrid")) / "kingfisher")


def _truthy(value: Any) -> bool:
    """Whether a ``private`` property marks its note private. Only a clear no leaves it visible
    (nothing, ``false``, ``no``, ``off``, ``n``, ``0``, a list of those); any other value —
    ``true``, ``y``, ``[true]``, a list item ``- true``, ``maybe``, a mapping — hides it:
    privacy that can't be read as "no" fails closed."""
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value != 0
    if isinstance(value, str):
        return value.strip().lower() not in FALSE_WORDS
    if isinstance(value, list):
        return any(_truthy(x) for x in value)
    return True


# --- the hidden set --------------------------------------------------------------------------
def hidden_files(catalog: Ledger, view: AgentView) -> dict[int, str]:
    """``{file id: path}`` of every file (live or deleted) an agent may not see."""
    return {fid: path for fid, (path, _) in _verdicts(catalog, view).items()}


def hidden_report(catalog: Ledger, view: AgentView) -> dict[str, list[str]]:
    """The live notes hidden from agents, by why (``agent_exclude``, ``private tag``,
    ``private``, ``proposal``, ``front block unreadable``, …): for the owner's ``status``. A
    note whose front block is unreadable is listed as ``path (what is wrong with it)``."""
    out: dict[str, list[str]] = {}
    for path, why in _verdicts(catalog, view, live=True).values():
        reason, _, detail = why.split(" of vault ")[0].partition(": ")
        out.setdefault(reason, []).append(f"{path} ({detail})" if detail else path)
    return {k: sorted(v) for k, v in sorted(out.items())}


def _verdicts(catalog: Ledger, view: AgentView, live: bool = False) -> dict[int, tuple[str, str]]:
    """``{file id: (path, why it is hidden)}`` of the files (``live``: only those not deleted)
    an agent may not see."""
    out: dict[int, tuple[str, str]] = {}
    if view.by_path:
        for fid, path in catalog.file_paths(live):
            why = view.hides(path)
            if why:
                out[fid] = (path, why)
    for fid, path, tags, props in catalog.files_mentioning(view.telling_keys(), view.private_tags, live):
        if fid not in out and (why := view.hides(path, tags, props)):
            out[fid] = (path, why)
    if out:  # a picture holding words of a note hidden since (hybrid.indexing.context): until
        # the next index run leaves them out, the picture is hidden with it
        from hybrid.sources.markdown import LENT, context_sources
        gone = {path for path, _ in out.values()}
        for fid, path, _, props in catalog.files_mentioning(LENT, (), live):
            if fid not in out and (hit := sorted(context_sources(props) & gone)):
                out[fid] = (path, f"shown in a hidden note: {hit[0]}")
    return out


def hidden_chunk_ids(catalog: Ledger, file_ids: Iterable[int]) -> set[int]:
    """Every chunk id (live or dead: FAISS may still hold a replaced one) of ``file_ids``."""
    return catalog.chunk_ids_of(file_ids)


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
def redact_rows(catalog: Ledger, rows: Sequence[ChunkRow], redactor) -> list[ChunkRow]:
    """``rows`` with their text redacted as part of their whole note (a secret cut across two
    chunks is found in the note and removed from both), and their heading, title, aliases and
    tags (``#ghp_…`` is a tag too), and the values of their note's properties judged with their
    keys (:func:`hybrid.store.agent.values.shown_properties`: a bookmark's ``url``, a date)."""
    from hybrid.store.agent.values import shown_properties
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

    props: dict[int, str] = {}  # a note's rows share its properties (a canvas's hold all its cards)

    def properties(r: ChunkRow) -> str:
        if r.file_id not in props:
            props[r.file_id] = shown_properties(r.props, redactor) if r.props != "{}" else r.props
            props[r.file_id] = shown_context(props[r.file_id], field)
        return props[r.file_id]

    for fid, group in by_file.items():
        siblings = notes.get(fid, [])
        texts = dict(zip([i for i, _ in siblings], redactor.redact_parts([t for _, t in siblings])))
        # the note's rows share its tags and aliases: one redacted copy for all, not one a row
        aliases, tags = [field(a) for a in group[0].aliases], [field(t) for t in group[0].tags]
        for r in group:
            text = texts.get(r.id)
            if text is None:  # replaced since the search ran: judged alone
                text = redactor.redact(r.text)
            out[r.id] = replace(r, text=text, heading=field(r.heading), title=field(r.title),
                                aliases=aliases, tags=tags, props=properties(r))
    return [out[r.id] for r in rows]


def shown_context(props: str, redact: Callable[[str], str]) -> str:
    """A note's properties (JSON) with a picture's words from other files (the notes that show
    it, :data:`hybrid.sources.markdown.CONTEXT`; the headings of the pages before it,
    :data:`~hybrid.sources.markdown.CARRIED`: hybrid's own keys, so not judged as properties)
    redacted as any text an agent is shown; the same text when there are none."""
    from hybrid.sources.markdown import CARRIED, CONTEXT
    if CONTEXT not in props and CARRIED not in props:
        return props
    try:
        value = json.loads(props)
    except ValueError:  # unreadable: no words are read from it either (ChunkRow.properties)
        return props
    if not isinstance(value, dict):
        return props
    shown = dict(value)
    lines, heads = value.get(CONTEXT), value.get(CARRIED)
    if isinstance(lines, list):
        shown[CONTEXT] = [[e[0], redact(str(e[1]))] for e in lines if isinstance(e, list) and len(e) == 2]
    if isinstance(heads, list):
        shown[CARRIED] = [[e[0], redact(str(e[1])), *e[2:]] for e in heads if isinstance(e, list) and len(e) == 4]
    if shown == value:
        return props
    return json.dumps(shown, ensure_ascii=False)


def visible(rows: Iterable[ChunkRow], view: AgentView) -> list[ChunkRow]:
    """The rows of notes an agent may see (judged on the row's own note: path, tags, frontmatter;
    kept with a row a reader keeps, for this view's settings: :meth:`ChunkRow.derived`)."""
    verdict: dict[int, bool] = {}
    out = []
    key = ("shown to agents", view.fingerprint)

    def shown(r: ChunkRow) -> bool:
        return view.hides(r.path, r.tags, r.properties) is None
    for r in rows:
        ok = verdict.get(r.file_id)
        if ok is None:
            ok = verdict[r.file_id] = r.derived(key, shown)
        if ok:
            out.append(r)
    return out


def agent_batches(catalog: Ledger, batches: Iterable[list[ChunkRow]], view: AgentView,
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
def visible_counts(catalog: Ledger, view: AgentView) -> tuple[int, int]:
    """(notes, chunks) an agent may see: the live ones of notes not hidden."""
    hidden_notes, hidden_chunks = catalog.live_counts(hidden_files(catalog, view))
    return catalog.file_count() - hidden_notes, catalog.chunk_count() - hidden_chunks
