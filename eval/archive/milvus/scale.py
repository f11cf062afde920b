"""Issue #52 feasibility, questions 5, 6 and 7 on milvus-lite: scalar filters inside a search
(folder prefix, tags, modified, JSON properties, id lists of 1k/10k/100k), the write side
(insert throughput, delete, upsert, counts right after writes) and search latency at scale
(vector search with each index type lite accepts, BM25, with and without filters).

Rows are synthetic and deterministic: a normalised random 384-d vector, ~100 words drawn from
obsidian-help's word frequencies and fed hex-encoded (as the backend would feed hybrid's
tokens), a folder f<0-9>/s<0-4>, 0-3 tags of t0..t29, a modified time, and JSON properties
{status, priority}.

    .venv/bin/python eval/archive/milvus/scale.py [--rows 100000] [--queries 50]   # JSON on stdout
    .venv/bin/python eval/archive/milvus/scale.py --rows 100000 --only-latency --indexes FLAT --sparse-ip
    .venv/bin/python eval/archive/milvus/scale.py --rows 1000000 --queries 20 --only-latency --indexes FLAT,IVF_FLAT
    .venv/bin/python eval/archive/milvus/scale.py --rows 1000000 --queries 20 --reuse --only-latency --no-bm25 \\
        --indexes FLAT,IVF_FLAT                                  # the same data, vector only
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np
from _study import SCRATCH, Timer, client, dump, err, fresh, hexy, paragraphs, pct, release, rss_mb, words
from pymilvus import DataType, Function, FunctionType

DIM = 384
STATUS = ["done", "todo", "doing"]


class Data:
    """Deterministic synthetic rows; row i is the same whatever the batch."""

    def __init__(self, seed: int = 7, sparse_ip: bool = False):
        self.sparse_ip = sparse_ip
        counts = Counter(w for p in paragraphs() for w in words(p["body"]))
        self.vocab = [hexy(w) for w, _ in counts.most_common()]
        f = np.array([c for _, c in counts.most_common()], dtype=np.float64)
        self.p = f / f.sum()
        self.seed = seed

    def batch(self, start: int, n: int) -> list[dict]:
        rng = np.random.default_rng([self.seed, start])
        vec = rng.standard_normal((n, DIM)).astype(np.float32)
        vec /= np.linalg.norm(vec, axis=1, keepdims=True)
        nw = rng.integers(80, 121, n)
        w = rng.choice(len(self.vocab), size=int(nw.sum()), p=self.p)
        out, k = [], 0
        for j in range(n):
            i = start + j
            text = " ".join(self.vocab[x] for x in w[k:k + nw[j]])
            tf = Counter(w[k:k + nw[j]].tolist())
            k += nw[j]
            spv = {int(x) + 1: f * 2.2 / (f + 1.2 * (0.25 + 0.75 * nw[j] / 100)) for x, f in tf.items()}
            out.append({"id": i, "vec": vec[j], "text": text, "folder": f"f{i % 10}/s{(i // 10) % 5}",
                        "tags": [f"t{(i * 7 + m * 11) % 30}" for m in range(i % 4)],
                        "tagstr": "".join(f"|t{(i * 7 + m * 11) % 30}|" for m in range(i % 4)),
                        "modified": 1.6e9 + (i * 7919 % 100_000) * 1000.0,
                        "props": {"status": STATUS[i % 3], "priority": i % 6}})
            if self.sparse_ip:
                out[-1]["spv"] = spv
        return out

    def query_vectors(self, n: int) -> np.ndarray:
        v = np.random.default_rng([self.seed, 10**12 + 1]).standard_normal((n, DIM)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    def query_sparse(self, n: int) -> list[dict[int, float]]:
        """The query_texts' words as {term id: idf-like weight} for the sparse IP field."""
        rng = np.random.default_rng([self.seed, 10**12 + 2])
        out = []
        for _ in range(n):
            ids = rng.integers(50, min(5000, len(self.vocab)), rng.integers(3, 6))
            out.append({int(x) + 1: float(-np.log(self.p[x])) for x in ids})
        return out

    def query_texts(self, n: int) -> list[str]:
        rng = np.random.default_rng([self.seed, 10**12 + 2])
        # 3-5 words, from the 50..5000 most frequent (skip stop-word-like heads)
        return [" ".join(self.vocab[x] for x in rng.integers(50, min(5000, len(self.vocab)), rng.integers(3, 6)))
                for _ in range(n)]


