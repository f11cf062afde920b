"""Connecting to PostgreSQL: where the URL comes from, one-line errors that name the fix (and
never a password), and the schema, created and migrated by hybrid (``hybrid_schema``)."""

from __future__ import annotations

import logging
import re
from typing import Any
from urllib.parse import urlsplit

from hybrid.core.errors import StoreUnavailable
from hybrid.core.store_url import ENV_URL
from hybrid.store.pg.tsv import DF_COLUMN, field_df_counts, field_lengths, summed_lengths

log = logging.getLogger("hybrid")
SCHEMA_VERSION = 10
CONNECT_TIMEOUT = 10
# each document's text, as `get` shows it (hybrid.app.reader): a table of its own keeps
# hybrid_files narrow for the scans that read every note's fields
TEXTS_TABLE = """
CREATE TABLE IF NOT EXISTS hybrid_texts (
    file_id bigint PRIMARY KEY REFERENCES hybrid_files(id) ON DELETE CASCADE,
    vault integer NOT NULL, text text NOT NULL
);"""
# the keyword arm's packed postings (hybrid.store.pg.packed): per unit kind a base (its units'
# ids and lengths in id order) and the postings of its common lexemes, both bytea read whole
PACKED_TABLES = """
CREATE TABLE IF NOT EXISTS hybrid_packed_base (
    vault integer NOT NULL REFERENCES hybrid_vaults(id) ON DELETE CASCADE, unit smallint NOT NULL,
    build bigint NOT NULL, max_id bigint NOT NULL, n integer NOT NULL,
    ids bytea NOT NULL, lens bytea NOT NULL,    -- int8, and int4 per field (tsv.FIELDS), big-endian, by id
    PRIMARY KEY (vault, unit)
);
CREATE TABLE IF NOT EXISTS hybrid_packed (
    vault integer NOT NULL REFERENCES hybrid_vaults(id) ON DELETE CASCADE, unit smallint NOT NULL,
    lexeme text COLLATE "C" NOT NULL, build bigint NOT NULL, n integer NOT NULL,
    ords bytea NOT NULL, tfs bytea NOT NULL,    -- int4 ordinals into the base, int2 tf per field
    PRIMARY KEY (vault, unit, lexeme)
);
ALTER TABLE hybrid_packed_base ALTER COLUMN ids SET STORAGE EXTERNAL, ALTER COLUMN lens SET STORAGE EXTERNAL;
ALTER TABLE hybrid_packed ALTER COLUMN ords SET STORAGE EXTERNAL, ALTER COLUMN tfs SET STORAGE EXTERNAL;
"""
SECTION_FILTERS = """
CREATE INDEX IF NOT EXISTS hybrid_sections_tags ON hybrid_sections USING gin (tag_set);
CREATE INDEX IF NOT EXISTS hybrid_sections_modified ON hybrid_sections (vault, modified);
"""
# each note's tags with their ancestors (hybrid.store.base.tag_set), as its chunks carry them:
# a tag filter over notes (does any note pass? which notes?) is a GIN lookup, not a JSON scan
FILE_FILTERS = """
CREATE INDEX IF NOT EXISTS hybrid_files_tags ON hybrid_files USING gin (tag_set);
CREATE INDEX IF NOT EXISTS hybrid_files_path ON hybrid_files (vault, path text_pattern_ops);
CREATE INDEX IF NOT EXISTS hybrid_files_modified ON hybrid_files (vault, modified);
"""
# each note's frontmatter properties, one row per value (hybrid.store.props.prop_rows): what a
# property filter (status:done, rating>=4) looks up
PROPS_TABLE = """
CREATE TABLE IF NOT EXISTS hybrid_props (
    file_id bigint NOT NULL REFERENCES hybrid_files(id) ON DELETE CASCADE,
    key text NOT NULL, val text NOT NULL, num double precision, day text
);
CREATE INDEX IF NOT EXISTS hybrid_props_val ON hybrid_props (key, val);
CREATE INDEX IF NOT EXISTS hybrid_props_num ON hybrid_props (key, num) WHERE num IS NOT NULL;
CREATE INDEX IF NOT EXISTS hybrid_props_day ON hybrid_props (key, day) WHERE day IS NOT NULL;
CREATE INDEX IF NOT EXISTS hybrid_props_file ON hybrid_props (file_id);
"""


