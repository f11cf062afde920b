"""The query pipeline: parse → lexical and vector arms per vault → merge → fuse → hits."""

from __future__ import annotations

import datetime as dt
import functools
import re
import time
import urllib.parse
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field, fields, replace
from typing import TYPE_CHECKING, Callable, Sequence

from . import fuse
from .catalog import ChunkRow
from .errors import QuerySyntaxError
from .lexical import LexicalQuery, literals
from .query import ParsedQuery

if TYPE_CHECKING:
    from .config import Vault
    from .store import VaultStore

MODES = ("lexical", "vector", "hybrid")


@dataclass
class Hit:
    """One ranked passage with everything needed to cite and open it."""
    vault: str
    path: str
    title: str
    heading_path: list[str]
    start_line: int
    end_line: int
    snippet: str
    score: float
    lexical_rank: int | None = None
    lexical_score: float | None = None
    vector_rank: int | None = None
    vector_score: float | None = None
    rerank_score: float | None = None
    tags: list[str] = field(default_factory=list)
    modified: str = ""
    uri: str = ""
    chunk_id: int = 0
    text: str = ""

    @property
    def heading(self) -> str:
        return " > ".join(self.heading_path)

    @property
    def citation(self) -> str:
        return f"{self.vault}:{self.path}:{self.start_line}-{self.end_line}"

    def to_dict(self) -> dict:
        return {**asdict(self), "citation": self.citation}

    @classmethod
    def from_dict(cls, data: dict) -> "Hit":
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def obsidian_uri(vault_folder: str, path: str) -> str:
    file = path[:-3] if path.lower().endswith(".md") else path
    return ("obsidian://open?vault=" + urllib.parse.quote(vault_folder, safe="")
            + "&file=" + urllib.parse.quote(file, safe=""))


_WORD_START = re.compile(r"(?<!\w).", re.S)


