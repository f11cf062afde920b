"""The converter worker: PDFs, web pages and Word files are parsed in a separate process, under a memory
and a time bound, so that one hostile or broken document costs one warning, never the run.

A 1.4 MB PDF whose content stream inflates to 400 MB (a decompression bomb) made PDFium take
5+ GB and abort the whole ``hybrid index``; trafilatura/lxml have their own ways to spend
memory and time. Both now run in a child process that

- is started with ``subprocess`` running this file by path (``python worker.py MB``), not
  ``-m hybrid.sources.worker`` and never by fork: the parent holds ONNX Runtime threads and
  loaded models, and ``hybrid/__init__`` imports the whole API; this file imports nothing of
  hybrid, and the child imports pypdfium2, trafilatura or python-docx only when a document
  needs them;
- limits its own address space (``RLIMIT_AS``, ``convert_max_memory_mb``: the whole process,
  interpreter and libraries included; PDFium aborts when an allocation fails, Python raises
  MemoryError) and, as a backstop for a parent that died mid-document, its CPU time
  (``RLIMIT_CPU``, raised before each document). Where ``resource`` is missing (Windows) or
  the limit cannot be set, only the deadline applies;
- is killed by the parent when a document takes longer than ``convert_timeout`` seconds of
  wall-clock time, and started again for the next document.

The parent's side (starting, watching and stopping workers, :class:`~hybrid.sources.sandbox.
ConvertError`) is :mod:`hybrid.sources.sandbox`. One worker per memory limit stays up for the
documents of a run (its start costs ~50 ms, with trafilatura ~0.3 s) and is stopped when the
index run ends, when ``Hybrid.close()`` is called and at exit (``sandbox.shutdown``). An idle
worker whose parent died reads end-of-file and exits. Calls from several threads take turns
(one lock per worker).

The protocol is plain data, never pickle: the parent must not unpickle what a process that
parsed hostile input sends. A request is two frames (a JSON header, then the document's
bytes, maybe empty); a reply is one JSON frame, checked for shape before use. A frame is an
8-byte big-endian length and its bytes. The child talks on a copy of its stdout and points
fd 1 at /dev/null, so a library that prints cannot corrupt a frame.
"""

from __future__ import annotations

import json
import os
import re
import signal
import struct
import sys
import time
from typing import IO

_LEN = struct.Struct(">Q")
MAX_HEADER_BYTES = 1 << 20


# --- frames: both sides ------------------------------------------------------------------

def write_frame(out: IO[bytes], data: bytes) -> None:
    out.write(_LEN.pack(len(data)))
    out.write(data)


def read_frame(inp: IO[bytes], limit: int) -> bytes | None:
    """One frame's bytes, or None at end of input (or a frame longer than ``limit``)."""
    head = _read_exactly(inp, _LEN.size)
    if head is None:
        return None
    (size,) = _LEN.unpack(head)
    if size > limit:
        return None
    return _read_exactly(inp, size)


def _read_exactly(inp: IO[bytes], size: int) -> bytes | None:
    parts, got = [], 0
    while got < size:
        block = inp.read(size - got)
        if not block:
            return None
        parts.append(block)
        got += len(block)
    return b"".join(parts)


# --- the worker's side: runs in the child process -----------------------------------------

def _limit_resources(memory_mb: int) -> bool:
    """Cap this process's address space at ``memory_mb`` (never above a limit it inherited);
    False where that cannot be done."""
    try:
        import resource
    except ImportError:  # Windows: the parent's deadline is the only bound
        return False
    want = memory_mb * 2**20
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        want = min(want, hard)
    try:
        resource.setrlimit(resource.RLIMIT_AS, (want, want))
    except (ValueError, OSError):  # a platform that does not enforce it (macOS): the deadline
        return False
    return True


def _cpu_budget(seconds: int) -> None:
    """Let the next document use at most ``seconds`` more of CPU time (SIGXCPU ends the
    process beyond it): the deadline's backstop when the parent is gone."""
    try:
        import resource
        used = resource.getrusage(resource.RUSAGE_SELF)
        soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
        limit = int(used.ru_utime + used.ru_stime) + 1 + max(1, seconds)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_CPU, (limit, hard))
    except (ImportError, ValueError, OSError):
        pass


def _fault(name: str) -> None:
    """Test hook: ``HYBRID_FAULT=convert-hang:NAME`` (or ``convert-crash:NAME``) makes the
    worker hang (or abort) on the document NAME, as a pathological input would."""
    fault = os.environ.get("HYBRID_FAULT", "")
    if fault == f"convert-hang:{name}":
        while True:
            time.sleep(60)
    if fault == f"convert-crash:{name}":
        os.abort()