def fill_props(conn: Any) -> None:
    """9 -> 10 (issue #33): the properties table, filled from the frontmatter each note's row
    keeps (no note is read again)."""
    from hybrid.store.props import stored_rows
    conn.execute(PROPS_TABLE)
    rows = [(fid, *r) for fid, props in conn.execute("SELECT id, properties FROM hybrid_files").fetchall()
            for r in stored_rows(props)]
    if rows:
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO hybrid_props(file_id, key, val, num, day) VALUES (%s,%s,%s,%s,%s)", rows)


# Migrations from version N to N+1 (SQL, or a function given the connection, run in one
# transaction, by the indexer).
MIGRATIONS: dict[int, Any] = {
    # 1 -> 2: what is embedded for a chunk an agent is shown redacted (hybrid.store.agent.vectors); the
    # notes that hold one are marked stale, so they stay hidden from agents until redone
    1: """
ALTER TABLE hybrid_chunks ADD COLUMN IF NOT EXISTS agent_embed_hash text;
ALTER TABLE hybrid_chunks ADD COLUMN IF NOT EXISTS agent_embed_text text;
UPDATE hybrid_files SET agent_fp = NULL WHERE id IN
    (SELECT file_id FROM hybrid_chunks WHERE agent_tsv IS NOT NULL);
""",
    # 2 -> 3: each note's link targets as written (issue #30: hybrid.store.graph); filled as
    # the notes are read again (the chunking version that came with it re-reads them all)
    2: "ALTER TABLE hybrid_files ADD COLUMN IF NOT EXISTS links text NOT NULL DEFAULT '[]';",
    # 3 -> 4: each chunk's text hash, whitespace normalised, so an identical section met again
    # takes the vector already cached (hybrid.indexing.shared); older rows get it when re-read
    3: """
ALTER TABLE hybrid_chunks ADD COLUMN IF NOT EXISTS body_hash text;
CREATE INDEX IF NOT EXISTS hybrid_chunks_body ON hybrid_chunks (vault, body_hash) WHERE body_hash IS NOT NULL;
""",
    # 4 -> 5: each document's text as a reader is shown it (issue #31: `get`, get_note, backlinks
    # on a machine without the folder). Notes indexed before have none: they are marked changed
    # (no hash, no mtime matches), so the next index run reads every one again and fills it in;
    # meanwhile a reader without the folder refuses such a note in one line (never a wrong text)
    4: """
CREATE TABLE IF NOT EXISTS hybrid_texts (
    file_id bigint PRIMARY KEY REFERENCES hybrid_files(id) ON DELETE CASCADE,
    vault integer NOT NULL, text text NOT NULL
);
UPDATE hybrid_files f SET hash = '', mtime_ns = -1
    WHERE NOT EXISTS (SELECT 1 FROM hybrid_texts t WHERE t.file_id = f.id);
""",
    # 5 -> 6: each vector carries its note's filter fields (issue #31: a filtered vector search
    # is one query on this table, hybrid.store.pg.vector.PgVector.search), copied from its chunk
    # here; the HNSW indexes are dropped first (rewriting every row through them costs more
    # than the rebuild the end of the same index run does: PgVector.ensure_index)
    5: """
DO $$ DECLARE r record; BEGIN
    FOR r IN SELECT indexname FROM pg_indexes WHERE tablename = 'hybrid_vectors'
             AND indexname LIKE 'hybrid\\_vectors\\_hnsw\\_%' LOOP
        EXECUTE format('DROP INDEX IF EXISTS %I', r.indexname);
    END LOOP;
END $$;
ALTER TABLE hybrid_vectors ADD COLUMN IF NOT EXISTS path text;
ALTER TABLE hybrid_vectors ADD COLUMN IF NOT EXISTS tag_set text[];
ALTER TABLE hybrid_vectors ADD COLUMN IF NOT EXISTS modified double precision;
UPDATE hybrid_vectors v SET path = c.path, tag_set = c.tag_set, modified = c.modified
    FROM hybrid_chunks c WHERE c.id = v.id;
ALTER TABLE hybrid_vectors ALTER COLUMN path SET NOT NULL, ALTER COLUMN tag_set SET NOT NULL,
    ALTER COLUMN modified SET NOT NULL;
CREATE INDEX IF NOT EXISTS hybrid_vectors_path ON hybrid_vectors (vault, path text_pattern_ops);
CREATE INDEX IF NOT EXISTS hybrid_vectors_modified ON hybrid_vectors (vault, modified);
CREATE INDEX IF NOT EXISTS hybrid_vectors_tags ON hybrid_vectors USING gin (tag_set);
""",
    # 6 -> 7: the keyword arm's packed postings (issue #31: common words scored with numpy,
    # hybrid.store.pg.packed); empty here, built by the end of the same index run (maintain);
    # and the sections' tag and date indexes (a tag filter over sections scanned them all:
    # 85 ms p50 at 100k chunks, 9 with the index)
    6: PACKED_TABLES + SECTION_FILTERS,
    # 7 -> 8: each note's tag set (FILE_FILTERS), computed here from its tags as tag_set does
    # (every tag and its ancestors, in first-seen order)
    7: """
ALTER TABLE hybrid_files ADD COLUMN IF NOT EXISTS tag_set text[] NOT NULL DEFAULT '{}';
UPDATE hybrid_files f SET tag_set = coalesce((
    SELECT array_agg(a.tag ORDER BY a.first) FROM (
        SELECT array_to_string(t.parts[1:i], '/') AS tag, min(t.k * 100000 + i) AS first
        FROM (SELECT string_to_array(x.tag, '/') AS parts, x.k
              FROM jsonb_array_elements_text(f.tags::jsonb) WITH ORDINALITY x(tag, k)) t,
             generate_series(1, cardinality(t.parts)) i
        GROUP BY 1) a), '{}')
    WHERE f.tags <> '[]';
""" + FILE_FILTERS,
    # 8 -> 9: the keyword arm scores each field with a BM25 of its own, as tantivy does (issue
    # #31: the same ranking on both stores): each unit's field lengths, each vault's totals and
    # each lexeme's document frequency per field, all counted from the stored tsvectors, so
    # readers search at once; the packed postings change format, so they are dropped (the same
    # index run builds them again). Identifiers were kept once per unit and are now counted at
    # every occurrence (as tantivy counts them): every note is marked changed, so that run
    # also writes each note's tsvectors anew (its vectors come from the cache)
    8: f"""
ALTER TABLE hybrid_chunks ADD COLUMN IF NOT EXISTS lens integer[], ADD COLUMN IF NOT EXISTS agent_lens integer[];
UPDATE hybrid_chunks SET lens = {field_lengths('tsv')},
    agent_lens = CASE WHEN agent_tsv IS NULL THEN NULL ELSE {field_lengths('agent_tsv')} END;
ALTER TABLE hybrid_chunks ALTER COLUMN lens SET NOT NULL, DROP COLUMN IF EXISTS len, DROP COLUMN IF EXISTS agent_len;
ALTER TABLE hybrid_sections ADD COLUMN IF NOT EXISTS lens integer[], ADD COLUMN IF NOT EXISTS agent_lens integer[];
UPDATE hybrid_sections SET lens = {field_lengths('tsv')},
    agent_lens = CASE WHEN agent_tsv IS NULL THEN NULL ELSE {field_lengths('agent_tsv')} END;
ALTER TABLE hybrid_sections ALTER COLUMN lens SET NOT NULL, DROP COLUMN IF EXISTS len, DROP COLUMN IF EXISTS agent_len;
ALTER TABLE hybrid_vaults ADD COLUMN IF NOT EXISTS chunk_lens bigint[] NOT NULL DEFAULT '{{0,0,0,0}}',
    ADD COLUMN IF NOT EXISTS section_lens bigint[] NOT NULL DEFAULT '{{0,0,0,0}}';
UPDATE hybrid_vaults v SET chunk_lens = {summed_lengths('hybrid_chunks', 'v.id')},
    section_lens = {summed_lengths('hybrid_sections', 'v.id')};
ALTER TABLE hybrid_vaults DROP COLUMN IF EXISTS chunk_len, DROP COLUMN IF EXISTS section_len;
ALTER TABLE hybrid_terms ADD COLUMN IF NOT EXISTS df_title integer NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS df_headings integer NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS df_body integer NOT NULL DEFAULT 0;
UPDATE hybrid_terms t SET {', '.join(f'{col} = g.{col}' for col in DF_COLUMN.values())}
    FROM (SELECT c.vault, u.lexeme, {field_df_counts()} FROM hybrid_chunks c, unnest(c.tsv) u
          GROUP BY c.vault, u.lexeme) g WHERE t.unit = 0 AND t.vault = g.vault AND t.lexeme = g.lexeme;
UPDATE hybrid_terms t SET {', '.join(f'{col} = g.{col}' for col in DF_COLUMN.values())}
    FROM (SELECT c.vault, u.lexeme, {field_df_counts()} FROM hybrid_sections c, unnest(c.tsv) u
          GROUP BY c.vault, u.lexeme) g WHERE t.unit = 1 AND t.vault = g.vault AND t.lexeme = g.lexeme;
DELETE FROM hybrid_packed;
DELETE FROM hybrid_packed_base;
UPDATE hybrid_files SET hash = '', mtime_ns = -1;
""",
    9: fill_props,
}

