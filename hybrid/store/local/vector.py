"""The vector arm: a FAISS inner-product index over L2-normalized vectors, keyed by chunk id.

Two layouts, chosen by size (``ann_threshold``):

- **flat** (exact): ``IndexIDMap2`` over a flat index. Every query scans every vector; below
  ~50k vectors that takes a millisecond or two and is exact.
- **ivf** (approximate): an inverted-file index whose ``nlist`` centroids come from spherical
  k-means on a sample; a query scans only the ``nprobe`` nearest lists. ``nprobe`` is calibrated
  when the index is built: the smallest value whose recall@10 against exact search, on queries
  made from the stored vectors, reaches ``ann_recall``. IVF (unlike HNSW) removes ids in place,
  so incremental updates need no rebuild; the index is retrained when the corpus has grown or
  shrunk 4× since training. The calibrated nprobe is doubled for the queries people actually
  type, which sit farther from every passage than synthetic ones (see ``build``).

Vectors are stored as float32, float16 or 8-bit scalar-quantized codes (``vector_storage``); the
catalog keeps the float32 originals, so any layout can be rebuilt without re-embedding.

The index file is replaced atomically (write to a temp file, fsync, rename), so a reader or a
crash sees either the old or the new index, never a torn one. Filters are honoured inside the
search (an id selector), not by truncating to top-k and filtering afterwards; with IVF, a filter
that keeps a fraction f of the vectors widens the probe to nprobe/f lists so the allowed
neighbours are still found.
"""

from __future__ import annotations

import math
import os
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from hybrid.core.errors import IndexCorrupt
from hybrid.store.base import CALIBRATION_QUERIES, NoteFilter, VectorSpec, calibration_queries
from hybrid.store.local.db import disk_full, is_disk_full

if TYPE_CHECKING:
    import numpy as np


STORAGES = ("float32", "float16", "sq8")
NPROBE_LADDER = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)
NPROBE_SAFETY = 2


def nlist_for(n: int) -> int:
    """Number of IVF lists for ``n`` vectors: the power of two nearest 2·√n (lists of ~√n/2
    vectors), at least 16."""
    return max(16, 2 ** round(math.log2(max(2.0 * math.sqrt(n), 1.0))))


def _qtype(storage: str):
    import faiss
    return {"float16": faiss.ScalarQuantizer.QT_fp16, "sq8": faiss.ScalarQuantizer.QT_8bit}[storage]


def describe(index) -> dict:
    """Layout of a loaded FAISS index: kind, storage, nlist, nprobe, bytes per vector."""
    import faiss
    if index is None:
        return {"kind": "none"}
    inner = faiss.downcast_index(index.index) if isinstance(index, faiss.IndexIDMap) else index
    if isinstance(inner, faiss.IndexIVF):
        storage = "float32" if isinstance(inner, faiss.IndexIVFFlat) else _storage_of(inner.sq)
        return {"kind": "ivf", "storage": storage, "nlist": int(inner.nlist),
                "nprobe": int(inner.nprobe), "code_size": int(inner.code_size)}
    storage = "float32" if isinstance(inner, faiss.IndexFlat) else _storage_of(inner.sq)
    return {"kind": "flat", "storage": storage, "code_size": int(inner.code_size)}


def _storage_of(sq) -> str:
    import faiss
    return "float16" if sq.qtype == faiss.ScalarQuantizer.QT_fp16 else "sq8"


def build(vecs: np.ndarray, ids: np.ndarray, spec: VectorSpec, seed: int = 1234):
    """A fresh index holding ``vecs`` under ``ids``, laid out for its size. Returns
    (index, info) where info records the layout and, for IVF, the calibrated recall."""
    import faiss
    import numpy as np
    n, dim = vecs.shape
    if spec.storage not in STORAGES:
        raise ValueError(f"vector_storage must be one of {', '.join(STORAGES)}")
    info: dict = {"trained_on": int(n)}
    if not spec.wants_ivf(n):
        if spec.storage == "float32":
            index = faiss.IndexIDMap2(faiss.IndexFlatIP(dim))
        else:
            sq = faiss.IndexScalarQuantizer(dim, _qtype(spec.storage), faiss.METRIC_INNER_PRODUCT)
            if n:
                sq.train(vecs)
            index = faiss.IndexIDMap2(sq)
        if n:
            index.add_with_ids(vecs, ids)
        info.update(describe(index))
        return index, info
    nlist = nlist_for(n)
    quantizer = faiss.IndexFlatIP(dim)
    if spec.storage == "float32":
        index = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
    else:
        index = faiss.IndexIVFScalarQuantizer(quantizer, dim, nlist, _qtype(spec.storage),
                                              faiss.METRIC_INNER_PRODUCT)
    index.own_fields = True
    quantizer.this.disown()
    index.cp.spherical = True  # centroids on the unit sphere, as the vectors are
    index.cp.niter = 12
    index.cp.min_points_per_centroid = 1  # small forced-IVF indexes: no stderr warning
    index.cp.seed = seed
    rng = np.random.default_rng(seed)
    sample = vecs if n <= 40 * nlist else vecs[np.sort(rng.choice(n, 40 * nlist, replace=False))]
    index.train(np.ascontiguousarray(sample))
    index.add_with_ids(vecs, ids)
    nprobe, info["calibrated_recall"], info["recall_ceiling"] = calibrate(
        index, vecs, ids, spec.ann_recall, rng)
    # Real queries sit farther from every passage than any synthetic one (obsidian-help: median
    # best cosine 0.37 vs 0.71), so they need more lists: there the calibrated nprobe gave
    # recall@10 0.936 and twice it 0.985 (eval/reports/speed/scale/report.md). Hence the factor of two.
    info["nprobe_calibrated"] = nprobe
    index.nprobe = min(index.nlist, NPROBE_SAFETY * nprobe)
    info.update(describe(index))
    return index, info


