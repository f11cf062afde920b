"""The vector arm in Milvus: one collection of (chunk id, vector), searched by inner product
over L2-normalised vectors, so a score is the cosine, as the local FAISS index's
(:mod:`hybrid.store.local.vector`).

Two layouts, chosen by size as FAISS's are (:attr:`hybrid.store.base.VectorSpec.ann_threshold`):
**flat** (Milvus ``FLAT``: every vector scanned, exact) below it, and above it **ivf**
(``IVF_FLAT``, or ``IVF_SQ8`` for ``vector_storage = "sq8"``) with FAISS's number of lists
(:func:`hybrid.store.local.vector.nlist_for`) and the ``nprobe`` FAISS calibrates for them
(the smallest on the ladder whose recall@10 against exact search, on queries made from the
stored vectors, reaches ``ann_recall``, then doubled for real queries). IVF rather than
HNSW (Milvus Lite builds both, with FAISS): its one knob calibrates as the local index's does,
and it builds 8 times faster (4 s against 33 s at 100k vectors: eval/reports/milvus/
feasibility.md, Q7). Other storages are kept as float32. A rebuild fills a new generation and
moves the alias (:class:`hybrid.store.milvus.client.Generations`): readers see the old vectors
until the new ones are whole.

Note filters come as ids (``filters_in_query`` is false): ``allowed`` and ``banned`` become
``id in [...]`` / ``id not in [...]`` inside the search, never a trim of its results; with IVF a
filter that keeps a fraction f of the vectors probes nprobe/f lists, as FAISS's does.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Iterable
from typing import TYPE_CHECKING, Any

from hybrid.core.errors import IndexCorrupt
from hybrid.store.base import NoteFilter, VectorSpec
from hybrid.store.local.vector import nlist_for
from hybrid.store.milvus.client import MAX_TOPK, Generations, collection_name, create, id_list

if TYPE_CHECKING:
    import numpy as np
    from pymilvus import MilvusClient

LAYOUT_KEY = "hybrid.layout"
WRITE_ROWS = 2000


def ivf_storage(spec: VectorSpec) -> str:
    """How an IVF layout under ``spec`` stores its vectors (a flat one: always float32)."""
    return "sq8" if spec.storage == "sq8" else "float32"


def _index(spec: VectorSpec, n: int) -> tuple[str, str, dict[str, Any]]:
    """(kind, Milvus index type, its build parameters) for ``n`` vectors under ``spec``."""
    if not spec.wants_ivf(n):
        return "flat", "FLAT", {}
    return "ivf", "IVF_SQ8" if ivf_storage(spec) == "sq8" else "IVF_FLAT", {"nlist": nlist_for(n)}


class MilvusVector:
    """A vault's vector index in the collection ``prefix`` names."""

    hidden_files: frozenset[int] = frozenset()  # it leaves out no note itself
    filters_in_query = False  # note filters come as ids (the catalog knows the notes)

    def __init__(self, client: MilvusClient, prefix: str):
        self.client = client
        self.gens = Generations(client, collection_name(prefix, "vectors"))

    # --- reading ---------------------------------------------------------------------------
    def layout(self) -> dict[str, Any]:
        """The layout it was built with, in words (``{"kind": "none"}``: no index yet);
        IndexCorrupt when another version of hybrid wrote it."""
        return self._current()[1]

    def _current(self) -> tuple[str, dict[str, Any]]:
        """(the current collection, its layout)."""
        got = self.gens.read()
        if got is None:
            return self.gens.alias, {"kind": "none"}
        return got[0], json.loads(got[1].get(LAYOUT_KEY) or '{"kind": "none"}')

    @property
    def dim(self) -> int | None:
        return self.layout().get("dim")

    @property
    def exact(self) -> bool:
        """Whether a search looks at every vector (flat) rather than some lists (IVF)."""
        return self.layout()["kind"] != "ivf"

    def count(self) -> int:
        name, lay = self._current()
        if lay["kind"] == "none":
            return 0
        return int(self.client.query(name, filter="", output_fields=["count(*)"])[0]["count(*)"])

    def needs_rebuild(self, n: int, spec: VectorSpec, trained_on: int | None) -> bool:
        """Whether ``n`` vectors under ``spec`` want a rebuild rather than a patch, as FAISS's:
        the size crossed the ANN threshold (IVF is kept down to half of it), the lists are 4×
        too many or too few for the size, or IVF's storage changed."""
        lay = self.layout()
        if lay["kind"] == "none":
            return False
        if lay["kind"] == "flat":
            return spec.wants_ivf(n)
        if not spec.ann_threshold or n < spec.ann_threshold // 2:
            return True
        want = nlist_for(n)
        return lay["storage"] != ivf_storage(spec) or not (want // 4 <= lay["nlist"] <= want * 4)

    # --- writing ---------------------------------------------------------------------------
    def apply(self, removed: Iterable[int], added_ids: list[int], added_vecs: np.ndarray | None,
              dim: int, spec: VectorSpec) -> None:
        """Remove ``removed`` and ``added_ids``, then add ``added_vecs`` under ``added_ids``
        (an upsert: idempotent). No index yet, or one of another dimension: a flat one of the
        added vectors."""
        import numpy as np
        name, lay = self._current()
        if lay["kind"] == "none" or lay.get("dim") != dim:
            vecs = added_vecs if added_ids and added_vecs is not None else np.zeros((0, dim), dtype=np.float32)
            self.rebuild(added_ids, vecs, dim, VectorSpec(spec.storage, 0, spec.ann_recall))
            return
        if added_ids:
            self._write(name, added_ids, added_vecs, self.client.upsert)
        gone = sorted(set(removed) - set(added_ids))
        for i in range(0, len(gone), WRITE_ROWS):
            self.client.delete(name, ids=gone[i:i + WRITE_ROWS])

    def rebuild(self, ids: list[int] | np.ndarray, vecs: np.ndarray, dim: int, spec: VectorSpec) -> dict:
        """Replace every vector by these in a new generation, laid out as ``spec`` asks for
        their number; the layout, in words (calibrated for IVF)."""
        import numpy as np
        from pymilvus import DataType
        ids = np.asarray(ids, dtype=np.int64)
        vecs = np.ascontiguousarray(vecs, dtype=np.float32).reshape(len(ids), dim)
        kind, index_type, params = _index(spec, len(ids))
        name = self.gens.name(self.gens.next_number())
        schema = self.client.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("id", DataType.INT64, is_primary=True)
        schema.add_field("vec", DataType.FLOAT_VECTOR, dim=dim)
        index = self.client.prepare_index_params()
        # nested: pymilvus 3.0.2 flattens a flat dict into keys Milvus Lite ignores (it reads
        # "params" only: eval/reports/milvus/feasibility.md, finding 1)
        index.add_index("vec", index_type=index_type, metric_type="IP", params={"params": params} if params else {})
        create(self.client, name, schema, index)
        self._write(name, ids.tolist(), vecs, self.client.insert)
        self.client.flush(name)
        info: dict[str, Any] = {"kind": kind, "storage": ivf_storage(spec) if kind == "ivf" else "float32",
                                "dim": dim, "trained_on": int(len(ids)), **params}
        if kind == "ivf":
            info.update(self._calibrate(ids, vecs, spec))
        self.client.alter_collection_properties(name, properties={LAYOUT_KEY: json.dumps(info, sort_keys=True)})
        self.gens.loaded.add(name)
        self.gens.point(name)
        self.gens.prune()
        return info

    def _write(self, collection: str, ids: list[int], vecs: Any, send: Any) -> None:
        for i in range(0, len(ids), WRITE_ROWS):
            send(collection, [{"id": int(j), "vec": v} for j, v in
                              zip(ids[i:i + WRITE_ROWS], vecs[i:i + WRITE_ROWS].tolist())])

    @staticmethod
    def _calibrate(ids: np.ndarray, vecs: np.ndarray, spec: VectorSpec) -> dict[str, Any]:
        """The nprobe to search with, calibrated as the local index's is (its recall@10 against
        exact search reaches ``ann_recall``, then doubled), on a FAISS IVF of the same lists
        built here: Milvus builds its own after a flush, in the background (Milvus Lite answers
        exactly until it lands), so a calibration through it would measure the wrong index."""
        from hybrid.store.local.vector import build
        _, info = build(vecs, ids, spec)
        return {k: info[k] for k in ("nprobe", "nprobe_calibrated", "calibrated_recall", "recall_ceiling")}

    def destroy(self) -> None:
        """Drop every vector (they are rebuilt from the ledger's cache)."""
        self.gens.drop()

    # --- searching -------------------------------------------------------------------------
    def search(self, query: np.ndarray, k: int, allowed: Collection[int] | None = None,
               banned: Collection[int] = (), where: NoteFilter | None = None) -> list[tuple[int, float]]:
        """Top ``k`` (chunk id, cosine) pairs among ``allowed`` ids (default: all) minus
        ``banned`` ones (``where`` is not taken: ``filters_in_query`` is false)."""
        if where is not None:
            raise ValueError("the Milvus vector index takes note filters as allowed ids, not `where`")
        name, lay = self._current()
        if lay["kind"] == "none" or k <= 0:
            return []
        if query.shape[-1] != lay["dim"]:
            raise IndexCorrupt(f"Milvus collection {self.gens.alias} holds {lay['dim']}-d vectors, the "
                               f"query has {query.shape[-1]}; run `hybrid index --reembed`")
        expr, kept = "", None
        if allowed is not None:
            allowed = set(allowed) - set(banned)
            if not allowed:
                return []
            expr, kept = f"id in {id_list(sorted(allowed))}", len(allowed)
        elif banned:
            expr, kept = f"id not in {id_list(sorted(banned))}", -len(banned)
        params: dict[str, Any] = {"metric_type": "IP"}
        if lay["kind"] == "ivf":
            params["params"] = {"nprobe": self._nprobe(lay, kept)}
        hits = self.client.search(name, data=[query.reshape(-1).astype("float32").tolist()],
                                  anns_field="vec", limit=min(k, MAX_TOPK), filter=expr, search_params=params)
        return [(int(h["id"]), float(h["distance"])) for h in hits[0]]

    def _nprobe(self, lay: dict[str, Any], kept: int | None) -> int:
        """The lists an IVF search probes: the calibrated number, over the fraction of the
        vectors a filter keeps (``kept``: allowed ids, or minus the banned ones; None: all)."""
        if kept is None:
            return int(lay["nprobe"])
        total = max(1, self.count())
        keep = kept / total if kept > 0 else max(0.0, 1.0 + kept / total)
        return min(int(lay["nlist"]), math.ceil(lay["nprobe"] / max(keep, 1e-9)))