SCHEMA = """
CREATE TABLE IF NOT EXISTS hybrid_schema (version integer NOT NULL);
CREATE TABLE IF NOT EXISTS hybrid_vaults (
    id serial PRIMARY KEY,
    name text NOT NULL UNIQUE,
    generation bigint NOT NULL DEFAULT 0,   -- bumped by every committed change
    n_chunks integer NOT NULL DEFAULT 0, n_sections integer NOT NULL DEFAULT 0,  -- BM25's N and
    chunk_lens bigint[] NOT NULL DEFAULT '{0,0,0,0}',    -- each field's total length (tsv.FIELDS)
    section_lens bigint[] NOT NULL DEFAULT '{0,0,0,0}'
);
CREATE TABLE IF NOT EXISTS hybrid_meta (
    vault integer NOT NULL REFERENCES hybrid_vaults(id) ON DELETE CASCADE,
    key text NOT NULL, value text NOT NULL, PRIMARY KEY (vault, key)
);
CREATE TABLE IF NOT EXISTS hybrid_files (
    id bigserial PRIMARY KEY,
    vault integer NOT NULL REFERENCES hybrid_vaults(id) ON DELETE CASCADE,
    path text NOT NULL, size bigint NOT NULL, mtime_ns bigint NOT NULL, hash text NOT NULL,
    title text NOT NULL, tags text NOT NULL, aliases text NOT NULL, properties text NOT NULL,
    created text, modified double precision NOT NULL, indexed_at double precision NOT NULL,
    agent_fp text,                          -- redaction rules its agent_tsv were written with
    links text NOT NULL DEFAULT '[]',       -- JSON list: link targets as written (store.graph)
    tag_set text[] NOT NULL DEFAULT '{}',   -- its tags and their ancestors (FILE_FILTERS)
    UNIQUE (vault, path)
);
CREATE TABLE IF NOT EXISTS hybrid_chunks (
    id bigserial PRIMARY KEY,
    vault integer NOT NULL,
    file_id bigint NOT NULL REFERENCES hybrid_files(id) ON DELETE CASCADE,
    ord integer NOT NULL, heading text NOT NULL, start_line integer NOT NULL,
    end_line integer NOT NULL, text text NOT NULL, embed_hash text NOT NULL,
    path text NOT NULL, tag_set text[] NOT NULL, modified double precision NOT NULL,
    tsv tsvector NOT NULL, lens integer[] NOT NULL, -- each field's length (tsv.FIELDS)
    agent_tsv tsvector, agent_lens integer[],       -- the redacted text's, where redaction changed it
    agent_embed_hash text, agent_embed_text text, -- and what is embedded for it (agent_vectors)
    body_hash text                          -- the text's hash, whitespace normalised (hybrid.indexing.shared)
);
CREATE INDEX IF NOT EXISTS hybrid_chunks_body ON hybrid_chunks (vault, body_hash) WHERE body_hash IS NOT NULL;
CREATE INDEX IF NOT EXISTS hybrid_chunks_redacted ON hybrid_chunks (vault) WHERE agent_tsv IS NOT NULL;
-- tsvectors stay in the row (MAIN, rows up to a page): out of line, BM25 read ~6 pages per
-- candidate to detoast it. Vectors live in a narrow table of their own, in the row too: an
-- exact scan then reads only them (10 ms at 10k chunks; 64 ms while they were out of line).
ALTER TABLE hybrid_chunks ALTER COLUMN tsv SET STORAGE MAIN;
ALTER TABLE hybrid_chunks SET (toast_tuple_target = 8160);
-- Each vector carries its chunk's filter fields (a copy of hybrid_chunks' path, tag_set and
-- modified, written with it: a note that changes gets new chunks and vectors), so a filtered
-- search is one scan of this table; its indexes serve filters too selective for HNSW.
CREATE TABLE IF NOT EXISTS hybrid_vectors (
    id bigint PRIMARY KEY REFERENCES hybrid_chunks(id) ON DELETE CASCADE,
    vault integer NOT NULL, file_id bigint NOT NULL, embedding vector NOT NULL,
    path text NOT NULL, tag_set text[] NOT NULL, modified double precision NOT NULL
);
ALTER TABLE hybrid_vectors ALTER COLUMN embedding SET STORAGE MAIN;
CREATE INDEX IF NOT EXISTS hybrid_vectors_vault ON hybrid_vectors (vault);
CREATE INDEX IF NOT EXISTS hybrid_vectors_path ON hybrid_vectors (vault, path text_pattern_ops);
CREATE INDEX IF NOT EXISTS hybrid_vectors_modified ON hybrid_vectors (vault, modified);
CREATE INDEX IF NOT EXISTS hybrid_vectors_tags ON hybrid_vectors USING gin (tag_set);
CREATE INDEX IF NOT EXISTS hybrid_chunks_file ON hybrid_chunks (file_id);
CREATE INDEX IF NOT EXISTS hybrid_chunks_path ON hybrid_chunks (vault, path text_pattern_ops);
CREATE INDEX IF NOT EXISTS hybrid_chunks_modified ON hybrid_chunks (vault, modified);
CREATE INDEX IF NOT EXISTS hybrid_chunks_tags ON hybrid_chunks USING gin (tag_set);
CREATE INDEX IF NOT EXISTS hybrid_chunks_tsv ON hybrid_chunks USING gin (tsv);
CREATE TABLE IF NOT EXISTS hybrid_sections (
    id bigserial PRIMARY KEY,
    vault integer NOT NULL,
    file_id bigint NOT NULL REFERENCES hybrid_files(id) ON DELETE CASCADE,
    chunk_ids bigint[] NOT NULL,
    path text NOT NULL, tag_set text[] NOT NULL, modified double precision NOT NULL,
    tsv tsvector NOT NULL, lens integer[] NOT NULL, agent_tsv tsvector, agent_lens integer[]
);
CREATE INDEX IF NOT EXISTS hybrid_sections_redacted ON hybrid_sections (vault) WHERE agent_tsv IS NOT NULL;
ALTER TABLE hybrid_sections ALTER COLUMN tsv SET STORAGE MAIN;
ALTER TABLE hybrid_sections SET (toast_tuple_target = 8160);
CREATE INDEX IF NOT EXISTS hybrid_sections_file ON hybrid_sections (file_id);
CREATE INDEX IF NOT EXISTS hybrid_sections_path ON hybrid_sections (vault, path text_pattern_ops);
CREATE INDEX IF NOT EXISTS hybrid_sections_tsv ON hybrid_sections USING gin (tsv);
-- document frequencies for BM25 (unit 0 chunks, 1 sections), kept in each change's transaction:
-- units holding the lexeme, and those holding it in each stemmed field (tsv.DF_COLUMN)
CREATE TABLE IF NOT EXISTS hybrid_terms (
    vault integer NOT NULL, unit smallint NOT NULL, lexeme text COLLATE "C" NOT NULL,
    df integer NOT NULL, df_title integer NOT NULL DEFAULT 0, df_headings integer NOT NULL DEFAULT 0,
    df_body integer NOT NULL DEFAULT 0, PRIMARY KEY (vault, unit, lexeme)
);
CREATE TABLE IF NOT EXISTS hybrid_fetched (   -- a bookmarks source's fetched pages
    vault integer NOT NULL REFERENCES hybrid_vaults(id) ON DELETE CASCADE,
    url text NOT NULL, ok boolean NOT NULL, title text NOT NULL, text text NOT NULL,
    error text NOT NULL, status integer, fetched_at double precision NOT NULL,
    PRIMARY KEY (vault, url)
);
CREATE TABLE IF NOT EXISTS hybrid_embeddings (
    vault integer NOT NULL REFERENCES hybrid_vaults(id) ON DELETE CASCADE,
    model text NOT NULL, text_hash text NOT NULL, vec vector NOT NULL,
    PRIMARY KEY (vault, model, text_hash)
);
""" + TEXTS_TABLE + PACKED_TABLES + SECTION_FILTERS + FILE_FILTERS + PROPS_TABLE


