"""Issue #52 feasibility, small probes on milvus-lite: which analyzers a BM25 field accepts and
what each does to text (question 1); feeding hybrid's own tokens whole (hex / base32); token
and VARCHAR length limits; term-hash collisions; text_match / phrase_match as filters
(question 4); what filter expressions mean at their edges (question 5: LIKE wildcards and
escapes, missing JSON keys, empty arrays); insert() of an existing id (question 6); whether
index build parameters arrive (question 7); collection properties and descriptions as a place
for a schema version (question 9).

    .venv/bin/python eval/archive/milvus/probes.py          # ~30 s; JSON on stdout
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys

from _study import b32, client, dump, encode, err, fresh, hexy, paragraphs, release, words
from pymilvus import DataType, Function, FunctionType

DOC = "The Running dogs ran to 10.0.0.0/24 with --advertise-routes; 保管庫 ABCdef Kelvin"
PROBES = ["running", "run", "ran", "the", "abcdef", "10", "24", "advertise", "保管", "保管庫", "kelvin"]


def bm25_collection(c, name, analyzer_params="default", max_length=4096, enable_match=False):
    s = c.create_schema(auto_id=False)
    s.add_field("id", DataType.INT64, is_primary=True)
    kw = {"enable_analyzer": True, "enable_match": enable_match}
    if analyzer_params != "default":
        kw["analyzer_params"] = analyzer_params
    s.add_field("text", DataType.VARCHAR, max_length=max_length, **kw)
    s.add_field("sp", DataType.SPARSE_FLOAT_VECTOR)
    s.add_function(Function(name="bm25", function_type=FunctionType.BM25,
                            input_field_names=["text"], output_field_names=["sp"]))
    ip = c.prepare_index_params()
    ip.add_index("sp", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25",
                 params={"bm25_k1": 1.2, "bm25_b": 0.75})
    c.create_collection(name, schema=s, index_params=ip)


def hits(c, name, query_text, limit=50):
    r = c.search(name, data=[query_text], anns_field="sp", limit=limit, output_fields=["id"])
    return {h["id"]: round(-h["distance"], 4) for h in r[0]}


def q1_analyzers():
    """Each analyzer_params: accepted or refused (message); if accepted, which probe words
    find DOC (a score > 0)."""
    path = fresh("analyzers")
    c = client(path)
    candidates = {
        "none given": "default",
        "standard": {"tokenizer": "standard"},
        "jieba": {"tokenizer": "jieba"},
        "jieba exact (dict form)": {"tokenizer": {"type": "jieba", "mode": "exact"}},
        "whitespace": {"tokenizer": "whitespace"},
        "icu": {"tokenizer": "icu"},
        "type english": {"type": "english"},
        "type chinese": {"type": "chinese"},
        "standard + lowercase filter": {"tokenizer": "standard", "filter": ["lowercase"]},
        "standard + stemmer filter": {"tokenizer": "standard",
                                      "filter": [{"type": "stemmer", "language": "english"}]},
        "standard + stop filter [the]": {"tokenizer": "standard",
                                         "filter": [{"type": "stop", "stop_words": ["the"]}]},
        "standard + length filter max 5": {"tokenizer": "standard", "filter": [{"type": "length", "max": 5}]},
    }
    out = {}
    for i, (label, params) in enumerate(candidates.items()):
        name = f"a{i}"
        try:
            bm25_collection(c, name, params)
            c.insert(name, [{"id": 1, "text": DOC}])
        except Exception as exc:
            out[label] = {"accepted": False, "error": err(exc)}
            continue
        found = {p: bool(hits(c, name, p)) for p in PROBES}
        out[label] = {"accepted": True, "probe words that find the doc": [p for p, ok in found.items() if ok],
                      "probe words that do not": [p for p, ok in found.items() if not ok]}
    try:
        c.run_analyzer("a b", analyzer_params={"tokenizer": "standard"})
        out["run_analyzer"] = "works"
    except Exception as exc:
        out["run_analyzer"] = err(exc)
    release(path)
    return out


TRICKY = ["run", "Run", "RUN", "10.0.0.0/24", "10", "0", "24", "--advertise-routes", "advertise",
          "保管", "管庫", "\u212a", "k", "ß", "ss", "İ", "i̇", "e\u0301", "é", "a_b", "a", "b",
          "🙂", "x" * 40, "x" * 41, "error[E0502]", "pg_try_advisory_lock(42001)"]


def q1_encodings():
    """One document per tricky token, fed raw, hex and base32; every token queried in the
    same encoding: ok when it finds exactly its own document."""
    path = fresh("encodings")
    c = client(path)
    out = {}
    for label, enc in (("raw", lambda t: t), ("hex", hexy), ("base32", b32)):
        bm25_collection(c, label)
        c.insert(label, [{"id": i, "text": enc(t)} for i, t in enumerate(TRICKY)])
        wrong = {}
        for i, t in enumerate(TRICKY):
            try:
                found = sorted(hits(c, label, enc(t)))
            except Exception as exc:
                found = [err(exc)]
            if found != [i]:
                wrong[t] = [TRICKY[j] if isinstance(j, int) else j for j in found]
        out[label] = {"tokens": len(TRICKY), "exact": len(TRICKY) - len(wrong),
                      "wrong (token -> tokens whose docs it finds)": wrong}
    release(path)
    return out


def q1_lengths():
    """The longest single token that still matches itself; the VARCHAR max_length accepted;
    what an over-long text does."""
    path = fresh("lengths")
    c = client(path)
    out = {}
    for ml in (65_535, 65_536, 1_048_576):
        try:
            bm25_collection(c, f"ml{ml}", max_length=ml)
            out[f"max_length={ml}"] = "accepted"
        except Exception as exc:
            out[f"max_length={ml}"] = err(exc)
    bm25_collection(c, "tok", max_length=65_535)
    for n in (64, 255, 256, 1_000, 10_000, 65_000):
        tok = ("ab" * n)[:n]
        c.insert("tok", [{"id": n, "text": tok + " filler"}])
        found = hits(c, "tok", tok)
        out[f"single token of {n} chars finds its doc"] = n in found
    try:
        c.insert("tok", [{"id": 1, "text": "a " * 40_000}])
        out["text of 80,000 chars into max_length=65,535"] = "inserted"
    except Exception as exc:
        out["text of 80,000 chars into max_length=65,535"] = err(exc)
    release(path)
    return out


def q3_limits():
    """The largest search / hybrid_search limit lite takes (Milvus caps topk at 16,384)."""
    from pymilvus import AnnSearchRequest, WeightedRanker
    path = fresh("limits")
    c = client(path)
    bm25_collection(c, "l")
    c.insert("l", [{"id": i, "text": f"w{i % 50} common"} for i in range(20_000)])
    out = {}
    for n in (16_384, 16_385, 100_000):
        try:
            out[f"search limit {n}"] = f"{len(c.search('l', data=['common'], anns_field='sp', limit=n)[0])} hits"
        except Exception as exc:
            out[f"search limit {n}"] = err(exc)
        try:
            req = AnnSearchRequest(data=["common"], anns_field="sp", param={}, limit=n)
            r = c.hybrid_search("l", [req, req], WeightedRanker(1.0, 1.0, norm_score=False), limit=n)
            out[f"hybrid_search, per-request and final limit {n}"] = f"{len(r[0])} hits"
        except Exception as exc:
            out[f"hybrid_search, per-request and final limit {n}"] = err(exc)
    release(path)
    return out


def q7_index_params():
    """Index build parameters given the documented way (params={...}) and nested
    (params={"params": {...}}): what describe_index shows lite kept."""
    path = fresh("indexparams")
    c = client(path)
    out = {}
    for form, params in (("params={'M': 8, 'efConstruction': 40}", {"M": 8, "efConstruction": 40}),
                         ("params={'params': {'M': 8, 'efConstruction': 40}}",
                          {"params": {"M": 8, "efConstruction": 40}})):
        name = "flat" if "'params'" not in form else "nested"
        s = c.create_schema(auto_id=False)
        s.add_field("id", DataType.INT64, is_primary=True)
        s.add_field("v", DataType.FLOAT_VECTOR, dim=4)
        ip = c.prepare_index_params()
        ip.add_index("v", index_type="HNSW", metric_type="IP", params=params)
        c.create_collection(name, schema=s, index_params=ip)
        out[form] = c.describe_index(name, "v").get("params", "(no params)")
    release(path)
    return out


def fnv1a(term: str) -> int:
    from milvus_lite.analyzer.hash import term_to_id  # the engine's own term id (its BM25 key)
    return term_to_id(term)


def q1_collisions():
    """milvus-lite keys BM25 terms by a 32-bit FNV-1a hash of the token: distinct tokens that
    hash alike are one term. Count them in obsidian-help's vocabulary (hex tokens), and show a
    synthetic colliding pair matching each other's documents through the server."""
    vocab = set()
    for p in paragraphs():
        vocab.update(words(p["title"] + " " + p["headings"] + " " + p["body"]))
    ids: dict[int, str] = {}
    clashes = 0
    for t in vocab:
        h = fnv1a(hexy(t))
        clashes += h in ids
        ids.setdefault(h, t)
    out = {"obsidian-help distinct words": len(vocab), "colliding hex tokens there": clashes,
           "expected colliding pairs for n distinct tokens (n^2/2^33)":
               {n: round(n * n / 2 ** 33, 2) for n in (10_000, 100_000, 1_000_000)}}
    seen: dict[int, str] = {}
    pair = None
    for i in itertools.count():
        t = f"w{i}"
        h = fnv1a(hexy(t))
        if h in seen:
            pair = (seen[h], t, i + 1)
            break
        seen[h] = t
    a, b, n = pair
    path = fresh("collide")
    c = client(path)
    bm25_collection(c, "col")
    c.insert("col", [{"id": 1, "text": hexy(a)}, {"id": 2, "text": hexy("unrelated")}])
    out["first colliding pair among synthetic tokens w0, w1, ..."] = {
        "tokens": [a, b], "after tokens": n, "query for the 2nd finds the 1st's doc": hits(c, "col", hexy(b))}
    release(path)
    return out