def _sibling(name: str):
    """A worker-side module beside this file (``pdf_ops``, ``ocr_ops``), loaded by path: this
    folder is kept off ``sys.path`` so that no sibling shadows a library."""
    import importlib.util
    key = f"_hybrid_{name}"
    if key not in sys.modules:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
        spec = importlib.util.spec_from_file_location(key, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        spec.loader.exec_module(module)
    return sys.modules[key]


def _pdf(header: dict, payload: bytes) -> dict:
    return _sibling("pdf_ops").pdf_op(header, payload)


def _pdf_ocr(header: dict, payload: bytes) -> dict:
    return _sibling("pdf_ops").pdf_ocr_op(header, payload, _sibling("ocr_ops"))


def _image(header: dict, payload: bytes) -> dict:
    return _sibling("ocr_ops").image_op(header, payload)


_TITLE_RE = re.compile(r"<title[^>]*>(.*?)</title>", re.I | re.S)
_DEPTH_RE = re.compile(r"depth in document: (\d+)")


def _html(header: dict, payload: bytes) -> dict:
    """The page's main text as markdown and its title (see :func:`main_text`), and how deep
    its nesting went past what the parser reads (``too_deep``: that depth, else 0)."""
    html = payload.decode("utf-8", "surrogatepass")
    text, title = main_text(html)
    return {"ok": True, "text": text, "title": title, "too_deep": _too_deep(html)}


def main_text(html: str) -> tuple[str, str]:
    """(main text as markdown, page title) of an HTML page; the whole visible text when no
    main part is found, and ("", title) when the page has no text at all."""
    import trafilatura
    text = trafilatura.extract(html, output_format="markdown", include_comments=False,
                               include_tables=True, favor_recall=True) or ""
    if not text.strip():
        text = trafilatura.html2txt(html) or ""
    title = ""
    try:
        meta = trafilatura.extract_metadata(html)
        title = (meta.title or "") if meta is not None else ""
    except Exception:  # noqa: BLE001 - the title is optional
        title = ""
    if not title:
        m = _TITLE_RE.search(html[:200_000])
        title = " ".join(m.group(1).split()) if m else ""
    if text.lstrip().startswith("---"):
        text = "\n" + text  # never read as frontmatter
    return text, title[:300]


def _too_deep(html: str) -> int:
    """The depth at which libxml2 stopped reading the page (it gives up on nesting deeper
    than 256 elements, and the text inside is lost), or 0 when it read it all."""
    from lxml import etree
    parser = etree.HTMLParser(collect_ids=False, remove_comments=True, remove_pis=True)
    try:
        try:
            etree.fromstring(html, parser)
        except ValueError:  # a str with an encoding declaration: parse its bytes
            etree.fromstring(html.encode("utf-8", "surrogatepass"), parser)
    except (etree.LxmlError, ValueError):
        pass
    for entry in parser.error_log:
        if "Excessive depth" in entry.message:
            m = _DEPTH_RE.search(entry.message)
            return int(m.group(1)) if m else 256
    return 0


_MD_SPECIAL = re.compile(r"^\s{0,3}(#|```|~~~)")
_HEADING_STYLE = re.compile(r"^heading (\d)$")
_LIST_ITEM = re.compile(r"^\s*- ")
_LIST_STYLE = re.compile(r"^list.*?(\d)?$")


def _docx(header: dict, payload: bytes) -> dict:
    """A Word document's body as markdown (see :mod:`hybrid.sources.docx`) and its title
    (its properties' title, else its first paragraph in the Title style);
    ``{"ok": False, "kind": "damaged"}`` for a file that is no Word document."""
    import io
    import zipfile
    try:
        with zipfile.ZipFile(io.BytesIO(payload)) as z:
            names = set(z.namelist())
    except (zipfile.BadZipFile, ValueError, OSError):  # not a zip, or a damaged one
        return {"ok": False, "kind": "damaged", "message": "not a zip file"}
    if "[Content_Types].xml" not in names or not any(n.startswith("word/") for n in names):
        return {"ok": False, "kind": "damaged", "message": "a zip of something else"}
    import docx
    from docx.table import Table
    try:
        document = docx.Document(io.BytesIO(payload))
    except MemoryError:
        raise
    except Exception as exc:  # noqa: BLE001 - python-docx raises many kinds for a broken file
        why = str(exc).strip()
        return {"ok": False, "kind": "damaged", "message": why.splitlines()[0][:120] if why else type(exc).__name__}
    max_chars = int(header.get("max_chars") or 0)
    lines: list[str] = []
    chars, cut, title = 0, False, ""
    for block in document.iter_inner_content():
        new = _docx_table(block) if isinstance(block, Table) else _docx_paragraph(block)
        if not new:
            continue
        if not title and not isinstance(block, Table) and _docx_style(block) == "title":
            title = block.text.strip()
        size = sum(len(x) + 1 for x in new)
        if max_chars and chars + size > max_chars:
            cut = True
            break
        chars += size
        if lines and _LIST_ITEM.match(new[0]) and len(lines) > 1 and _LIST_ITEM.match(lines[-2]):
            lines.pop()  # the items of one list stay one block
        lines += [*new, ""]
    core = (document.core_properties.title or "").strip()
    return {"ok": True, "text": "\n".join(lines), "title": (core or title)[:2000], "cut": cut}


def _docx_style(paragraph) -> str:
    try:
        style = paragraph.style
    except Exception:  # noqa: BLE001 - a style the document names but does not define
        return ""
    return (style.name or "").strip().lower() if style is not None else ""


def _docx_level(paragraph) -> int:
    """The heading level of a paragraph (1-6; Title is 1), else 0: by its style's name
    (``Heading N``), else by the outline level set on it or on its style (Word's own heading
    styles in other languages carry one)."""
    name = _docx_style(paragraph)
    if name == "title":
        return 1
    m = _HEADING_STYLE.match(name)
    if m:
        return min(6, max(1, int(m.group(1))))
    from docx.oxml.ns import qn
    elements = [paragraph.paragraph_format.element]  # the paragraph's w:p
    try:
        style = paragraph.style
        for _ in range(10):  # a style and the styles it is based on
            if style is None:
                break
            elements.append(style.element)
            style = style.base_style
    except Exception:  # noqa: BLE001
        pass
    for el in elements:
        ppr = el.find(qn("w:pPr"))
        lvl = ppr.find(qn("w:outlineLvl")) if ppr is not None else None
        if lvl is not None:
            val = lvl.get(qn("w:val"))
            return min(6, int(val) + 1) if val is not None and val.isdigit() and int(val) < 9 else 0
    return 0


def _docx_paragraph(paragraph) -> list[str]:
    """A paragraph as markdown lines: a heading, a list item (``-``, indented by its level)
    or text (a line markdown would read as a heading or a fence escaped with ``\\``)."""
    text = paragraph.text.replace("\r", "\n").strip()
    if not text:
        return []
    level = _docx_level(paragraph)
    if level:
        return [f"{'#' * level} {' '.join(text.split())}"]
    from docx.oxml.ns import qn
    ppr = paragraph.paragraph_format.element.find(qn("w:pPr"))
    num = ppr.find(qn("w:numPr")) if ppr is not None else None
    out = ["\\" + x.lstrip() if _MD_SPECIAL.match(x) else x for x in text.split("\n")]
    listed = _LIST_STYLE.match(_docx_style(paragraph))
    if num is not None or listed:
        ilvl = num.find(qn("w:ilvl")) if num is not None else None
        val = (ilvl.get(qn("w:val")) or "") if ilvl is not None else ""
        # the level set on the item, else the one its style names (``List Bullet 2``)
        depth = int(val) if val.isdigit() else max(0, int(listed.group(1)) - 1) if listed and listed.group(1) else 0
        out = ["  " * min(depth, 8) + "- " + out[0]] + ["  " * min(depth + 1, 9) + x for x in out[1:]]
    return out


def _docx_table(table) -> list[str]:
    """A table as markdown rows (its first row as the header); a merged cell once per row."""
    rows: list[str] = []
    width = 0
    for row in table.rows:
        cells, seen = [], set()
        for cell in row.cells:
            if id(cell) in seen:  # a merged cell is the same object at each grid place it spans
                continue
            seen.add(id(cell))
            cells.append(" ".join(cell.text.split()).replace("|", "\\|"))
        if any(cells):
            width = width or len(cells)
            rows.append("| " + " | ".join(cells) + " |")
    if len(rows) > 1:
        rows.insert(1, "|" + " --- |" * width)
    return rows


# The operations, by the name a kind's record binds (hybrid.core.kinds.Kind.op). This file
# imports nothing of hybrid, so it cannot read the records: a unit test checks they agree.
_OPS = {"pdf": _pdf, "pdf_ocr": _pdf_ocr, "image": _image, "html": _html, "docx": _docx}


def _serve(memory_mb: int) -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]  # no sibling shadows a library
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    limited = _limit_resources(memory_mb)
    out = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    inp = os.fdopen(0, "rb", buffering=1 << 16)
    write_frame(out, json.dumps({"memory_limit_mb": memory_mb if limited else None,
                                  "python": sys.version.split()[0]}).encode("utf-8"))
    out.flush()
    while True:
        head = read_frame(inp, MAX_HEADER_BYTES)
        payload = read_frame(inp, 1 << 40) if head is not None else None
        if head is None or payload is None:
            return  # the parent closed the pipe (or is gone)
        memory_error = False
        try:
            header = json.loads(head)
            _cpu_budget(int(header.get("cpu", 600)))
            _fault(str(header.get("name", "")))
            reply = _OPS[header["op"]](header, payload)
        except MemoryError:
            reply, memory_error = {"ok": False, "kind": "memory"}, True
        except Exception as exc:  # noqa: BLE001 - one document's failure is its reply
            text = str(exc).strip()
            reply = {"ok": False, "kind": "error",
                     "message": f"{type(exc).__name__}: {text.splitlines()[0][:200] if text else ''}"}
        del payload
        try:
            data = json.dumps(reply, ensure_ascii=False).encode("utf-8", "surrogatepass")
        except MemoryError:
            data, memory_error = b'{"ok": false, "kind": "memory"}', True
        del reply
        write_frame(out, data)
        out.flush()
        if memory_error:
            return


if __name__ == "__main__":
    _serve(int(sys.argv[1]))