def _where(url: str) -> str:
    """Host and database of ``url``, for messages."""
    parts = urlsplit(url)
    host = parts.hostname or "the local socket"
    q = dict(p.split("=", 1) for p in parts.query.split("&") if "=" in p)
    if not parts.hostname and q.get("host"):
        host = q["host"]
    db = parts.path.lstrip("/") or q.get("dbname") or "(default)"
    return f"{host}{':' + str(parts.port) if parts.port else ''}/{db}"


def connect(url: str, vault: str) -> Any:
    """An autocommit connection with pgvector's types registered; StoreUnavailable naming the
    fix when that cannot be had."""
    try:
        import psycopg
    except ImportError:
        raise StoreUnavailable(f"vault {vault!r} is stored in PostgreSQL, which needs psycopg and "
                               f"pgvector: pip install 'hybrid[postgres]'") from None
    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT,
                               application_name="hybrid")
    except psycopg.Error as exc:
        raise StoreUnavailable(connect_problem(exc, url, vault)) from None
    return conn


def connect_problem(exc: BaseException, url: str, vault: str) -> str:
    """One line for a failed connect, by what libpq said."""
    text = " ".join(str(exc).split())
    where = _where(url)
    low = text.lower()
    if "password authentication failed" in low or "no password supplied" in low \
            or "authentication failed" in low:
        user = urlsplit(url).username or "the default user"
        return (f"PostgreSQL at {where} refused the login of {user}; check the password "
                f"({ENV_URL}, ~/.pgpass or PGPASSWORD)")
    if "does not exist" in low and "database" in low:
        return f"PostgreSQL at {where}: the database does not exist; create it (createdb) or fix the URL"
    if "role" in low and "does not exist" in low:
        return f"PostgreSQL at {where}: that user does not exist; create it or fix the URL"
    if "ssl" in low or "certificate" in low:
        return f"PostgreSQL at {where}: TLS failed ({_short(text)}); check sslmode/sslrootcert in the URL"
    if "invalid" in low and ("dsn" in low or "uri" in low or "connection option" in low):
        return f"the PostgreSQL URL for vault {vault!r} is not valid ({_short(text)})"
    return (f"cannot reach PostgreSQL at {where} ({_short(text)}); check that the server runs "
            f"and the URL ({ENV_URL} or the vault's store)")