def create(c, name: str, index_type: str = "FLAT", params: dict | None = None, sparse_ip: bool = False):
    s = c.create_schema(auto_id=False)
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("vec", DataType.FLOAT_VECTOR, dim=DIM)
    s.add_field("text", DataType.VARCHAR, max_length=65_535, enable_analyzer=True)
    s.add_field("sp", DataType.SPARSE_FLOAT_VECTOR)
    s.add_field("folder", DataType.VARCHAR, max_length=512)
    s.add_field("tags", DataType.ARRAY, element_type=DataType.VARCHAR, max_capacity=64, max_length=256)
    s.add_field("tagstr", DataType.VARCHAR, max_length=4096)  # the same tags as "|t1||t5|", for LIKE
    s.add_field("modified", DataType.DOUBLE)
    s.add_field("props", DataType.JSON)
    s.add_function(Function(name="bm25", function_type=FunctionType.BM25,
                            input_field_names=["text"], output_field_names=["sp"]))
    ip = c.prepare_index_params()
    ip.add_index("vec", index_type=index_type, metric_type="IP", params={"params": params or {}})
    ip.add_index("sp", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25",
                 params={"params": {"bm25_k1": 1.2, "bm25_b": 0.75}})
    if sparse_ip:  # BM25 weights computed by the writer (bm25_parity.py q2_sparse_ip)
        s.add_field("spv", DataType.SPARSE_FLOAT_VECTOR)
        ip.add_index("spv", index_type="SPARSE_INVERTED_INDEX", metric_type="IP")
    c.create_collection(name, schema=s, index_params=ip)


def counts(c, name) -> dict:
    stats = c.get_collection_stats(name)["row_count"]
    q = c.query(name, filter="", output_fields=["count(*)"])[0]["count(*)"]
    return {"get_collection_stats": stats, "count(*)": q}


def disk_mb(path: str) -> int:
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file()) // 2 ** 20


# --- question 6: writes -----------------------------------------------------------------------
def write(c, path, name, data: Data, rows: int, batch: int) -> dict:
    out = {"rows": rows, "batch": batch, "memory before": rss_mb()}
    t_batches = []
    with Timer() as t:
        for start in range(0, rows, batch):
            b = data.batch(start, min(batch, rows - start))
            with Timer() as tb:
                c.insert(name, b)
            t_batches.append(tb.s)
            if start and start % 200_000 == 0:
                print(f"# inserted {start}", file=sys.stderr)
    out["insert total (s, incl. generating rows)"] = round(t.s, 1)
    out["insert calls only (s)"] = round(sum(t_batches), 1)
    out["rows/s (insert calls only)"] = round(rows / sum(t_batches))
    out["insert call per batch"] = pct(t_batches)
    out["counts right after insert"] = counts(c, name)
    with Timer() as t:
        c.flush(name)
    out["flush (s)"] = round(t.s, 2)
    out["counts after flush"] = counts(c, name)
    out["memory after insert + flush"] = rss_mb()
    out["disk (MB)"] = disk_mb(path)
    return out


