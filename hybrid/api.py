"""The public Python API: ``hybrid.open()`` → :class:`Hybrid`."""

from __future__ import annotations

import datetime as dt
import logging
import re
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

from .config import Config, Vault, load_config, override
from .embed import Embedder, make_embedder, spec_id
from .errors import IndexCorrupt, PathRefused, VaultError
from .indexer import IndexReport, Progress, index_vault
from .query import parse_date, parse_query
from .search import Hit, SearchOptions, run_search
from .store import VaultStore

log = logging.getLogger("hybrid")
REF_RE = re.compile(r"^(?P<path>.+?)(?::(?P<start>\d+)(?:-(?P<end>\d+))?)?$")


@dataclass
class NoteText:
    vault: str
    path: str
    start_line: int
    end_line: int
    total_lines: int
    text: str

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class VaultStatus:
    name: str
    path: str
    exists: bool
    indexed: bool
    notes: int = 0
    chunks: int = 0
    embedder: str | None = None
    dim: int | None = None
    last_indexed: str | None = None
    pending: int = 0
    disk_bytes: int = 0
    vector_index: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


class Hybrid:
    """A handle on the configured vaults. Keeps embedders and open indexes warm between calls,
    so a long-lived process pays model loading once."""

    def __init__(self, config: Config):
        self.config = config
        self._embedders: dict[str, Embedder] = {}
        self._stores: dict[str, VaultStore] = {}
        self._rerankers: dict[str, object] = {}
        self._lock = threading.RLock()

    # --- vaults ---------------------------------------------------------------------------
    @property
    def vaults(self) -> list[Vault]:
        return self.config.all_vaults()

    def add_vault(self, path: str | Path, name: str | None = None, include: Sequence[str] = (),
                  exclude: Sequence[str] = ()) -> Vault:
        vault = self.config.add_vault(Path(path), name, list(include), list(exclude))
        self.config.save()
        return vault

    def remove_vault(self, name: str, purge: bool = True) -> Vault:
        vault = self.config.remove_vault(name)
        self.config.save()
        store = self._stores.pop(name, None)
        if store:
            store.close()
        if purge and vault.index_dir.exists():
            import shutil
            shutil.rmtree(vault.index_dir)
        return vault

    def embedder(self, spec: str) -> Embedder:
        with self._lock:
            key = spec_id(spec)
            if key not in self._embedders:
                s = self.config.settings
                self._embedders[key] = make_embedder(spec, ollama_host=s["ollama_host"],
                                                     batch_size=s["batch_size"])
            return self._embedders[key]

    # --- indexing -------------------------------------------------------------------------
    def index(self, vaults: Sequence[str] | None = None, *, reembed: bool = False, wait: float = 0,
              progress: Progress | None = None) -> list[IndexReport]:
        """Index the named vaults (default: all). Raises on the first vault that fails."""
        reports = []
        for vault in self.config.select(vaults):
            if reembed:  # the files behind an open store are about to be replaced wholesale
                with self._lock:
                    store = self._stores.pop(vault.name, None)
                    if store:
                        store.close()
            reports.append(index_vault(vault, self.embedder(vault.embedder), self.config.settings,
                                       reembed=reembed, wait=wait, progress=progress))
        return reports

    # --- querying -------------------------------------------------------------------------
    def _store(self, vault: Vault) -> VaultStore:
        with self._lock:
            store = self._stores.get(vault.name)
            if store is None:
                try:
                    store = VaultStore(vault.index_dir, create=False)
                except IndexCorrupt as exc:
                    if str(exc) == "not indexed yet":
                        raise VaultError(f"vault {vault.name!r} is not indexed yet: run "
                                         f"`hybrid index --vault {vault.name}`") from None
                    raise
                self._stores[vault.name] = store
            return store

    def search(self, query: str, *, top_k: int = 8, mode: str = "hybrid",
               vaults: Sequence[str] | None = None, folders: Sequence[str] = (),
               tags: Sequence[str] = (), since: str | float | None = None,
               rerank: bool = False, exclude_folders: Sequence[str] = ()) -> list[Hit]:
        """Search the named vaults (default: all) and return up to ``top_k`` hits, best first.
        ``rerank`` rescores the top fused candidates with the configured cross-encoder."""
        parsed = parse_query(query)
        if isinstance(since, str):
            since = parse_date(since)
        if top_k < 1:
            raise VaultError("top_k must be at least 1")
        targets = [(v, self._store(v)) for v in self.config.select(vaults)]
        # Resolved here, on the caller's thread: run_search embeds the query on a worker
        # thread, which must not need this handle's lock (held around run_search).
        embedders: dict[str, Embedder] = {}
        if mode in ("vector", "hybrid"):
            for vault, store in targets:
                eid = store.embedder_id
                if eid and eid not in embedders:
                    emb = self.embedder(vault.embedder)
                    if emb.id != eid:
                        from .errors import EmbedderMismatch
                        raise EmbedderMismatch(
                            f"vault {vault.name!r} was indexed with {eid}, but the configured "
                            f"embedder is {emb.id}; run `hybrid index --vault {vault.name} --reembed`")
                    embedders[eid] = emb

        def query_vector(embedder_id: str, text: str):
            return embedders[embedder_id].embed_query(text)

        opts = SearchOptions(mode=mode, top_k=top_k, folders=tuple(f.strip("/") for f in folders),
                             tags=tuple(t.lower().lstrip("#") for t in tags), since=since, rerank=rerank,
                             exclude_folders=tuple(f.strip("/") for f in exclude_folders))
        rescore = self.reranker().scores if rerank else None
        # One search at a time per handle: SQLite connections and the tantivy searcher are
        # shared, and a server calls this from several threads.
        with self._lock:
            return run_search(targets, parsed, opts, self.config.settings, query_vector, rescore)

    def reranker(self):
        """The configured cross-encoder (loaded once); ModelUnavailable names the setting."""
        from .rerank import Reranker
        spec = self.config.settings["rerank_model"]
        with self._lock:
            if spec not in self._rerankers:
                self._rerankers[spec] = Reranker(spec)
            return self._rerankers[spec]

    def get(self, ref: str, vault: str | None = None, start: int | None = None,
            end: int | None = None, max_chars: int | None = None) -> NoteText:
        """Read lines of a note from disk. ``ref`` is ``path`` or ``path:START-END``; anything
        that resolves outside the vault (``..``, absolute paths, symlinks out) is refused."""
        m = REF_RE.match(ref.strip())
        if not m:
            raise PathRefused(f"bad note reference {ref!r}: use PATH or PATH:START-END")
        path = m.group("path")
        if m.group("start"):
            start = int(m.group("start"))
            end = int(m.group("end") or m.group("start"))
        if vault is None:
            vaults = self.config.select(None)
            if len(vaults) > 1:
                names = ", ".join(v.name for v in vaults)
                raise VaultError(f"several vaults are registered ({names}): name one with --vault")
            v = vaults[0]
        else:
            v = self.config.vault(vault)
        root = v.path.resolve()
        if Path(path).is_absolute() or "\x00" in path:
            raise PathRefused(f"{path!r}: give a path relative to vault {v.name!r}")
        target = (root / path).resolve()
        if not target.is_relative_to(root) or target == root:
            raise PathRefused(f"{path!r} is outside vault {v.name!r}; refused")
        if not target.is_file():
            raise PathRefused(f"{path!r}: no such note in vault {v.name!r}")
        from .notes import decode
        text, _ = decode(target.read_bytes(), path)
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        s = max(1, start or 1)
        e = min(len(lines), end or len(lines))
        if s > e and lines:
            raise PathRefused(f"{path}: lines {s}-{e} are out of range (the note has {len(lines)} lines)")
        body = "\n".join(lines[s - 1:e])
        if max_chars is not None and len(body) > max_chars:
            body = body[:max_chars]
        return NoteText(v.name, target.relative_to(root).as_posix(), s, e, len(lines), body)

    def status(self) -> list[VaultStatus]:
        out = []
        for v in self.vaults:
            st = VaultStatus(v.name, str(v.path), v.path.is_dir(), (v.index_dir / "catalog.sqlite").exists())
            if st.indexed:
                from .catalog import Catalog
                cat = Catalog(v.index_dir / "catalog.sqlite", readonly=True)
                try:
                    st.notes, st.chunks = cat.file_count(), cat.chunk_count()
                    st.embedder = cat.get_meta("embedder")
                    st.dim = int(cat.get_meta("dim") or 0) or None
                    ts = cat.get_meta("last_indexed")
                    st.last_indexed = dt.datetime.fromtimestamp(float(ts)).isoformat(timespec="seconds") if ts else None
                    st.pending = len(cat.journal())
                    st.vector_index = _layout_text(cat.get_meta("vector_layout"), st.chunks)
                finally:
                    cat.close()
                st.disk_bytes = sum(p.stat().st_size for p in v.index_dir.rglob("*") if p.is_file())
            out.append(st)
        return out

    def close(self) -> None:
        with self._lock:
            for s in self._stores.values():
                s.close()
            self._stores.clear()


def _layout_text(meta: str | None, chunks: int) -> str:
    """`exact (flat, float32)` or `approximate (IVF 2048 lists, nprobe 24, float16, recall@10 0.992)`."""
    import json
    lay = json.loads(meta) if meta else {"kind": "flat", "storage": "float32"}
    if lay.get("kind") != "ivf":
        return f"exact (flat, {lay.get('storage', 'float32')})" if chunks else ""
    return (f"approximate (IVF {lay['nlist']} lists, nprobe {lay['nprobe']}, {lay['storage']}, "
            f"calibrated recall@10 {lay.get('calibrated_recall')})")


def open(home: str | Path | None = None, **settings) -> Hybrid:  # noqa: A001 - the public name
    """Open hybrid with the config under ``home`` (default: ``HYBRID_HOME`` or the platform
    config dir). Keyword arguments override settings for this handle only."""
    config = load_config(Path(home) if home is not None else None)
    override(config, **settings)
    return Hybrid(config)