def q4_text_match():
    """text_match / phrase_match as filters, on the memtable and on a flushed segment, with and
    without enable_match; what text_match means (any token? all? order?)."""
    path = fresh("match")
    c = client(path)
    docs = ["quick brown fox", "quick fox", "fox quick", "quick", "lazy dog"]
    out = {}
    for label, em in (("enable_match=True", True), ("enable_match=False", False)):
        name = "m1" if em else "m0"
        bm25_collection(c, name, {"tokenizer": "standard"}, enable_match=em)
        c.insert(name, [{"id": i, "text": t} for i, t in enumerate(docs)])
        res = {}
        for stage in ("memtable", "after flush"):
            if stage == "after flush":
                c.flush(name)
            for expr in ('text_match(text, "quick fox")', "TEXT_MATCH(text, 'fox')",
                         'phrase_match(text, "quick fox")', 'phrase_match(text, "quick fox", 1)'):
                try:
                    got = sorted(r["id"] for r in c.query(name, filter=expr, output_fields=["id"]))
                    res[f"{stage}: {expr}"] = [docs[i] for i in got]
                except Exception as exc:
                    res[f"{stage}: {expr}"] = err(exc)
            try:
                r = c.search(name, data=["quick"], anns_field="sp", limit=10,
                             filter='text_match(text, "fox")', output_fields=["id"])
                res[f"{stage}: BM25 search 'quick' filtered by text_match(text, 'fox')"] = [docs[h["id"]] for h in r[0]]
            except Exception as exc:
                res[f"{stage}: BM25 search filtered by text_match"] = err(exc)
        out[label] = res
    # hex-fed text: a text_match over hex tokens
    bm25_collection(c, "hx", enable_match=True)
    c.insert("hx", [{"id": i, "text": encode(words(t))} for i, t in enumerate(docs)])
    got = sorted(r["id"] for r in c.query("hx", filter=f'text_match(text, "{hexy("quick")} {hexy("fox")}")',
                                          output_fields=["id"]))
    out["hex-fed text, text_match(text, hex(quick) hex(fox))"] = [docs[i] for i in got]
    # a phrase through shingles: each adjacent pair as one token hex(a)_hex(b) ('_' is a \w
    # character, so the pair stays whole), every pair of the phrase required (AND of text_match)
    docs2 = ["quick brown fox jumps", "brown quick fox", "the quick brown dog", "quick fox brown"]
    bm25_collection(c, "sh", enable_match=True)

    def pairs(ws):
        return " ".join(f"{hexy(a)}_{hexy(b)}" for a, b in zip(ws, ws[1:]))

    c.insert("sh", [{"id": i, "text": pairs(words(t))} for i, t in enumerate(docs2)])
    c.flush("sh")
    for phrase in ("quick brown", "quick brown fox", "brown fox"):
        ws = words(phrase)
        expr = " and ".join(f'text_match(text, "{hexy(a)}_{hexy(b)}")' for a, b in zip(ws, ws[1:]))
        got = sorted(r["id"] for r in c.query("sh", filter=expr, output_fields=["id"]))
        out[f"shingle field, phrase {phrase!r}"] = [docs2[i] for i in got]
    release(path)
    return out