@functools.lru_cache(maxsize=16)
def _needle_index(needles: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """Needles of 2+ characters grouped by their first two characters (built once per query,
    not once per hit)."""
    out: dict[str, list[str]] = {}
    for n in needles:
        if len(n) >= 2:
            out.setdefault(n[:2], []).append(n)
    return {k: tuple(v) for k, v in out.items()}


def needle_hits(low: str, needles: Sequence[str]) -> list[tuple[int, str]]:
    """(position, needle) for every needle of 2+ characters that starts in ``low`` where no
    word character precedes it, in text order. One pass over the text: at each such position
    only the needles sharing its first two characters are tried (a regex per needle, compiled
    anew for every hit of a 1,000-word query, took seconds)."""
    by_prefix = _needle_index(tuple(sorted(set(needles))))
    hits: list[tuple[int, str]] = []
    for m in _WORD_START.finditer(low):
        pos = m.start()
        for n in by_prefix.get(low[pos:pos + 2], ()):
            if low.startswith(n, pos):
                hits.append((pos, n))
    return hits


def snippet(text: str, needles: Sequence[str], width: int = 300) -> str:
    """About ``width`` characters of ``text`` around the densest cluster of query words,
    cut at word boundaries, with ellipses where text was dropped."""
    flat = re.sub(r"\s+", " ", text).strip()
    if len(flat) <= width:
        return flat
    hits = needle_hits(flat.lower(), needles)
    start = 0
    if hits:
        best, j, counts = (-1, 0), 0, {}
        for i, (pos, n) in enumerate(hits):
            counts[n] = counts.get(n, 0) + 1
            while hits[j][0] < pos - width * 0.8:
                counts[hits[j][1]] -= 1
                if not counts[hits[j][1]]:
                    del counts[hits[j][1]]
                j += 1
            if len(counts) > best[0]:
                best = (len(counts), hits[j][0])
        start = max(0, best[1] - width // 6)
        start = min(start, max(0, len(flat) - width))
        if start:
            space = flat.find(" ", start)
            start = space + 1 if 0 <= space < start + 30 else start
    end = min(len(flat), start + width)
    if end < len(flat):
        space = flat.rfind(" ", start, end)
        end = space if space > start + width // 2 else end
    return ("…" if start else "") + flat[start:end].strip() + ("…" if end < len(flat) else "")


@dataclass
class SearchOptions:
    mode: str = "hybrid"
    top_k: int = 8
    folders: Sequence[str] = ()
    tags: Sequence[str] = ()
    since: float | None = None
    rerank: bool = False
    exclude_folders: Sequence[str] = ()


Rescorer = Callable[[str, Sequence[str]], list[float]]


def run_search(targets: Sequence[tuple["Vault", "VaultStore"]], parsed: ParsedQuery,
               opts: SearchOptions, settings: dict,
               query_vector: Callable[[str, str], "object"] | None,
               rescore: Rescorer | None = None) -> list[Hit]:
    """Run one parsed query over the given vault stores. ``query_vector(embedder_id, text)``
    returns the embedding of ``text`` for a vault's embedder (only called when the vector arm
    runs; on a worker thread, so the model's forward pass overlaps the lexical arm);
    ``rescore(query, passages)`` returns cross-encoder logits (only with ``opts.rerank``)."""
    if opts.mode not in MODES:
        raise QuerySyntaxError(f"unknown mode {opts.mode!r}: use one of {', '.join(MODES)}")
    folders = list(opts.folders) + parsed.folders
    tags = list(opts.tags) + parsed.tags
    since = parsed.since if parsed.since is not None else opts.since
    depth = max(settings["candidates"], opts.top_k)
    if settings["fuzzy"]:
        parsed = _spell(targets, parsed)
    lq = LexicalQuery(parsed.terms, parsed.phrases, parsed.excludes)
    lex_lists, vec_lists = [], []
    vectors: dict[str, Future] = {}
    if opts.mode in ("vector", "hybrid") and query_vector is not None:
        for _, store in targets:  # typo-corrected text: the model reads a misspelling as noise
            eid = store.embedder_id
            if eid and eid not in vectors:
                vectors[eid] = _embedding_pool().submit(query_vector, eid, parsed.text)
    needles = set(re.findall(r"\w[\w\-./]*\w|\w", parsed.text.lower()))
    for vault, store in targets:
        needles.update(store.lexical.stem.analyze(parsed.text))
        if opts.mode in ("lexical", "hybrid"):
            hits = store.lexical.search(lq, depth, fuzzy=settings["fuzzy"], folders=folders,
                                        tags=tags, since=since, stopwords=settings["stopwords"],
                                        exclude_folders=opts.exclude_folders)
            lex_lists.append([((vault.name, cid), s) for cid, s in hits])
        if opts.mode in ("vector", "hybrid") and store.embedder_id:
            banned: set[int] = set()
            if opts.exclude_folders:
                banned |= store.catalog.filter_ids(folders=opts.exclude_folders)
            for ex in parsed.excludes:
                banned |= store.lexical.matching_ids(LexicalQuery(phrases=[ex]))
            qvec = vectors[store.embedder_id].result()
            filtered = bool(folders or tags or since is not None)
            hits = None
            if filtered and not parsed.phrases:
                hits = _post_filtered(store, qvec, depth, banned, folders, tags, since)
            if hits is None:
                allowed = store.catalog.filter_ids(folders, tags, since) if filtered else None
                if parsed.phrases:
                    must = store.lexical.matching_ids(LexicalQuery(phrases=parsed.phrases))
                    allowed = must if allowed is None else allowed & must
                hits = store.vector.search(qvec, depth, allowed, banned)
            vec_lists.append([((vault.name, cid), s) for cid, s in hits])

    lex = fuse.merge_by_score(lex_lists, depth)
    vec = fuse.merge_by_score(vec_lists, depth)
    if opts.mode == "lexical":
        fused = lex
    elif opts.mode == "vector":
        fused = vec
    else:
        fused = fuse.rrf([[k for k, _ in lex], [k for k, _ in vec]], k=settings["rrf_k"],
                         weights=[settings["weight_lexical"], settings["weight_vector"]])
    rows = _hydrate(targets, [k for k, _ in fused])
    fused = [(k, s) for k, s in fused if k in rows]  # ids gone since the arms ran are dropped
    if opts.mode == "hybrid" and settings["exact_first"]:
        lits = literals(parsed.terms)
        lookup = bool(lits) and len(lits) == len(parsed.terms)
        fused = exact_first(fused, [k for k, _ in lex], rows, lits, lookup)
    if settings["recency_months"]:
        cutoff = time.time() - settings["recency_months"] * 30.44 * 86400
        penalties = {k: settings["recency_penalty"] for k, _ in fused if rows[k].modified < cutoff}
        fused = fuse.demote(fused, penalties)
    ce: dict = {}
    if opts.rerank and rescore is not None and fused:
        from .lexical import identifiers, is_compound
        from .rerank import blend, pinned
        depth = max(settings["rerank_top_n"], 1)
        head = fused[:depth]
        logits = rescore(parsed.text, [_passage(rows[k]) for k, _ in head])
        ce = {k: round(x, 6) for (k, _), x in zip(head, logits)}
        lits = parsed.phrases + [t for t in identifiers(" ".join(parsed.terms)) if is_compound(t)]
        keep = pinned(lits, [rows[k].text for k, _ in head])
        reranked = sorted(zip([k for k, _ in head], blend(logits, depth)), key=lambda kv: -kv[1])
        reranked = head[:keep] + [kv for kv in reranked if kv[0] not in dict(head[:keep])]
        fused = reranked + fused[len(head):]
    lex_rank, lex_score = fuse.ranks([k for k, _ in lex]), dict(lex)
    vec_rank, vec_score = fuse.ranks([k for k, _ in vec]), dict(vec)
    folder_names = {v.name: v.path.name for v, _ in targets}
    hits = []
    for key, score in fused[:opts.top_k]:
        r = rows[key]
        hits.append(Hit(
            vault=key[0], path=r.path, title=r.title,
            heading_path=r.heading.split(" > ") if r.heading else [],
            start_line=r.start_line, end_line=r.end_line,
            snippet=snippet(r.text, sorted(needles), settings["snippet_chars"]),
            score=round(float(score), 6),
            lexical_rank=lex_rank.get(key), lexical_score=_r(lex_score.get(key)),
            vector_rank=vec_rank.get(key), vector_score=_r(vec_score.get(key)),
            rerank_score=ce.get(key),
            tags=r.tags,
            modified=dt.datetime.fromtimestamp(r.modified).isoformat(timespec="seconds"),
            uri=obsidian_uri(folder_names[key[0]], r.path), chunk_id=r.id, text=r.text,
        ))
    return hits


_POOL = None


def _embedding_pool():
    """One worker thread for query embeddings (torch releases the GIL during the forward pass,
    so the lexical arm runs meanwhile)."""
    global _POOL
    if _POOL is None:
        from concurrent.futures import ThreadPoolExecutor
        _POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hybrid-query-embed")
    return _POOL


def _post_filtered(store, qvec, depth: int, banned: set[int], folders, tags, since):
    """A note filter that keeps many chunks is cheapest applied after the search: take the
    nearest ``10·depth`` (then ``40·depth``) chunks unfiltered and keep those the catalog says
    pass. Listing every passing id up front (hundreds of thousands in a big vault, per query)
    costs far more. Returns None when too few pass; the caller then searches with the full id
    list, which is what a selective filter needs anyway."""
    total = store.vector.count()
    for wide in (10 * depth, 40 * depth):
        cand = store.vector.search(qvec, wide, None, banned)
        keep = store.catalog.filter_ids(folders, tags, since, among=[i for i, _ in cand])
        got = [(i, s) for i, s in cand if i in keep]
        if len(got) >= depth:
            return got[:depth]
        if wide >= total and store.vector.exact:
            return got  # every vector was looked at: nothing more passes
    return None


def exact_first(fused, lex_keys, rows, lits: Sequence[str], lookup: bool = False):
    """Verbatim identifiers survive fusion: lexical hits whose text contains every literal of the
    query move above all others, their scores lifted by 1. Plain RRF would otherwise let
    semantically close notes outrank the one that names the thing. They keep their fused order,
    or BM25 order when the query is nothing but literals (a lookup, where term statistics and
    title/heading matches say more than similarity)."""
    if not lits:
        return fused
    needles = [x.lower() for x in lits]
    chosen = {k for k in lex_keys if k in rows and
              all(n in f"{rows[k].title}\n{rows[k].heading}\n{rows[k].text}".lower() for n in needles)}
    if not chosen:
        return fused
    score = dict(fused)
    order = [k for k in lex_keys if k in chosen] if lookup else [k for k, _ in fused if k in chosen]
    return [(k, 1.0 + score.get(k, 0.0)) for k in order] + [kv for kv in fused if kv[0] not in chosen]


def _passage(row: ChunkRow) -> str:
    """What the cross-encoder reads: where the chunk sits, then the chunk."""
    where = " > ".join(p for p in [row.title, row.heading] if p)
    return f"{where}\n{row.text}"


# A whole word of letters: `alpha17` or `snake_case` are identifiers, never "corrected".
WORD_RE = re.compile(r"(?<!\w)[^\W\d_]+(?!\w)")


def _spell(targets, parsed: ParsedQuery) -> ParsedQuery:
    """Replace misspelled free words by their correction, for both arms (the embedder reads
    a misspelling as unrelated word pieces). Words no vault can correct are left alone."""
    words = [w for t in parsed.terms for w in WORD_RE.findall(t)]
    fixes: dict[str, str] = {}
    for _, store in targets:
        for wrong, right in store.lexical.corrections(words).items():
            fixes.setdefault(wrong, right)
    if not fixes:
        return parsed
    terms = [WORD_RE.sub(lambda m: fixes.get(m.group(0).lower(), m.group(0)), t) for t in parsed.terms]
    return replace(parsed, terms=terms)


def _r(x: float | None) -> float | None:
    return None if x is None else round(float(x), 6)


def _hydrate(targets, keys) -> dict[tuple[str, int], ChunkRow]:
    by_vault: dict[str, list[int]] = {}
    for v, cid in keys:
        by_vault.setdefault(v, []).append(cid)
    out = {}
    for vault, store in targets:
        ids = by_vault.get(vault.name)
        if ids:
            out.update(((vault.name, cid), row) for cid, row in store.catalog.chunks(ids).items())
    return out
