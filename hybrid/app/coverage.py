"""`hybrid status --files`: every file a vault holds and what became of it, one
:class:`FileCoverage` each, streamed in the order the folder is walked.

States (``state``) and, in ``why``, the codes that say why:

    indexed   in the index as it is on disk (``chunks``: its chunks; ``no_text``: none to index)
    pending   what the next ``hybrid index`` will do: ``new``, ``changed``, ``reread`` (the
              chunking settings or hybrid's index format changed: every note is read again),
              ``deleted`` (gone from the folder; the next run removes it from the index)
    skipped   passed over with a warning, and not tried again until it changes (the ledger of
              :mod:`hybrid.indexing.skipped`): ``too_large`` (its size and the limit in
              ``detail``; a drawing that decompresses beyond ``max_file_bytes``), ``binary``,
              ``no_text_layer`` (a scanned PDF), ``encrypted``,
              ``damaged``, ``timeout`` and ``memory`` (over the converter's bounds),
              ``no_text`` (a page with no text), ``too_complex`` (a canvas whose groups
              overlap past the bound on placing its cards), ``too_deep`` (nested deeper than
              its reader reads: a canvas's JSON, a RecursionError), ``not_converted``
    failed    the last run could not read or index it as it is now (``unreadable``, ``error``:
              ``detail`` is the error line); tried again on every run
    excluded  never a candidate: ``excluded`` (``rule``: the exclude glob, ``set_in``: where it
              was set, ``settings`` or ``vault``), ``not_included`` (no include glob matches;
              ``set_in``: where the include globs were set), ``hidden`` (a name starting with
              ``.``: a hidden folder is one row, its path ending in ``/``), ``outside`` (a symlink
              out of the vault), ``link_target`` (a symlink to a hidden or excluded file),
              ``broken_link``, ``unlistable`` (a folder that cannot be listed)

Invalid UTF-8 is no state of its own: such a note is indexed (with replacement characters and a
warning), and identical notes are each indexed (their sections share one vector).

Where the folder is not on this machine (a PostgreSQL vault read elsewhere) or the vault is a
source (bookmarks, Slack: an export read whole), the rows are what the index records
(``from_index``): its documents (indexed), the skipped files and the failures, nothing pending
or excluded. Owners only: the listing names every file, private notes included.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from hybrid.app.freshness import Ledger, judge, read_ledger
from hybrid.sources import kind_of

if TYPE_CHECKING:
    from hybrid.core.config import Vault
    from hybrid.core.settings import Settings

STATES = ("indexed", "pending", "skipped", "failed", "excluded")
# a skip's reason (the warning the indexer gave) -> its code; the first that is in it
SKIP_CODES = (("bytes is over max_", "too_large"), ("decompresses beyond max_", "too_large"),
              ("binary content", "binary"),
              ("no text layer", "no_text_layer"), ("encrypted PDF", "encrypted"),
              ("damaged or not a PDF", "damaged"), ("took longer than", "timeout"),
              ("MB of memory", "memory"), ("no text extracted", "no_text"),
              ("overlap too much to nest", "too_complex"), ("nested too deep", "too_deep"))
PENDING_WORDS = {"new": "new since the last index run", "changed": "changed since the last index run",
                 "reread": "to be read again (the chunking settings or hybrid's index format changed)",
                 "deleted": "gone from the folder: the next index run removes it"}
EXCLUDED_WORDS = {"hidden": "hidden (a name starting with '.'): never indexed",
                  "not_included": "matches no include glob", "excluded": "matches an exclude glob",
                  "outside": "a symlink leading outside the vault",
                  "link_target": "a symlink to a hidden or excluded file",
                  "broken_link": "a broken symlink", "unlistable": "a folder that cannot be listed"}


@dataclass
class FileCoverage:
    """One file of a vault and what became of it (see the module docstring)."""
    path: str
    state: str
    why: str = ""
    detail: str = ""             # in words: the reason, the error, the glob
    kind: str = ""               # its document kind (candidates only)
    size: int | None = None
    chunks: int | None = None    # indexed (or pending, deleted): its chunks in the index
    rule: str | None = None      # the exclude glob that matched
    set_in: str | None = None    # where that glob (or the include globs) was set: settings, vault
    from_index: bool = False     # told from the index alone (no folder here, or a source)

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def line(self) -> str:
        """``indexed  notes/a.md  note, 3 chunks``: the row as `status --files` prints it."""
        return f"{self.state:<9}{self.path}  {self.detail}".rstrip()


def file_coverage(vault: Vault, settings: Settings) -> Iterator[FileCoverage]:
    """Every file of ``vault`` and what became of it, in walk order, then the files the index
    holds that are gone from the folder. Holds the index's file table (as `hybrid index`
    does), never the listing. A vault never indexed lists its candidates as pending."""
    ledger = read_ledger(vault, settings, chunks=True) or Ledger({}, False, {})
    if not vault.is_folder or not vault.path.is_dir():
        yield from _from_index(ledger)
        return
    yield from _walk(vault, settings, ledger)


def _walk(vault: Vault, settings: Settings, ledger: Ledger) -> Iterator[FileCoverage]:
    from hybrid.sources import walk
    from hybrid.store.agent.view import AgentView
    passed: list[FileCoverage] = []
    include_set = "settings" if list(vault.include) == list(settings.include) else "vault"

    def tell(path: str, why: str, detail: str | None, size: int | None) -> None:
        row = FileCoverage(path, "excluded", why, EXCLUDED_WORDS.get(why, why), size=size)
        if why == "excluded" and detail:
            row.rule, row.set_in = detail, "settings" if detail in settings.exclude else "vault"
            row.detail = f"exclude glob {detail} (set in {row.set_in})"
        elif why == "not_included":
            row.set_in = include_set
            row.detail = f"matches no include glob (set in {include_set})"
        elif detail:
            row.detail += f" ({detail})"
        passed.append(row)

    present: set[str] = set()
    for entry in walk.discover(vault.path, vault.include, vault.exclude,
                                    link_exclude=AgentView.of(vault, settings).exclude_patterns,
                                    passed_over=tell):
        yield from passed  # those the walk met before this one
        passed.clear()
        row = _judged(entry, ledger, settings)
        if row is not None:
            present.add(entry.path)
            yield row
    yield from passed
    for path, known in ledger.known.items():
        if path not in present:
            yield FileCoverage(path, "pending", "deleted", PENDING_WORDS["deleted"], kind_of(path),
                               known.size, ledger.chunks.get(known.id, 0))


def _judged(entry, ledger: Ledger, settings: Settings) -> FileCoverage | None:
    """The row of one candidate file (None: it vanished while listed)."""
    verdict, detail = judge(entry, ledger, settings, failures=True)
    row = FileCoverage(entry.path, "", kind=kind_of(entry.path), size=entry.size)
    known = ledger.known.get(entry.path)
    if known is not None:
        row.chunks = ledger.chunks.get(known.id, 0)
    if verdict in ("unchanged", "same"):
        row.state = "indexed"
        _indexed(row)
    elif verdict in ("skipped", "too_large"):
        row.state, row.why, row.detail = "skipped", skip_code(detail), _words(entry.path, detail)
    elif verdict in ("failed", "unreadable"):
        row.state, row.why, row.detail = "failed", fail_code(detail), _words(entry.path, detail)
    elif verdict == "vanished":
        return None
    else:
        row.state, row.why, row.detail = "pending", verdict, PENDING_WORDS[verdict]
    return row


def _indexed(row: FileCoverage) -> None:
    chunks = row.chunks or 0
    row.why = "" if chunks else "no_text"
    row.detail = f"{row.kind}, {chunks} chunk{'' if chunks == 1 else 's'}" + ("" if chunks else ": no text to index")


def _from_index(ledger: Ledger) -> Iterator[FileCoverage]:
    """What the index records, without the folder: its documents, then skips and failures."""
    for path in sorted(ledger.known):
        known = ledger.known[path]
        row = FileCoverage(path, "indexed", kind=kind_of(path), size=known.size,
                           chunks=ledger.chunks.get(known.id, 0), from_index=True)
        _indexed(row)
        yield row
    for path in sorted(ledger.skips):
        skip = ledger.skips[path]
        state, code = ("failed", fail_code(skip.reason)) if skip.failed else ("skipped", skip_code(skip.reason))
        yield FileCoverage(path, state, code, _words(path, skip.reason), kind_of(path), skip.size,
                           from_index=True)


def skip_code(reason: str) -> str:
    """The code of a skip's reason (:data:`SKIP_CODES`; ``not_converted`` for any other)."""
    return next((code for words, code in SKIP_CODES if words in reason), "not_converted")


def fail_code(reason: str) -> str:
    return "unreadable" if ": cannot read (" in reason else "error"


def _words(path: str, reason: str) -> str:
    """A warning without the path it begins with and the ``; skipped`` it ends with."""
    text = reason[len(path) + 2:] if reason.startswith(f"{path}: ") else reason
    for tail in ("; skipped", "; kept its previous chunks"):
        text = text.removesuffix(tail)
    return text


def coverage_counts(rows) -> dict[str, int]:
    """{state: files} over ``rows`` in :data:`STATES` order (states with none included)."""
    counts = dict.fromkeys(STATES, 0)
    for row in rows:
        counts[row.state] += 1
    return counts