def q5_semantics():
    """Filter expressions at their edges, on 8 rows whose answers are known."""
    path = fresh("semantics")
    c = client(path)
    s = c.create_schema(auto_id=False)
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("v", DataType.FLOAT_VECTOR, dim=2)
    s.add_field("folder", DataType.VARCHAR, max_length=256)
    s.add_field("tags", DataType.ARRAY, element_type=DataType.VARCHAR, max_capacity=8, max_length=64)
    s.add_field("props", DataType.JSON)
    ip = c.prepare_index_params()
    ip.add_index("v", index_type="FLAT", metric_type="IP")
    c.create_collection("f", schema=s, index_params=ip)
    rows = [("a_b/x.md", ["t"], {"status": "done", "n": 1}), ("axb/y.md", [], {"status": "todo", "n": 2}),
            ("a%b/z.md", ["T"], {"n": 3}), ("A_B/w.md", ["t/sub"], {"status": None}),
            ("ab/c/d.md", ["t", "u"], {"status": ["done", "x"]}), ("abc/e.md", [], {}),
            ('q"uote/f.md', ["it's"], {"status": "Done"}), ("ü/ß.md", ["ü"], {"n": "3"})]
    c.insert("f", [{"id": i, "v": [1.0, 0.0], "folder": f, "tags": t, "props": p} for i, (f, t, p) in enumerate(rows)])
    c.flush("f")
    exprs = ['folder like "a_b/%"', r'folder like "a\\_b/%"', 'folder like "a%b/%"', r'folder like "a\\%b/%"',
             'folder like "ab/%"', 'folder like "ab%"', 'folder like "%/d.md"', 'folder like "%c/%"',
             'not (folder like "a%")', 'folder like "ü/%"', 'folder like "q\\"uote/%"', "folder like 'q\"uote/%'",
             'array_contains(tags, "t")', 'not array_contains(tags, "t")', 'array_length(tags) == 0',
             'array_contains(tags, "it\'s")',
             'props["status"] == "done"', 'props["status"] != "done"', 'not (props["status"] == "done")',
             'exists props["status"]', 'props["n"] >= 2', 'props["n"] == 3', 'json_contains(props["status"], "done")',
             'props["status"] in ["done", "todo"]', 'props["status"] == "done" or props["status"] == "todo"',
             'not exists props["status"] or props["status"] != "done"', 'id in []', 'folder in ["abc/e.md", "nope"]']
    out = {}
    for e in exprs:
        try:
            got = sorted(r["id"] for r in c.query("f", filter=e, output_fields=["id"]))
            out[e] = [rows[i][0] for i in got]
        except Exception as exc:
            out[e] = err(exc)
    out["(rows: folder, tags, props)"] = [f"{f} {t} {p}" for f, t, p in rows]
    release(path)
    return out


