"""The local ledger's named queries over the notes' frontmatter properties (``file_props``:
:mod:`hybrid.store.props`), a part of :class:`hybrid.store.local.catalog.Catalog`."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from hybrid.store.local.schema import fill_props


class PropertyRows:
    db: sqlite3.Connection
    has_props: bool               # schema 6 or later: the catalog has file_props
    _legacy_props: int | None     # data_version the temporary copy of an older catalog was made at

    def data_version(self) -> int:
        raise NotImplementedError  # the catalog's

    def _props_table(self) -> str:
        """The table of the notes' property rows: ``file_props``, or for a reader of a catalog
        older than schema 6 a temporary copy made from the notes' frontmatter (made again when
        the catalog changed)."""
        if self.has_props:
            return "file_props"
        version = self.data_version()
        if self._legacy_props != version:
            self.db.execute("CREATE TEMP TABLE IF NOT EXISTS legacy_props "
                            "(file_id INTEGER, key TEXT, val TEXT, num REAL, day TEXT)")
            self.db.execute("DELETE FROM temp.legacy_props")
            fill_props(self.db, "temp.legacy_props")
            self._legacy_props = version
        return "temp.legacy_props"

    def note_properties(self, file_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        """``{file id: frontmatter}`` of the live notes ``file_ids``, as indexed."""
        ids, out = list(file_ids), {}
        for i in range(0, len(ids), 900):
            part = ids[i:i + 900]
            for fid, props in self.db.execute(f"SELECT id, properties FROM files WHERE deleted=0 AND id IN "
                                              f"({','.join('?' * len(part))})", part):
                value = json.loads(props)
                out[fid] = value if isinstance(value, dict) else {}
        return out

    def property_keys(self) -> set[str]:
        """The property names (lower case) some live note has."""
        sql = (f"SELECT DISTINCT p.key FROM {self._props_table()} p JOIN files f ON f.id = p.file_id "
               f"WHERE f.deleted = 0")
        return {r[0] for r in self.db.execute(sql)}