def recall_at(found: np.ndarray, truth: np.ndarray) -> float:
    """Mean fraction of each true top-k row found in the same row of ``found``."""
    hits = sum(len(set(f[f >= 0].tolist()) & set(t[t >= 0].tolist())) for f, t in zip(found, truth))
    return hits / max(1, int((truth >= 0).sum()))


def calibrate(index, vecs: np.ndarray, ids: np.ndarray, target: float, rng,
              k: int = 10) -> tuple[int, float, float]:
    """Smallest nprobe on the ladder whose recall@k against exact float32 search reaches
    ``target`` times the ceiling — the recall of probing every list, below 1 only when the
    stored codes are lossy (sq8: ~0.98). Returns (nprobe, measured recall, ceiling)."""
    import faiss
    q = calibration_queries(vecs, CALIBRATION_QUERIES, rng)
    _, rows = faiss.knn(q, vecs, k, metric=faiss.METRIC_INNER_PRODUCT)
    truth = ids[rows]
    ceiling = 1.0
    if not isinstance(index, faiss.IndexIVFFlat):
        index.nprobe = index.nlist
        ceiling = recall_at(index.search(q, k)[1], truth)
    for nprobe in NPROBE_LADDER:
        if nprobe >= index.nlist:
            break
        index.nprobe = nprobe
        rec = recall_at(index.search(q, k)[1], truth)
        if rec >= target * ceiling:
            return nprobe, round(rec, 4), round(ceiling, 4)
    index.nprobe = index.nlist
    return int(index.nlist), round(ceiling, 4), round(ceiling, 4)


