"""Text in pictures: images read by OCR as notes, and what OCR a vault reads with.

An image (``png``, ``jpg``, ``webp``, ``gif``, ``tiff``, ``bmp``, ``heic`` with pillow-heif) is a
document of kind ``image``: the converter worker decodes it under a pixel bound and Tesseract
reads its text (:mod:`hybrid.sources.ocr_ops`, in the worker, under ``convert_max_memory_mb``
and ``convert_timeout``). Its note is the recognised lines, a blank line between paragraphs,
titled by the file name, a line whose type Tesseract sizes clearly larger than the body's a
heading (as a PDF's by its type: :mod:`hybrid.sources.structure`); each line's box (``x0, y0, x1, y1`` in
the image's pixels) is kept in the reserved property ``hybrid:boxes``, so a hit carries the box
of its lines (:func:`box_of`).
A scanned PDF's pages without a text layer are read the same way (:mod:`hybrid.sources.pdf`).

**Which languages** (:func:`plan_for`): the ``ocr_languages`` setting (a vault's own first), as
ISO codes (``en``, ``de``) or Tesseract's (``eng``, ``chi_sim``); by default English and the
languages the vault's notes are in, as sampled at its first index run with pictures to read, and
kept from then on (:data:`PLAN_META`). Only those Tesseract has
data for are used; a missing one is named, with the package that adds it.

**Recognised once** (:class:`Cache`): each result is kept in the vault's index folder
(``ocr/``), keyed by the file's content hash, the languages and the engine's version, so a
re-index (a changed chunking, a ``--force``, a renamed or copied file) never reads a picture
twice, and ``hybrid get`` of an image shows its text without reading it again.

**Without Tesseract**, or with ``ocr = false``: an image is skipped with one warning that says
how to enable it (:data:`ENABLE`); with OCR off it is not listed at all.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hybrid.sources.markdown import Note
from hybrid.sources.sandbox import ConvertError, Limits, convert, convert_limits

BOXES_PROPERTY = "hybrid:boxes"  # reserved: never a frontmatter key of the owner's
SIZE_PROPERTY = "hybrid:image"   # [width, height] in pixels
RECIPE = 7  # bumped when what the worker does to an image changes: older results are not reused
ENABLE = ("install Tesseract to read text in images and scans: `bash scripts/ocr.sh` (Debian/"
          "Ubuntu: `sudo apt install tesseract-ocr`; macOS: `brew install tesseract`), then run "
          "`hybrid index` again")
# ISO 639-1 codes (as hybrid.core.lang names languages) → Tesseract's language data
TESSERACT_CODES = {
    "en": "eng", "de": "deu", "fr": "fra", "es": "spa", "it": "ita", "nl": "nld", "pt": "por",
    "ru": "rus", "ar": "ara", "eu": "eus", "fa": "fas", "lv": "lav", "pl": "pol", "sv": "swe",
    "da": "dan", "no": "nor", "fi": "fin", "cs": "ces", "tr": "tur", "uk": "ukr", "el": "ell",
    "he": "heb", "hi": "hin", "ja": "jpn", "ko": "kor", "zh": "chi_sim",
}
# the headings a page of a series carries from the page before: (its page's path, text, type
# size / body size), top first (hybrid.sources.series)
Carried = Sequence[tuple[str, str, float]]
# catalog meta: the languages a vault's pictures are read in when no `ocr_languages` says which,
# chosen at the first index run with pictures to read (from its notes' languages) and kept:
# pictures read later are read alike, and their text read again (`get`) is what was indexed
PLAN_META = "ocr_plan"
MAX_OCR_LANGUAGES = 4  # each language more slows recognition; past a few it also misreads more


class NoEngine(ConvertError):
    """OCR is needed but cannot run here (no Tesseract, or OCR turned off)."""


@dataclass(frozen=True)
class OcrPlan:
    """How a vault reads text in pictures: ``languages`` for Tesseract (``eng+deu``; "" when
    OCR cannot run), why not (``off``), the cache folder, and warnings about the choice."""
    languages: str
    off: str = ""
    cache: str | None = None
    warnings: tuple[str, ...] = ()


@functools.cache
def engine() -> tuple[str, tuple[str, ...]]:
    """(Tesseract's version line, its languages), ("", ()) when it is not installed. Asked once
    a process."""
    from hybrid.sources.ocr_ops import engine_version, installed_languages
    if shutil.which("tesseract") is None:
        return "", ()
    return engine_version(), tuple(installed_languages())


def tesseract_code(lang: str) -> str:
    lang = lang.strip().lower()
    return TESSERACT_CODES.get(lang, lang)


def plan_for(enabled: bool, configured: tuple[str, ...] | list[str], held: list[str],
             cache: Path | None, kept: str | None = None) -> OcrPlan:
    """The OCR plan of a vault: on unless ``enabled`` is false, in the ``configured`` languages
    (empty: those its pictures were read in before, ``kept`` as ``eng+deu``; none before:
    English and the ``held`` ones), those Tesseract has data for."""
    if not enabled:
        return OcrPlan("", "OCR is off for this vault (`ocr = false`)")
    version, have = engine()
    if not version:
        return OcrPlan("", ENABLE)
    default = kept.split("+") if kept else ["en", *held]
    wanted = [tesseract_code(x) for x in (configured or default)]
    wanted = list(dict.fromkeys(w for w in wanted if w))
    usable = [w for w in wanted if w in have][:MAX_OCR_LANGUAGES]
    warnings = []
    missing = [w for w in wanted if w not in have]
    if missing and configured:
        warnings.append(f"ocr_languages: Tesseract has no data for {', '.join(missing)} here (Debian: "
                        f"`sudo apt install {' '.join('tesseract-ocr-' + m.replace('_', '-') for m in missing)}`)")
    if not usable:
        usable = ["eng"] if "eng" in have else list(have[:1])
    if not usable:
        return OcrPlan("", "Tesseract has no language data: `sudo apt install tesseract-ocr-eng`")
    return OcrPlan("+".join(usable), cache=str(cache) if cache is not None else None,
                   warnings=tuple(warnings))


def vault_plan(vault: Any, held_meta: str | None, kept: str | None = None) -> OcrPlan:
    """The OCR plan of ``vault`` (a :class:`hybrid.core.config.Vault`), whose ledger records
    ``held_meta`` as the languages its notes are in (:data:`hybrid.core.lang.LANGUAGES_META`)
    and ``kept`` as those its pictures were read in by default (:data:`PLAN_META`): the indexer,
    ``hybrid get`` and ``status`` read with one plan, so a picture is read once and shown as its
    index read it."""
    held = [x for x in (held_meta or "").split(",") if x]
    return plan_for(vault.ocr, tuple(vault.ocr_languages), held, Path(vault.index_dir) / "ocr", kept)


def with_plan(limits: Limits, plan: OcrPlan) -> Limits:
    """``limits`` reading with ``plan``."""
    from dataclasses import replace
    return replace(limits, ocr=plan.languages, ocr_off=plan.off, ocr_cache=plan.cache)


class Cache:
    """Recognised text kept by content hash, languages and engine (see the module docstring).
    A folder of small JSON files; a file that cannot be read or written is a miss, never an
    error."""

    def __init__(self, folder: str | None, languages: str) -> None:
        self.folder = Path(folder) if folder else None
        version = engine()[0]
        self.tag = hashlib.blake2b(f"{version}|{languages}|{RECIPE}".encode(), digest_size=6).hexdigest()

    def _file(self, digest: str, part: str) -> Path | None:
        if self.folder is None:
            return None
        return self.folder / digest[:2] / f"{digest}-{part}-{self.tag}.json"

    def get(self, digest: str, part: str = "image") -> Any:
        path = self._file(digest, part)
        if path is None:
            return None
        try:
            return json.loads(path.read_text("utf-8"))
        except (OSError, ValueError):
            return None

    def put(self, digest: str, value: Any, part: str = "image") -> None:
        path = self._file(digest, part)
        if path is None:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(value, ensure_ascii=False), "utf-8")
            os.replace(tmp, path)
        except OSError:
            pass

    def prune(self, live: set[str]) -> int:
        """Delete the entries no file of the vault hashes to any more (``live``: the ledger's
        content hashes) and those read with another plan or engine (languages, Tesseract's
        version, :data:`RECIPE`), and writes left half done. Returns the files removed. Unless
        Tesseract is missing here: then an entry of a live file is kept whatever its plan, as
        the engine's version that would tell is unknown."""
        if self.folder is None or not self.folder.is_dir():
            return 0
        keep_any_plan = not engine()[0]
        removed = 0
        for path in self.folder.glob("??/*"):
            name = path.name
            digest, _, rest = name.partition("-")
            stale = name.endswith(".tmp") or digest not in live or not name.endswith(".json") or \
                (not keep_any_plan and not rest.endswith(f"-{self.tag}.json"))
            if stale:
                try:
                    path.unlink()
                    removed += 1
                except OSError:
                    pass
        for sub in self.folder.iterdir():
            try:
                sub.rmdir()  # only empty ones go
            except OSError:
                pass
        return removed


def prune_cache(vault: Any, catalog: Any) -> int:
    """:meth:`Cache.prune` of ``vault``'s OCR cache, against its ledger ``catalog`` (the plan
    it reads with now, the content hashes it records). `hybrid vacuum` calls it."""
    from hybrid.core.lang import LANGUAGES_META
    plan = vault_plan(vault, catalog.get_meta(LANGUAGES_META))
    folder = Path(vault.index_dir) / "ocr"
    if not folder.is_dir():
        return 0
    return Cache(str(folder), plan.languages).prune({row.hash for row in catalog.files().values()})


def image_note(path: str, source: str | bytes, limits: Limits | None = None,
               carried: Carried = ()) -> Note:
    """The note of the image at ``source`` (its file's path, or its bytes): its recognised
    lines. Raises :class:`NoEngine` when OCR cannot run, ConvertError for an image that cannot
    be read (damaged, too large, over the worker's bounds) or that has no text. ``carried``:
    the headings in force at the end of the page before, when the picture is a page of a
    series (:mod:`hybrid.sources.series`, :func:`page_end`)."""
    limits = limits or convert_limits()
    if not limits.ocr:
        raise NoEngine(path, limits.ocr_off or ENABLE, "no-engine")
    from hybrid.sources.walk import file_digest
    digest = file_digest(source)
    got = cached_reading(digest, limits)
    if got is None:
        args = {"path": source} if isinstance(source, str) else {}
        reply = convert("image", path, limits, b"" if isinstance(source, str) else source,
                        languages=limits.ocr, seconds=max(1.0, limits.timeout - 2), **args)
        if not reply["ok"]:
            kind, why = str(reply.get("kind") or ""), str(reply.get("message") or "unreadable")
            if kind == "no-engine":
                raise NoEngine(path, ENABLE, "no-engine")
            raise ConvertError(path, why if kind != "damaged" else f"not a readable image ({why})", kind or "error")
        if not _reply_ok(reply):
            raise ConvertError(path, "the converter sent a malformed reply")
        got = {"paras": reply["paras"], "width": reply["width"], "height": reply["height"],
               "rotated": reply.get("rotated", 0), "more_pages": bool(reply.get("more_pages"))}
        Cache(limits.ocr_cache, limits.ocr).put(digest, got)
    note = _note(path, got, carried)
    if got.get("more_pages"):
        note.warnings.append(f"{path}: a TIFF of several pages: only its first page is read")
    return note


def _reply_ok(got: Any) -> bool:
    if not isinstance(got, dict) or not isinstance(got.get("paras"), list):
        return False
    if not isinstance(got.get("width"), int) or not isinstance(got.get("height"), int):
        return False
    for para in got["paras"]:
        if not isinstance(para, list):
            return False
        for line in para:
            if not (isinstance(line, list) and len(line) == 8 and isinstance(line[0], str)
                    and all(isinstance(v, (int, float)) for v in line[1:])):
                return False
    return True


def cached_reading(digest: str, limits: Limits) -> dict | None:
    """What OCR read of the picture whose content hash is ``digest`` before (its :class:`Cache`
    entry for ``limits``' languages), without reading it again: None when there is none."""
    if not limits.ocr or limits.ocr_cache is None:
        return None
    got = Cache(limits.ocr_cache, limits.ocr).get(digest)
    return got if _reply_ok(got) else None


def _read_lines(got: dict) -> tuple[list[str], list[list[int] | None], list[float], list[bool]]:
    """(lines, each line's box, each line's type size, whether it is bold) of a reading, a blank
    line (no box, size 0) between paragraphs."""
    from hybrid.sources.markdown import converted_text as clean
    lines: list[str] = []
    boxes: list[list[int] | None] = []
    sizes: list[float] = []
    bold: list[bool] = []
    for para in got["paras"]:
        if lines:
            lines.append("")
            boxes.append(None)
            sizes.append(0.0)
            bold.append(False)
        for text, x0, y0, x1, y1, _conf, size, heavy in para:
            lines.append(clean(" ".join(text.split())))
            boxes.append([int(x0), int(y0), int(x1), int(y1)])
            sizes.append(float(size))
            bold.append(bool(heavy))
    return lines, boxes, sizes, bold


def _headings(lines: list[str], sizes: list[float], bold: list[bool],
              carried: Carried) -> tuple[dict[int, int], list[int], float]:
    """({line: heading level}, the ``carried`` headings' levels, the body's type size): the
    headings from the size and weight of the lines' type, as a PDF's
    (:mod:`hybrid.sources.structure`), their levels set among the carried ones' by size
    relative to the body."""
    from hybrid.sources.structure import headings_among
    found, levels, body = headings_among([(i, t, h, b) for i, (t, h, b) in enumerate(zip(lines, sizes, bold))],
                                         [c[2] for c in carried])
    return {i: lv for i, lv in found.items() if isinstance(i, int)}, levels, body


def _heading(line: str) -> str:
    """A recognised line made a heading: its text, not markdown's escape, cut to length."""
    from hybrid.sources.structure import MAX_HEADING_CHARS
    return line.lstrip(chr(92))[:MAX_HEADING_CHARS]


def page_end(path: str, got: dict, carried: Carried = ()) -> tuple[list[tuple[str, str, float]], float]:
    """(the headings in force at the end of the picture ``path`` read as ``got``, top first, as
    ``(path of the page it is on, text, type size / body size)``; its body's type size), the
    page before's ``carried`` in force at its top: what the next page of a series carries."""
    from hybrid.sources.markdown import heading_text
    lines, _, sizes, bold = _read_lines(got)
    levels, carried_levels, body = _headings(lines, sizes, bold, carried)
    stack = [(lv, *c) for lv, c in zip(carried_levels, carried)]
    for i in sorted(levels):
        while stack and stack[-1][0] >= levels[i]:
            stack.pop()
        stack.append((levels[i], path, heading_text(_heading(lines[i])), round(sizes[i] / body, 3) if body else 1.0))
    return [(src, text, r) for _, src, text, r in stack], body


def _note(path: str, got: dict, carried: Carried = ()) -> Note:
    from hybrid.sources.markdown import CARRIED
    lines, boxes, sizes, bold = _read_lines(got)
    levels, carried_levels, _ = _headings(lines, sizes, bold, carried)
    for i, level in levels.items():
        lines[i] = f"{'#' * min(level, 6)} {_heading(lines[i])}"
    if not any(line.strip() for line in lines):
        raise ConvertError(path, "no text recognised in the image", "empty")
    stem = path.rsplit("/", 1)[-1]
    title = stem.rsplit(".", 1)[0] or stem
    properties: dict[str, Any] = {BOXES_PROPERTY: boxes, SIZE_PROPERTY: [got["width"], got["height"]]}
    if carried:  # the chunker starts under these (hybrid.indexing.chunk)
        properties[CARRIED] = [[src, text, r, lv] for lv, (src, text, r) in zip(carried_levels, carried)]
    return Note(path=path, title=title, lines=lines, body_start=1, properties=properties)


def box_of(properties: Any, start: int, end: int | None = None) -> list[int] | None:
    """The box ``[x0, y0, x1, y1]`` (the image's pixels) around lines ``start``..``end`` of an
    image's text, from its note's properties; None when it has none."""
    boxes = properties.get(BOXES_PROPERTY) if isinstance(properties, dict) else None
    if not isinstance(boxes, list):
        return None
    end = start if end is None else end
    got = [b for b in boxes[max(0, start - 1):max(0, end)]
           if isinstance(b, list) and len(b) == 4 and all(isinstance(v, int) for v in b)]
    if not got:
        return None
    return [min(b[0] for b in got), min(b[1] for b in got), max(b[2] for b in got), max(b[3] for b in got)]
