"""The vector arm: a FAISS inner-product index over L2-normalized vectors, keyed by chunk id.

The index file is replaced atomically (write to a temp file, fsync, rename), so a reader or a
crash sees either the old or the new index, never a torn one. Filters are honoured inside the
search (an id selector), not by truncating to top-k and filtering afterwards.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Collection, Iterable

from .errors import IndexCorrupt

if TYPE_CHECKING:
    import numpy as np


class VectorIndex:
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
            except RuntimeError as exc:
                raise IndexCorrupt(f"{self.path}: cannot read the vector index ({exc}); "
                                   f"run `hybrid index` to rebuild it") from None
            self._mtime = mtime
            self.dim = self._index.d
        return self._index

    def _empty(self, dim: int):
        import faiss
        return faiss.IndexIDMap2(faiss.IndexFlatIP(dim))

    def count(self) -> int:
        idx = self._load()
        return 0 if idx is None else int(idx.ntotal)

    def apply(self, removed: Iterable[int], added_ids: list[int], added_vecs: "np.ndarray | None",
              dim: int) -> None:
        """Remove ``removed`` and ``added_ids``, add the new vectors, save atomically."""
        import numpy as np
        idx = self._load()
        if idx is None or idx.d != dim:
            idx = self._empty(dim)
        drop = np.fromiter(set(removed) | set(added_ids), dtype=np.int64)
        if len(drop) and idx.ntotal:
            idx.remove_ids(drop)
        if added_ids:
            idx.add_with_ids(np.ascontiguousarray(added_vecs, dtype=np.float32),
                             np.asarray(added_ids, dtype=np.int64))
        self._save(idx)

    def rebuild(self, ids: list[int], vecs: "np.ndarray", dim: int) -> None:
        import numpy as np
        idx = self._empty(dim)
        if ids:
            idx.add_with_ids(np.ascontiguousarray(vecs, dtype=np.float32), np.asarray(ids, dtype=np.int64))
        self._save(idx)

    def _save(self, idx) -> None:
        import faiss
        tmp = self.path.with_suffix(".tmp")
        faiss.write_index(idx, str(tmp))
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)
        self._index, self._mtime, self.dim = idx, self.path.stat().st_mtime_ns, idx.d

    def search(self, query: "np.ndarray", k: int, allowed: Collection[int] | None = None,
               banned: Collection[int] = ()) -> list[tuple[int, float]]:
        """Top ``k`` (chunk id, cosine) pairs among ``allowed`` ids (default: all) minus
        ``banned`` ones."""
        import faiss
        import numpy as np
        idx = self._load()
        if idx is None or idx.ntotal == 0 or k <= 0:
            return []
        if query.shape[-1] != idx.d:
            raise IndexCorrupt(f"{self.path}: index has {idx.d}-d vectors, query has "
                               f"{query.shape[-1]}; run `hybrid index --reembed`")
        params = None
        if allowed is not None:
            allowed = set(allowed) - set(banned)
            if not allowed:
                return []
            ids_ = np.fromiter(allowed, dtype=np.int64)
            params = faiss.SearchParameters(sel=faiss.IDSelectorBatch(ids_))
        elif banned:
            ids_ = np.fromiter(banned, dtype=np.int64)
            inner = faiss.IDSelectorBatch(ids_)
            params = faiss.SearchParameters(sel=faiss.IDSelectorNot(inner))
        scores, ids = idx.search(query.reshape(1, -1).astype(np.float32), min(k, idx.ntotal),
                                 params=params)
        return [(int(i), float(s)) for i, s in zip(ids[0], scores[0]) if i >= 0]