class FaissIndex:
    hidden_files: frozenset[int] = frozenset()  # it leaves out no note itself

    def __init__(self, path: Path, dim: int | None = None):
        self.path = path
        self._index = None
        self._mtime: int | None = None
        self.dim = dim

    def _load(self):
        import faiss
        try:
            mtime = self.path.stat().st_mtime_ns
        except FileNotFoundError:
            self._index, self._mtime = None, None
            return None
        if self._index is None or mtime != self._mtime:
            try:
                self._index = faiss.read_index(str(self.path))
            except (RuntimeError, MemoryError, ValueError) as exc:
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[-1][:160]
                raise IndexCorrupt(f"{self.path}: cannot read the vector index ({first}); "
                                   f"run `hybrid index` to rebuild it from the catalog") from None
            self._mtime = mtime
            self.dim = self._index.d
        return self._index

    def count(self) -> int:
        idx = self._load()
        return 0 if idx is None else int(idx.ntotal)

    @property
    def exact(self) -> bool:
        """Whether a search looks at every vector (flat) rather than some lists (IVF)."""
        return self.layout()["kind"] != "ivf"

    def layout(self) -> dict:
        return describe(self._load())

    def needs_rebuild(self, n: int, spec: VectorSpec, trained_on: int | None) -> bool:
        """Whether an index for ``n`` vectors under ``spec`` should be rebuilt rather than
        patched: the storage changed, the size crossed the ANN threshold (with hysteresis: IVF
        is kept down to half the threshold), or a trained layout (IVF, SQ8) has grown or shrunk
        4× since it was trained."""
        lay = self.layout()
        if lay["kind"] == "none":
            return False
        if lay["storage"] != spec.storage:
            return True
        if lay["kind"] == "flat":
            if spec.wants_ivf(n):
                return True
            if spec.storage == "sq8" and trained_on is not None and n > 4 * max(trained_on, 256):
                return True
            return False
        if not spec.ann_threshold or n < spec.ann_threshold // 2:
            return True
        want = nlist_for(n)
        return not (want // 4 <= lay["nlist"] <= want * 4)

    def apply(self, removed: Iterable[int], added_ids: list[int], added_vecs: np.ndarray | None,
              dim: int, spec: VectorSpec = VectorSpec()) -> None:
        """Remove ``removed`` and ``added_ids``, add the new vectors, save atomically."""
        import numpy as np
        idx = self._load()
        drop = np.fromiter(set(removed) | set(added_ids), dtype=np.int64)
        if idx is None or idx.d != dim or not idx.is_trained:
            vecs = np.ascontiguousarray(added_vecs if added_ids else np.zeros((0, dim)), dtype=np.float32)
            idx, _ = build(vecs, np.asarray(added_ids, dtype=np.int64),
                           VectorSpec(spec.storage, 0, spec.ann_recall))
            self._save(idx)
            return
        if len(drop) and idx.ntotal:
            idx.remove_ids(drop)
        if added_ids:
            idx.add_with_ids(np.ascontiguousarray(added_vecs, dtype=np.float32),
                             np.asarray(added_ids, dtype=np.int64))
        self._save(idx)

    def rebuild(self, ids: list[int] | np.ndarray, vecs: np.ndarray, dim: int,
                spec: VectorSpec = VectorSpec()) -> dict:
        """Replace the index with one built from scratch for these vectors; returns its layout."""
        import numpy as np
        ids = np.asarray(ids, dtype=np.int64)
        vecs = np.ascontiguousarray(vecs, dtype=np.float32).reshape(len(ids), dim)
        idx, info = build(vecs, ids, spec)
        self._save(idx)
        return info

    def _save(self, idx) -> None:
        """Write to ``vectors.tmp``, fsync, rename over the index: readers and crashes see the
        old file or the new one. A failed write (disk full: DiskFull naming the folder) removes
        the partial temp file and leaves the old index in place."""
        import faiss
        tmp = self.path.with_suffix(".tmp")
        try:
            faiss.write_index(idx, str(tmp))
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except (RuntimeError, OSError) as exc:
            tmp.unlink(missing_ok=True)
            if is_disk_full(exc):
                raise disk_full(self.path, exc) from None
            raise
        self._index, self._mtime, self.dim = idx, self.path.stat().st_mtime_ns, idx.d

    def destroy(self) -> None:
        """Delete the index file and its temp file (nothing else): it is rebuilt from the
        catalog's cached vectors."""
        for p in (self.path, self.path.with_suffix(".tmp")):
            p.unlink(missing_ok=True)
        self._index, self._mtime = None, None

    filters_in_query = False  # note filters come as ids (the catalog knows the notes)

    def search(self, query: np.ndarray, k: int, allowed: Collection[int] | None = None,
               banned: Collection[int] = (), where: NoteFilter | None = None) -> list[tuple[int, float]]:
        """Top ``k`` (chunk id, cosine) pairs among ``allowed`` ids (default: all) minus
        ``banned`` ones (``where`` is not taken: ``filters_in_query`` is false)."""
        import faiss
        import numpy as np
        if where is not None:
            raise ValueError("the local vector index takes note filters as allowed ids, not `where`")
        idx = self._load()
        if idx is None or idx.ntotal == 0 or k <= 0:
            return []
        if query.shape[-1] != idx.d:
            raise IndexCorrupt(f"{self.path}: index has {idx.d}-d vectors, query has "
                               f"{query.shape[-1]}; run `hybrid index --reembed`")
        sel, keep = None, 1.0
        if allowed is not None:
            allowed = set(allowed) - set(banned)
            if not allowed:
                return []
            sel = faiss.IDSelectorBatch(np.fromiter(allowed, dtype=np.int64))
            keep = len(allowed) / idx.ntotal
        elif banned:
            inner = faiss.IDSelectorBatch(np.fromiter(banned, dtype=np.int64))
            sel = faiss.IDSelectorNot(inner)
            keep = max(0.0, 1.0 - len(banned) / idx.ntotal)
        params = None
        if isinstance(idx, faiss.IndexIVF):
            nprobe = idx.nprobe if keep >= 1.0 else min(idx.nlist, math.ceil(idx.nprobe / max(keep, 1e-9)))
            params = faiss.SearchParametersIVF(sel=sel, nprobe=nprobe)
            # one query at a time: its lists are scanned by every OpenMP thread (FAISS's default
            # splits the queries among them, which left one core idle; the same results, the
            # probe half the time at 100k chunks)
            idx.parallel_mode = 1
        elif sel is not None:
            params = faiss.SearchParameters(sel=sel)
        scores, ids = idx.search(query.reshape(1, -1).astype(np.float32), min(k, idx.ntotal),
                                 params=params)
        return [(int(i), float(s)) for i, s in zip(ids[0], scores[0]) if i >= 0]
