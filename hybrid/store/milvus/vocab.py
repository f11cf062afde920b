"""The vocabulary of a lexical index in Milvus: each (field, term) of its units with the number
of chunks and of sections holding it, one row per sparse dimension
(:func:`hybrid.store.milvus.bm25.term_dim`).

It gives a query its idf (tantivy's, from exact document frequencies: counted up and down by
every write, so deleted documents never weigh on them), and serves the lookups tantivy makes in
its term dictionary: whether a word is held at all (``known``), and the identifier tokens one
edit away from a typo (fuzzy matching, ``corrections``). Those are picked in Milvus by length
and by letters one edit leaves in place (columns of their own), then tested one by one
(:func:`near`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from hybrid.store.milvus import client as milvus
from hybrid.store.milvus.bm25 import FIELDS, IDENT
from hybrid.store.milvus.client import id_list, literal

if TYPE_CHECKING:
    from pymilvus import MilvusClient

FIELD_CODE = {f: i for i, f in enumerate(FIELDS)}
DF = {"chunk": "df_chunk", "section": "df_section"}
TERM_BYTES = 2048   # a longer identifier (a data blob) is kept cut: never typed, never a typo
BATCH = 4096        # ids per lookup expression
ROW_FIELDS = ["id", "field", "term", "length", "c0", "c1", "p2", "s3", "df_chunk", "df_section"]


def create(client: MilvusClient, name: str) -> None:
    """An empty vocabulary collection ``name``. Milvus wants a vector field in every
    collection: ``v`` is a constant 2-d one, never searched."""
    from pymilvus import DataType
    s = client.create_schema(auto_id=False, enable_dynamic_field=False)
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("field", DataType.INT64)
    s.add_field("term", DataType.VARCHAR, max_length=TERM_BYTES)
    s.add_field("length", DataType.INT64)
    s.add_field("c0", DataType.VARCHAR, max_length=16)
    s.add_field("c1", DataType.VARCHAR, max_length=16)
    s.add_field("p2", DataType.VARCHAR, max_length=32)
    s.add_field("s3", DataType.VARCHAR, max_length=48)
    s.add_field("df_chunk", DataType.INT64)
    s.add_field("df_section", DataType.INT64)
    s.add_field("v", DataType.FLOAT_VECTOR, dim=2)
    index = client.prepare_index_params()
    index.add_index("v", index_type="FLAT", metric_type="IP")
    milvus.create(client, name, s, index)


def cut(term: str) -> str:
    """``term`` as the vocabulary keeps it (at most :data:`TERM_BYTES`)."""
    data = term.encode()
    return term if len(data) <= TERM_BYTES else data[:TERM_BYTES].decode("utf-8", "ignore")


def new_row(dim: int, field_name: str, term: str) -> dict[str, Any]:
    return {"id": dim, "field": FIELD_CODE[field_name], "term": cut(term), "length": len(term),
            "c0": term[:1], "c1": term[1:2], "p2": term[:2], "s3": term[-3:], "df_chunk": 0,
            "df_section": 0, "v": [1.0, 0.0]}


class Deltas:
    """Changes to document frequencies: per dimension, its (field, term) when known (a unit
    added) and its change per unit kind."""

    def __init__(self) -> None:
        self.keys: dict[int, tuple[str, str]] = {}
        self.change: dict[int, dict[str, int]] = {}

    def add(self, unit: str, dims: Iterable[int], sign: int, keys: dict[int, tuple[str, str]] | None = None) -> None:
        if keys:
            self.keys.update(keys)
        for d in dims:
            got = self.change.setdefault(d, {"chunk": 0, "section": 0})
            got[unit] += sign


def write(client: MilvusClient, collection: str, deltas: Deltas, *, fresh: bool = False) -> None:
    """Apply ``deltas`` to the vocabulary ``collection`` (``fresh``: it is empty, nothing to
    read first). A term no unit holds any more is deleted; counts never go below zero (a
    replayed removal of what was already removed)."""
    dims = list(deltas.change)
    for i in range(0, len(dims), BATCH):
        part = dims[i:i + BATCH]
        have = {} if fresh else {r["id"]: r for r in client.query(
            collection, filter=f"id in {id_list(part)}", output_fields=ROW_FIELDS)}
        put, drop = [], []
        for d in part:
            row = have.get(d)
            if row is None:
                if d not in deltas.keys:
                    continue  # removed, never counted
                row = new_row(d, *deltas.keys[d])
            row = {**row, "v": [1.0, 0.0]}
            for unit, column in DF.items():
                row[column] = max(0, int(row[column]) + deltas.change[d][unit])
            if row["df_chunk"] or row["df_section"]:
                put.append(row)
            elif d in have:
                drop.append(d)
        if put:
            (client.insert if fresh else client.upsert)(collection, put)
        if drop:
            client.delete(collection, ids=drop)


def lookup(client: MilvusClient, collection: str, dims: Iterable[int]) -> dict[int, dict[str, Any]]:
    """The rows of ``dims`` that some unit holds."""
    out: dict[int, dict[str, Any]] = {}
    dims = list(dict.fromkeys(dims))
    for i in range(0, len(dims), BATCH):
        for r in client.query(collection, filter=f"id in {id_list(dims[i:i + BATCH])}",
                              output_fields=ROW_FIELDS):
            out[int(r["id"])] = r
    return out


def near(client: MilvusClient, collection: str, word: str, unit: str) -> list[tuple[str, int]]:
    """(term, document frequency in ``unit``) of the identifier tokens that may be one edit
    from ``word`` (the caller tests each): a length within one of its, and letters the edit
    left in place. An edit at position 2 or later keeps the first two letters; one before
    keeps the letters from position 3 on, so the last three of a word of 6+; the candidates
    of a word of 2 to 5 start with its first or second letter, or have one of them second."""
    n = len(word)
    keep = ""
    if n >= 6:
        keep = f" and (p2 == {literal(word[:2])} or s3 == {literal(word[-3:])})"
    elif n >= 2:
        pick = ", ".join(literal(c) for c in dict.fromkeys(word[:2]))
        keep = f" and (c0 in [{pick}] or c1 in [{pick}])"
    expr = (f"field == {FIELD_CODE[IDENT]} and length >= {n - 1} and length <= {n + 1} and "
            f"{DF[unit]} > 0{keep}")
    return [(str(r["term"]), int(r[DF[unit]]))
            for r in client.query(collection, filter=expr, output_fields=["term", DF[unit]])]