def write_ops(c, name, data: Data, rows: int) -> dict:
    out = {}
    gone = list(range(0, rows, rows // 1000))[:1000]
    with Timer() as t:
        c.delete(name, ids=gone)
    out["delete 1,000 ids (s)"] = round(t.s, 3)
    out["counts right after delete"] = counts(c, name)
    out["get(deleted ids) right after delete"] = len(c.get(name, ids=gone[:10]))
    with Timer() as t:
        c.delete(name, filter='folder like "f9/s4%"')
    out["delete by filter folder like 'f9/s4%' (s)"] = round(t.s, 3)
    out["counts after delete by filter"] = counts(c, name)
    ups = data.batch(1, 1000)
    for r in ups:
        r["props"] = {"status": "upserted", "priority": 9}
    with Timer() as t:
        c.upsert(name, ups)
    out["upsert 1,000 existing ids (s)"] = round(t.s, 3)
    out["counts right after upsert of existing ids"] = counts(c, name)
    out["query props['status'] == 'upserted' right after"] = c.query(
        name, filter='props["status"] == "upserted"', output_fields=["count(*)"])[0]["count(*)"]
    new = data.batch(rows, 1000)
    c.upsert(name, new)
    out["counts right after upsert of 1,000 new ids"] = counts(c, name)
    c.insert(name, data.batch(rows, 10))
    out["counts after insert of 10 ids that already exist"] = counts(c, name)
    c.flush(name)
    out["counts after flush"] = counts(c, name)
    return out


# --- question 5: filters ----------------------------------------------------------------------
def meta(i: int) -> dict:
    """Row i's scalar fields, as Data.batch makes them."""
    return {"folder": f"f{i % 10}/s{(i // 10) % 5}", "tags": {f"t{(i * 7 + m * 11) % 30}" for m in range(i % 4)},
            "modified": 1.6e9 + (i * 7919 % 100_000) * 1000.0, "status": STATUS[i % 3], "priority": i % 6}


def filters(c, name, data: Data, rows: int, queries: int) -> dict:
    """Each filter: count(*) with it against the count computed here, then vector searches
    (limit 10) with it on a FLAT index: latency, and whether every search got its 10 hits."""
    c.release_collection(name)
    c.drop_index(name, "vec")
    ip = c.prepare_index_params()
    ip.add_index("vec", index_type="FLAT", metric_type="IP")
    c.create_index(name, ip)
    c.load_collection(name)
    rng = np.random.default_rng(3)
    exprs = {  # label: (expression, python predicate over meta(i), ids for "id in")
        "folder prefix": ('folder like "f3/%"', lambda m: m["folder"].startswith("f3/"), None),
        "not folder prefix": ('not (folder like "f3/%")', lambda m: not m["folder"].startswith("f3/"), None),
        "tag t5": ('array_contains(tags, "t5")', lambda m: "t5" in m["tags"], None),
        "tag t5 as LIKE on a VARCHAR": ('tagstr like "%|t5|%"', lambda m: "t5" in m["tags"], None),
        "tags all [t1, t12]": ('array_contains_all(tags, ["t1", "t12"])', lambda m: {"t1", "t12"} <= m["tags"], None),
        "tags any [t1, t2]": ('array_contains_any(tags, ["t1", "t2"])', lambda m: bool({"t1", "t2"} & m["tags"]), None),
        "modified >=": ("modified >= 1690000000.0", lambda m: m["modified"] >= 1.69e9, None),
        "json status": ('props["status"] == "done"', lambda m: m["status"] == "done", None),
        "json status, negated": ('not (props["status"] == "done")', lambda m: m["status"] != "done", None),
        "json priority range": ('props["priority"] >= 2 and props["priority"] < 4',
                                lambda m: 2 <= m["priority"] < 4, None),
        "folder + tags any + modified": (
            'folder like "f3/%" and array_contains_any(tags, ["t0", "t1", "t2", "t3", "t4"]) '
            'and modified >= 1650000000.0',
            lambda m: m["folder"].startswith("f3/") and bool({"t0", "t1", "t2", "t3", "t4"} & m["tags"])
            and m["modified"] >= 1.65e9, None),
        "text_match one hex word": (f'text_match(text, "{data.vocab[100]}")', None, None),
    }
    for n in (1_000, 10_000, 100_000):
        if n > rows:
            continue
        ids = sorted(rng.choice(rows, size=n, replace=False).tolist())
        exprs[f"id in [{n:,} ids] literal"] = (f"id in {ids}", None, ids)
        exprs[f"id in [{n:,} ids] template"] = ("id in {ids}", None, ids)
    metas = [meta(i) for i in range(rows)]
    qv = data.query_vectors(queries)
    out = {}
    for label, (expr, pred, ids) in exprs.items():
        kw = {"filter_params": {"ids": ids}} if "template" in label else {}
        res = {"expr chars": len(expr)}
        try:
            with Timer() as t:
                got = c.query(name, filter=expr, output_fields=["count(*)"], **kw)[0]["count(*)"]
            res["count(*) with filter"] = got
            res["count query (s)"] = round(t.s, 3)
            if pred or ids:
                res["expected"] = sum(map(pred, metas)) if pred else len(ids)
            lat, hits = [], []
            for k, q in enumerate(qv):
                with Timer() as t:
                    r = c.search(name, data=[q.tolist()], anns_field="vec", limit=10, filter=expr,
                                 output_fields=["id"], **kw)
                lat.append(t.s)
                hits.append(len(r[0]))
                if k >= 4 and sum(lat) > 5:  # slow filters: 5 searches are enough
                    break
            res["vector search with filter (FLAT)"] = pct(lat)
            res["min hits of 10"] = min(hits)
        except Exception as exc:
            res["error"] = err(exc)
        out[label] = res
        print(f"# filter {label} done", file=sys.stderr)
    return out


# --- question 7: latency ----------------------------------------------------------------------
# build params nested as params={"params": ...}: the plain form never reaches lite (bm25_parity.py)
INDEXES = {"FLAT": {}, "HNSW": {"M": 16, "efConstruction": 200}, "IVF_FLAT": {"nlist": 1024}}
SEARCH = {"FLAT": [{}], "HNSW": [{"ef": 64}, {"ef": 256}], "IVF_FLAT": [{"nprobe": 16}, {"nprobe": 64}]}


def index_types(c) -> dict:
    """Which index types lite builds on a FLOAT_VECTOR field: 2,000 rows inserted and flushed,
    then create_index + load_collection (lite builds a segment's index at load) + a search."""
    out = {}
    rng = np.random.default_rng(0)
    vecs = rng.standard_normal((2000, DIM)).astype(np.float32)
    s = c.create_schema(auto_id=False)
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("v", DataType.FLOAT_VECTOR, dim=DIM)
    c.create_collection("it", schema=s)
    c.insert("it", [{"id": i, "v": v} for i, v in enumerate(vecs)])
    c.flush("it")
    for it in ("FLAT", "IVF_FLAT", "IVF_SQ8", "IVF_PQ", "HNSW", "HNSW_SQ", "HNSW_PQ", "HNSW_PRQ",
               "DISKANN", "SCANN", "AUTOINDEX", "BIN_FLAT"):
        step = "create_index"
        try:
            c.release_collection("it")
            if c.list_indexes("it"):
                c.drop_index("it", "v")
            ip = c.prepare_index_params()
            ip.add_index("v", index_type=it, metric_type="IP",
                         params={"params": {"nlist": 16, "m": 8, "nbits": 8}} if "IVF" in it else {})
            c.create_index("it", ip)
            step = "load_collection"
            with Timer() as t:
                c.load_collection("it")
            step = "search"
            r = c.search("it", data=[vecs[0].tolist()], anns_field="v", limit=1)
            out[it] = f"built ({t.s:.2f} s for 2,000 rows); top hit of row 0's vector: {r[0][0]['id']}"
        except Exception as exc:
            out[it] = f"fails at {step}: {err(exc)}"
    c.drop_collection("it")
    return out


def vector_latency(c, name, data: Data, queries: int, filter_expr: str = "", indexes=tuple(INDEXES)) -> dict:
    qv = data.query_vectors(queries)
    truth_ids = None
    out = {"filter": filter_expr}
    for it in indexes:
        params = INDEXES[it]
        c.release_collection(name)
        c.drop_index(name, "vec")
        ip = c.prepare_index_params()
        ip.add_index("vec", index_type=it, metric_type="IP", params={"params": params})
        with Timer() as t_create:
            c.create_index(name, ip)
        with Timer() as t_load:
            c.load_collection(name)
        with Timer() as t_first:
            c.search(name, data=[qv[0].tolist()], anns_field="vec", limit=10, output_fields=["id"])
        res = {"describe_index params": c.describe_index(name, "vec").get("params"),
               "create_index (s)": round(t_create.s, 2), "load_collection (s)": round(t_load.s, 2),
               "first search (s)": round(t_first.s, 2)}
        for sp in SEARCH[it]:
            lat, got, filt, fhits = [], [], [], []
            for q in qv:
                with Timer() as t:
                    r = c.search(name, data=[q.tolist()], anns_field="vec", limit=10, output_fields=["id"],
                                 search_params={"params": sp})
                lat.append(t.s)
                got.append([h["id"] for h in r[0]])
            for q in qv[:20]:
                with Timer() as t:
                    r = c.search(name, data=[q.tolist()], anns_field="vec", limit=10, output_fields=["id"],
                                 filter=filter_expr, search_params={"params": sp})
                filt.append(t.s)
                fhits.append(len(r[0]))
            if it == "FLAT":
                truth_ids = got
            recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(got, truth_ids)])
            res[f"search {sp}"] = {"no filter": pct(lat), "with filter": pct(filt),
                                   "with filter: min hits of 10": min(fhits),
                                   "recall@10 vs FLAT": round(float(recall), 3)}
        res["memory"] = rss_mb()
        out[it] = res
        print(f"# vector {it} done", file=sys.stderr)
    return out