def q6_insert_existing():
    """insert() of an id that already exists: a second row, the old row kept, or replaced?"""
    path = fresh("dupinsert")
    c = client(path)
    s = c.create_schema(auto_id=False)
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("v", DataType.FLOAT_VECTOR, dim=2)
    s.add_field("note", DataType.VARCHAR, max_length=64)
    ip = c.prepare_index_params()
    ip.add_index("v", index_type="FLAT", metric_type="IP")
    c.create_collection("d", schema=s, index_params=ip)
    c.insert("d", [{"id": 1, "v": [1.0, 0.0], "note": "first"}])
    out = {}
    for stage in ("same batch window (memtable)", "after flush"):
        if stage == "after flush":
            c.flush("d")
            c.insert("d", [{"id": 1, "v": [1.0, 0.0], "note": "third"}])
        else:
            c.insert("d", [{"id": 1, "v": [1.0, 0.0], "note": "second"}])
        out[stage] = {"count(*)": c.query("d", filter="", output_fields=["count(*)"])[0]["count(*)"],
                      "rows for id 1": [r["note"] for r in c.query("d", filter="id == 1", output_fields=["note"])]}
    release(path)
    return out


READBACK = """
import sys; sys.path.insert(0, {here!r})
from _study import client, dump
c = client({path!r})
d = c.describe_collection("v")
props = {{k: v if len(v) < 100 else f"<{{len(v)}} chars>" for k, v in (d.get("properties") or {{}}).items()}}
dump({{"description": d.get("description"), "properties": props,
      "field descriptions": {{f["name"]: f.get("description") for f in d["fields"]}}}})
"""