WRITE_GRANT = "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role}; " \
              "GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {role}"
READ_GRANT = "GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}"


def explain(exc: BaseException) -> StoreUnavailable | None:
    """A refusal for want of a privilege that escaped every store method, as one line (None
    for any other exception)."""
    import psycopg
    if isinstance(exc, psycopg.errors.InsufficientPrivilege):
        return privilege_problem(exc, None, True)
    return None


def privilege_problem(exc: BaseException, role: str | None, writer: bool, where: str = "") -> StoreUnavailable:
    """One line for a statement PostgreSQL refused for want of a privilege: what was refused,
    to which role, and the GRANT an owner of the database runs: what an indexer (``writer``)
    needs, or what a query server needs."""
    text = " ".join(str(exc).split()) or "permission denied"
    who = repr(role) if role else "of the store URL"
    grant = (WRITE_GRANT if writer else READ_GRANT).format(role=role or "ROLE")
    need = "`hybrid index` needs SELECT, INSERT, UPDATE and DELETE" if writer else "a query needs SELECT"
    at = f" at {where}" if where else ""
    return StoreUnavailable(f"PostgreSQL{at} refused role {who}: {_short(text)}; {need} on the "
                            f"hybrid_* tables: have an owner of the database run {grant}")


def _short(text: str) -> str:
    text = re.sub(r"password=\S+", "password=***", text)
    return text[:160]


