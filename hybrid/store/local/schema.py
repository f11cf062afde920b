"""The local ledger's tables (SQLite), and how a chunk's row is read back from them."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from hybrid.store.base import CHUNK_COLUMNS as BASE_CHUNK_COLUMNS
from hybrid.store.props import stored_rows

SCHEMA_VERSION = 6


def fill_props(db: sqlite3.Connection, table: str = "file_props") -> None:
    """Each live note's property rows (:func:`hybrid.store.props.prop_rows`) into ``table``,
    from the frontmatter the catalog keeps (no note is read again)."""
    rows = [(fid, *r) for fid, props in db.execute("SELECT id, properties FROM files WHERE deleted=0").fetchall()
            for r in stored_rows(props)]
    db.executemany(f"INSERT INTO {table}(file_id, key, val, num, day) VALUES (?,?,?,?,?)", rows)


# Migrations from version N to N+1, run by a writer when it opens an older catalog (a reader of
# an older one reads it as it is: no links): SQL, or a function given the connection.
MIGRATIONS: dict[int, str | Callable[[sqlite3.Connection], None]] = {
    2: "ALTER TABLE files ADD COLUMN links TEXT NOT NULL DEFAULT '[]'",  # issue #30: the link graph
    3: "ALTER TABLE chunks ADD COLUMN body_hash TEXT",  # issue #30: duplicates (hybrid.indexing.shared)
    # issue #31: each note's tag set (the table comes with SCHEMA), computed from its tags as
    # hybrid.store.base.tag_set does: every tag and each ancestor, split at "/"
    4: """WITH RECURSIVE t(file_id, tag, rest) AS (
        SELECT f.id, NULL, j.value || '/' FROM files f, json_each(f.tags) j
        UNION ALL
        SELECT file_id, coalesce(tag || '/', '') || substr(rest, 1, instr(rest, '/') - 1),
               substr(rest, instr(rest, '/') + 1) FROM t WHERE rest <> '')
    INSERT OR IGNORE INTO file_tags(tag, file_id) SELECT tag, file_id FROM t WHERE tag IS NOT NULL""",
    # issue #33: each note's frontmatter properties as rows (the table comes with SCHEMA)
    5: fill_props,
}
# made by a writer once the schema is current (its column may come from a migration)
BODY_INDEX = "CREATE INDEX IF NOT EXISTS chunks_body ON chunks(body_hash) WHERE body_hash IS NOT NULL"

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    hash TEXT NOT NULL,
    title TEXT NOT NULL,
    tags TEXT NOT NULL,          -- JSON list, lowercased, nested tags as written
    aliases TEXT NOT NULL,       -- JSON list
    properties TEXT NOT NULL,    -- JSON object (frontmatter)
    created TEXT,
    modified REAL NOT NULL,      -- epoch seconds: the note's date (hybrid.core.dates.note_date), else file mtime
    indexed_at REAL NOT NULL,
    links TEXT NOT NULL DEFAULT '[]',    -- JSON list: link targets as written (store.graph)
    deleted INTEGER NOT NULL DEFAULT 0   -- removed from the vault; purged after the next sync
);
CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    ord INTEGER NOT NULL,
    heading TEXT NOT NULL,       -- heading path joined with ' > '
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    text TEXT NOT NULL,
    embed_hash TEXT NOT NULL,    -- hash of the embedded text (header + chunk), or of an identical copy's
    dead INTEGER NOT NULL DEFAULT 0,     -- replaced; purged after the next sync
    body_hash TEXT               -- hash of the text, whitespace normalised (NULL: empty, or older)
);
CREATE INDEX IF NOT EXISTS chunks_file ON chunks(file_id);
-- each note's tags and their ancestors (hybrid.store.base.tag_set): what a tag filter looks up
CREATE TABLE IF NOT EXISTS file_tags (
    tag TEXT NOT NULL,
    file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    PRIMARY KEY (tag, file_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS file_tags_file ON file_tags(file_id);
-- each note's frontmatter properties, one row per value (hybrid.store.props.prop_rows): what a
-- property filter (status:done, rating>=4) looks up
CREATE TABLE IF NOT EXISTS file_props (
    file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    key TEXT NOT NULL,           -- lower case
    val TEXT NOT NULL,           -- the value as matched: case-folded text, a number's shortest form
    num REAL,                    -- the value as a number, when it is one
    day TEXT                     -- its date YYYY-MM-DD, when it is a date
);
CREATE INDEX IF NOT EXISTS file_props_val ON file_props(key, val);
CREATE INDEX IF NOT EXISTS file_props_num ON file_props(key, num) WHERE num IS NOT NULL;
CREATE INDEX IF NOT EXISTS file_props_day ON file_props(key, day) WHERE day IS NOT NULL;
CREATE INDEX IF NOT EXISTS file_props_file ON file_props(file_id);
-- A rowid table: as WITHOUT ROWID, 1.5 KB vector blobs took about three times their size.
CREATE TABLE IF NOT EXISTS embeddings (
    id INTEGER PRIMARY KEY,
    model TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    vector BLOB NOT NULL,
    UNIQUE (model, text_hash)
);
CREATE TABLE IF NOT EXISTS journal (chunk_id INTEGER PRIMARY KEY);
-- Chunks an agent is shown redacted, and what is embedded for them (hybrid.store.agent.vectors): kept
-- with the agent index (rebuilt with it, changed by the same journal replay).
CREATE TABLE IF NOT EXISTS agent_redacted (
    chunk_id INTEGER PRIMARY KEY,
    embed_hash TEXT NOT NULL,
    embed_text TEXT NOT NULL
);
-- A bookmarks source's fetched pages (`hybrid index --fetch`): fetched once, kept until asked
-- again; a failed fetch keeps its error and is tried again on the next --fetch.
CREATE TABLE IF NOT EXISTS fetched (
    url TEXT PRIMARY KEY,
    ok INTEGER NOT NULL,
    title TEXT NOT NULL,
    text TEXT NOT NULL,
    error TEXT NOT NULL,
    status INTEGER,
    fetched_at REAL NOT NULL
);
"""


# A chunk's row without its note's own fields: those are read once per note of a batch
# (hybrid.store.base.CHUNK_COLUMNS says why).
CHUNK_COLUMNS = BASE_CHUNK_COLUMNS.format(dead="c.dead")