def q9_properties():
    """Collection properties and descriptions: set, alter, drop, read back in a new process."""
    import os
    path = fresh("props")
    c = client(path)
    s = c.create_schema(auto_id=False, description="schema description: hybrid v3")
    s.add_field("id", DataType.INT64, is_primary=True, description="chunk id")
    s.add_field("vec", DataType.FLOAT_VECTOR, dim=4)
    ip = c.prepare_index_params()
    ip.add_index("vec", index_type="FLAT", metric_type="IP")
    out = {}
    c.create_collection("v", schema=s, index_params=ip, description="create_collection description",
                        properties={"hybrid.schema_version": "3", "hybrid.embedder": "minilm-l6:384"})
    d = c.describe_collection("v")
    out["after create"] = {"description": d.get("description"), "properties": d.get("properties")}
    c.alter_collection_properties("v", properties={"hybrid.schema_version": "4", "hybrid.note": "x" * 10_000})
    try:
        c.alter_collection_properties("v", properties={"hybrid.blob": '{"a": [1, 2, {"b": "ü"}]}'})
    except Exception as exc:
        out["JSON string value"] = err(exc)
    c.drop_collection_properties("v", property_keys=["hybrid.embedder"])
    d = c.describe_collection("v")
    props = dict(d.get("properties") or {})
    props["hybrid.note"] = f"<{len(props.get('hybrid.note', ''))} chars>"
    out["after alter + drop"] = props
    release(path)
    code = READBACK.format(here=os.path.dirname(os.path.abspath(__file__)), path=path)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    out["read back in a new process"] = json.loads(r.stdout) if r.returncode == 0 else r.stderr.strip()[-500:]
    return out


if __name__ == "__main__":
    result = {}
    for f in (q1_analyzers, q1_encodings, q1_lengths, q1_collisions, q3_limits, q4_text_match, q5_semantics,
              q6_insert_existing, q7_index_params, q9_properties):
        result[f.__name__] = f()
        print(f"# {f.__name__} done", file=sys.stderr)
    dump(result)