def ensure_schema(conn: Any, where: str, writer: bool) -> None:
    """Create or migrate hybrid's tables (a writer), or check that they are current (a reader,
    which never writes the schema). pgvector must be installable in the database."""
    import psycopg
    try:
        version = schema_version(conn)
    except psycopg.errors.InsufficientPrivilege as exc:
        raise privilege_problem(exc, conn.info.user, writer, where) from None
    if version == SCHEMA_VERSION:
        _register(conn, where)
        return
    if version is not None and version > SCHEMA_VERSION:
        raise StoreUnavailable(f"the database at {where} has hybrid schema {version}, newer than "
                               f"this hybrid reads ({SCHEMA_VERSION}); upgrade hybrid")
    if version is not None and any(v not in MIGRATIONS for v in range(version, SCHEMA_VERSION)):
        raise StoreUnavailable(f"the database at {where} has hybrid schema {version}, which this "
                               f"hybrid cannot migrate; drop hybrid's tables (DROP TABLE hybrid_* "
                               f"CASCADE) and run `hybrid index` to rebuild them from the notes")
    if not writer:
        if version is None:
            raise StoreUnavailable("not indexed yet")
        raise StoreUnavailable(f"the database at {where} has hybrid schema {version}; run "
                               f"`hybrid index` once to migrate it to {SCHEMA_VERSION}")
    try:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('hybrid:schema', 0))")
            version = schema_version(conn)  # another writer may have done it meanwhile
            if version is None:
                _create_vector_extension(conn, where)
                conn.execute(SCHEMA)
                conn.execute("INSERT INTO hybrid_schema(version) VALUES (%s)", (SCHEMA_VERSION,))
                log.info("created hybrid's tables in %s", where)
            else:
                while version < SCHEMA_VERSION:
                    step = MIGRATIONS[version]
                    step(conn) if callable(step) else conn.execute(step)
                    version += 1
                    conn.execute("UPDATE hybrid_schema SET version=%s", (version,))
                    log.info("migrated hybrid's tables in %s to schema %d", where, version)
    except psycopg.errors.InsufficientPrivilege as exc:
        raise StoreUnavailable(f"PostgreSQL at {where}: not allowed to create hybrid's tables "
                               f"({_short(str(exc))}); grant CREATE on the database's schema") from None
    _register(conn, where)