def sparse_ip_latency(c, name, data: Data, queries: int, filter_expr: str) -> dict:
    qs = data.query_sparse(queries)
    with Timer() as t_first:
        c.search(name, data=[qs[0]], anns_field="spv", limit=10, output_fields=["id"])
    out = {"first search (builds the per-segment postings) (s)": round(t_first.s, 2), "memory after": rss_mb()}
    for label, expr in (("no filter", ""), (f"filter {filter_expr!r}", filter_expr)):
        lat = []
        for q in qs:
            with Timer() as t:
                c.search(name, data=[q], anns_field="spv", limit=10, filter=expr, output_fields=["id"])
            lat.append(t.s)
        out[label] = pct(lat)
    return out


def bm25_latency(c, name, data: Data, queries: int, filter_expr: str) -> dict:
    qt = data.query_texts(queries)
    with Timer() as t_first:
        c.search(name, data=[qt[0]], anns_field="sp", limit=10, output_fields=["id"])
    out = {"first BM25 search (builds the per-segment inverted indexes) (s)": round(t_first.s, 2),
           "memory after": rss_mb()}
    for label, expr in (("no filter", ""), (f"filter {filter_expr!r}", filter_expr)):
        lat = []
        for q in qt:
            with Timer() as t:
                c.search(name, data=[q], anns_field="sp", limit=10, filter=expr, output_fields=["id"])
            lat.append(t.s)
        out[label] = pct(lat)
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--only-latency", action="store_true", help="skip the filter and write-op checks")
    ap.add_argument("--indexes", default="FLAT,HNSW,IVF_FLAT", help="vector index types to time (FLAT first)")
    ap.add_argument("--reuse", action="store_true", help="open the data an earlier run of --rows left (no insert)")
    ap.add_argument("--no-bm25", action="store_true", help="skip the BM25 latency (its index is built in memory)")
    ap.add_argument("--sparse-ip", action="store_true", help="also a writer-weighted sparse IP field, timed")
    args = ap.parse_args()
    data = Data(sparse_ip=args.sparse_ip)
    result = {"rows": args.rows}
    if args.reuse:
        path = str(SCRATCH / f"scale{args.rows}.db")
        with Timer() as t:
            c = client(path)
            c.load_collection("docs")
        result["reopened"] = {"open + load (s)": round(t.s, 1), "counts": counts(c, "docs"), "memory": rss_mb(),
                              "disk (MB)": disk_mb(path)}
    else:
        path = fresh(f"scale{args.rows}")
        c = client(path)
        if not args.only_latency:
            result["q7 index types accepted (FLOAT_VECTOR, IP)"] = index_types(c)
        create(c, "docs", sparse_ip=args.sparse_ip)
        result["q6 write"] = write(c, path, "docs", data, args.rows, args.batch)
    print("# write done", json.dumps(result), file=sys.stderr, flush=True)
    fexpr = 'folder like "f3/%" and modified >= 1650000000.0'
    if not args.no_bm25:
        result["q7 BM25"] = bm25_latency(c, "docs", data, args.queries, fexpr)
        print("# bm25 done", json.dumps(result["q7 BM25"]), file=sys.stderr, flush=True)
    if args.sparse_ip:
        result["q7 sparse IP (BM25 weights from the writer)"] = sparse_ip_latency(c, "docs", data, args.queries, fexpr)
    result["q7 vector"] = vector_latency(c, "docs", data, args.queries, fexpr, args.indexes.split(","))
    if not args.only_latency:
        result["q5 filters (vector search, limit 10)"] = filters(c, "docs", data, args.rows, args.queries)
        result["q6 delete / upsert / count"] = write_ops(c, "docs", data, args.rows)
    result["memory at end"] = rss_mb()
    release(path)
    dump(result)