def _create_vector_extension(conn: Any, where: str) -> None:
    import psycopg
    try:
        with conn.transaction():
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except psycopg.errors.FeatureNotSupported:
        raise StoreUnavailable(f"PostgreSQL at {where} has no pgvector extension; install it "
                               f"(the postgresql-NN-pgvector package or the pgvector/pgvector "
                               f"image) and run hybrid again") from None
    except psycopg.errors.UndefinedFile:
        raise StoreUnavailable(f"PostgreSQL at {where} has no pgvector extension; install it "
                               f"(the postgresql-NN-pgvector package or the pgvector/pgvector "
                               f"image) and run hybrid again") from None
    except psycopg.errors.InsufficientPrivilege:
        raise StoreUnavailable(f"PostgreSQL at {where}: the pgvector extension is not enabled and "
                               f"this user may not enable it; have an owner run CREATE EXTENSION "
                               f"vector in that database") from None


def schema_version(conn: Any) -> int | None:
    row = conn.execute("SELECT to_regclass('hybrid_schema') IS NOT NULL").fetchone()
    if not row[0]:
        return None
    got = conn.execute("SELECT max(version) FROM hybrid_schema").fetchone()
    return None if got[0] is None else int(got[0])


def _register(conn: Any, where: str) -> None:
    """pgvector's types on this connection (numpy arrays in, out)."""
    from pgvector.psycopg import register_vector
    try:
        register_vector(conn)
    except Exception as exc:  # noqa: BLE001 - psycopg raises ProgrammingError: type not found
        raise StoreUnavailable(f"PostgreSQL at {where} has no pgvector extension enabled "
                               f"({_short(str(exc))}); run `hybrid index` as the database owner "
                               f"or CREATE EXTENSION vector") from None
