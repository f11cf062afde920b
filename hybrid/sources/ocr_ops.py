"""Text recognition (OCR) in the converter worker: images decoded with Pillow under a pixel
bound, and their text read by Tesseract, line by line, each line with its box.

This module runs in the converter worker (:mod:`hybrid.sources.worker` loads it by path) and,
like it, imports nothing of hybrid. Every step is bounded:

- **Decoding.** ``Image.open`` reads the header only: an image of more than ``max_pixels``
  (a 50,000 × 50,000 PNG of a few hundred kB) is refused before a pixel is decoded. Only the
  first frame of an animation or multi-page TIFF is read (its other pages are never walked).
  A truncated or mislabelled file fails to decode: one reply ``damaged``.
- **Recognising.** Tesseract (Debian's ``tesseract-ocr``, Apache-2.0) runs as a child of the
  worker, so the worker's address-space and CPU limits bound it too; it dies with the worker
  (``PR_SET_PDEATHSIG``) when the parent kills that at the document's deadline, and is given
  that deadline itself. One thread (``OMP_THREAD_LIMIT=1``): the embedder has the other core.
- **Scale.** Tesseract reads text best at 20-40 pixels a line: an image of under
  :data:`UPSCALE_BELOW` pixels (a screenshot) is read at twice its size, one of over
  :data:`OCR_MAX_PIXELS` (a 600 dpi scan) is shrunk to that. Boxes are given in the image's
  own pixels.
- **Skew.** A page tilted by up to :data:`MAX_SKEW` degrees (a scan fed in askew, a photo) is
  straightened first (:func:`skew`): tilted lines run into each other and Tesseract reads
  them as one.
- **Orientation.** When the first reading finds little text it trusts, Tesseract's
  orientation detection (``--psm 0``) is asked whether the image is turned; a turned image is
  read again upright and the better reading kept.

Tesseract's hOCR output is read: each word with its box and confidence, each line with
whether it is bold (:func:`bold_lines`: the width of its strokes) and the size of its type (for
headings) told from its x-height, which Tesseract measures on the line's
lowercase letters (``x_size`` less ``x_ascenders`` and ``x_descenders``): its row height
(``x_size``) is a guess where a line has no letter reaching below or above, and varied by 10 %
between headings of one size where the x-height varied by 3 %. A line with fewer than two
lowercase letters of x-height (``NOTE``, ``2025-03-03``) has no size (never a heading by its
size): its x-height would be its capitals'. A line with no word Tesseract is fairly sure of
(:data:`MIN_LINE_CONF`) is dropped: a photograph's texture reads as strings of symbols, never as
words. Every word of a line kept is kept, however unsure Tesseract is of it
(:data:`MIN_WORD_CONF`): the words it is unsure of in a line of text are mostly the ones no
dictionary holds, identifiers (``/etc/pve/lxc/110.conf`` at 18 of 100, ``dev1:`` at 29, ``grep``
at 8 on one scanned page); dropping those under 30 lost a tenth of the identifiers of the sample
set's scans (0.954 of their words read with them, 0.908 without).
"""

from __future__ import annotations

import html
import io
import os
import re
import shutil
import subprocess

DEFAULT_MAX_PIXELS = 100_000_000  # decoded at most (a 600 dpi A3 scan is ~70 Mpx)
OCR_MAX_PIXELS = 24_000_000      # read by Tesseract at most (larger ones are shrunk to this)
UPSCALE_BELOW = 2_000_000        # read at twice their size below this (screenshots)
MIN_WORD_CONF = 0.0               # a word of a line kept is kept from this confidence (of 100)
MIN_LINE_CONF = 60.0
TRUSTED_SHARE = 0.5              # under this share of trusted words, the orientation is checked
X_HEIGHT_EM = 0.55               # a typical x-height in ems: a line's size is its x-height over this
_X_LETTERS = frozenset("acemnorsuvwxz")  # lowercase letters of x-height alone
ENGINE = "tesseract"


class Refused(Exception):
    """The image cannot be read: ``kind`` is ``damaged``, ``too-large`` or ``no-engine``."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind, self.message = kind, message


def engine_version() -> str:
    """Tesseract's version line (``tesseract 5.3.0``), or "" when it is not installed."""
    exe = shutil.which(ENGINE)
    if exe is None:
        return ""
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    text = (out.stdout or out.stderr).decode("utf-8", "replace").strip()
    return text.splitlines()[0] if text else ""


def installed_languages() -> list[str]:
    """The language data Tesseract has (``eng``, ``deu``, …; ``osd`` left out)."""
    exe = shutil.which(ENGINE)
    if exe is None:
        return []
    try:
        out = subprocess.run([exe, "--list-langs"], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return []
    lines = out.stdout.decode("utf-8", "replace").splitlines()
    return sorted(x.strip() for x in lines[1:] if x.strip() and x.strip() != "osd" and " " not in x.strip())


def open_image(source: str | bytes, max_pixels: int):
    """(the first frame of the image at ``source`` (a path or its bytes), decoded, as an 8-bit
    grey image on white (transparency flattened); whether it is a TIFF of more pages than that,
    told by stepping to the second page only). Raises :class:`Refused`."""
    from PIL import Image, ImageFile, UnidentifiedImageError
    _heif()
    ImageFile.LOAD_TRUNCATED_IMAGES = False
    Image.MAX_IMAGE_PIXELS = None  # our own bound below, before decoding
    try:
        img = Image.open(source if isinstance(source, str) else io.BytesIO(source))
    except UnidentifiedImageError:
        raise Refused("damaged", "not an image Pillow can read (damaged, or another kind of file)") from None
    except (OSError, ValueError, SyntaxError) as exc:
        raise Refused("damaged", f"cannot read the image ({_line(exc)})") from None
    w, h = img.size
    if w <= 0 or h <= 0:
        raise Refused("damaged", "an image of no pixels")
    if w * h > max_pixels:
        raise Refused("too-large", f"{w:,} × {h:,} pixels is over the {max_pixels:,} an image may "
                                   f"have (a decompression bomb, or a scan at too high a resolution)")
    more = False
    if img.format == "TIFF":  # a fax or a scanner's document: its other pages are not read
        try:
            img.seek(1)
            more = True
        except (EOFError, OSError, ValueError, SyntaxError):
            pass
    try:
        img.seek(0)
        want = _ocr_scale(w, h)
        if want < 1 and img.format == "JPEG":
            img.draft("L", (max(1, int(w * want)), max(1, int(h * want))))  # decode at a smaller size
        img.load()
    except (OSError, ValueError, SyntaxError, EOFError) as exc:
        raise Refused("damaged", f"cannot decode the image ({_line(exc)})") from None
    if img.mode in ("RGBA", "LA", "PA") or (img.mode == "P" and "transparency" in img.info):
        rgba = img.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, rgba).convert("L"), more
    return img.convert("L"), more


def _heif() -> None:
    try:  # HEIC/HEIF photos, where pillow-heif is installed (hybrid[heic])
        from pillow_heif import register_heif_opener
    except ImportError:
        return
    register_heif_opener()


def _ocr_scale(w: int, h: int) -> float:
    pixels = w * h
    if pixels > OCR_MAX_PIXELS:
        return (OCR_MAX_PIXELS / pixels) ** 0.5
    if pixels < UPSCALE_BELOW:
        return 2.0
    return 1.0


def _line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:160] if text else type(exc).__name__


def recognise(img, languages: str, seconds: float, original: tuple[int, int] | None = None) -> dict:
    """The text of the grey image ``img``: ``{"paras": [[[text, x0, y0, x1, y1, conf, size, bold],
    …], …], "rotated": degrees}`` in the pixels of ``original`` (its size before any scaling;
    default: ``img``'s); ``bold`` 1 for a line set in bold (:func:`bold_lines`), else 0. Raises
    :class:`Refused` (``no-engine``) without Tesseract."""
    from PIL import Image
    w0, h0 = original or img.size
    scale = _ocr_scale(*img.size)
    if scale != 1.0:
        img = img.resize((max(1, round(img.width * scale)), max(1, round(img.height * scale))),
                         Image.Resampling.LANCZOS)
    tilt = skew(img)
    if tilt:  # straightened about its centre: boxes move by a few pixels at most
        img = img.rotate(tilt, resample=Image.Resampling.BICUBIC, fillcolor=255)
    png = _png(img)
    deadline = _Deadline(seconds)
    paras, trusted, total = _read_hocr(_tesseract(png, ["-l", languages, "--psm", "3"], deadline, "hocr"))
    rotated = 0
    if total < 3 or trusted < TRUSTED_SHARE * total:
        turn = _orientation(png, deadline)
        if turn:
            # Tesseract's "Rotate: N" is the clockwise turn that puts the text upright
            upright = img.rotate(-turn, expand=True, fillcolor=255)
            again, t2, n2 = _read_hocr(_tesseract(_png(upright), ["-l", languages, "--psm", "3"], deadline, "hocr"))
            if t2 > trusted:
                paras, trusted, total, rotated = again, t2, n2, turn
                img = upright
    # boxes back to the original image's pixels (through the turn, if any)
    upright_w, upright_h = (img.width, img.height) if rotated in (0, 180) else (img.height, img.width)
    sx, sy = w0 / upright_w, h0 / upright_h
    bold = iter(bold_lines(img, paras))
    out = []
    for para in paras:
        lines = []
        for text, x0, y0, x1, y1, conf, size in para:
            bx0, by0, bx1, by1 = _unturn(x0, y0, x1, y1, rotated, img.width, img.height)
            lines.append([text, round(bx0 * sx), round(by0 * sy), round(bx1 * sx), round(by1 * sy), round(conf, 1),
                          round(size * (sy if rotated in (0, 180) else sx), 1), int(next(bold))])
        out.append(lines)
    return {"paras": out, "rotated": rotated}


BOLD_STROKE = 1.3  # a line whose strokes are this much thicker (for its x-height) than the body's is bold


def stroke(a, box: tuple[int, int, int, int]) -> float:
    """The width in pixels of the strokes of the text in ``box`` of the grey image array ``a``:
    the median run of ink along its rows (ink: darker than halfway between the box's paper and
    its darkest ink). 0 where the box holds too little contrast to tell."""
    import numpy as np
    x0, y0, x1, y1 = box
    crop = a[max(0, y0):max(0, y1 + 1), max(0, x0):max(0, x1 + 1)]
    if crop.size < 16:
        return 0.0
    lo, hi = np.percentile(crop, (5, 95))
    if hi - lo < 40:
        return 0.0
    ink = np.pad(crop < (lo + hi) / 2, ((0, 0), (1, 1))).astype(np.int8)
    edges = np.diff(ink, axis=1)
    runs = np.nonzero(edges == -1)[1] - np.nonzero(edges == 1)[1]
    return float(np.median(runs)) if runs.size else 0.0


def bold_lines(img, paras: list[list[list]]) -> list[bool]:
    """Which lines of ``paras`` (as :func:`_read_hocr` reads them, in the pixels of the grey
    ``img``) are set in bold, in reading order: those whose strokes are :data:`BOLD_STROKE`
    times thicker, for their x-height, than the body's (the weight most of the characters are
    set in). Tesseract's LSTM engine does not say which words are bold; a bold face's stems are
    about one and a half times a regular one's. A line with no size (no x-height) is not bold."""
    import numpy as np
    a = np.asarray(img if img.mode == "L" else img.convert("L"))
    weight: list[float] = []
    for para in paras:
        for _text, x0, y0, x1, y1, _conf, size in para:
            w = stroke(a, (x0, y0, x1, y1))
            weight.append(w / (size * X_HEIGHT_EM) if size > 0 and w > 0 else 0.0)
    chars = [len(line[0]) for para in paras for line in para]
    known = sorted((w, n) for w, n in zip(weight, chars) if w > 0)
    if not known:
        return [False] * len(weight)
    half, seen, body = sum(n for _, n in known) / 2, 0, known[-1][0]
    for w, n in known:  # the weight at the middle character
        seen += n
        if seen >= half:
            body = w
            break
    return [w >= body * BOLD_STROKE for w in weight]


MAX_SKEW = 6.0   # degrees a page may be tilted and still be straightened
SKEW_STEP = 0.5


def skew(img) -> float:
    """The angle (degrees, counter-clockwise) that levels the text lines of the grey image
    ``img``, or 0 when it is level or cannot be told: the angle whose rows of dark pixels are
    most uneven (text lines and the gaps between them), tried on a copy at most 1,000 pixels
    wide, every :data:`SKEW_STEP` degrees up to :data:`MAX_SKEW`."""
    import numpy as np
    from PIL import Image
    small = img if img.width <= 1000 else img.resize((1000, max(1, img.height * 1000 // img.width)))
    ink = small.point(lambda v: 255 if v < 128 else 0)
    if not np.asarray(ink).any():
        return 0.0
    best, best_score, level = 0.0, -1.0, 0.0
    steps = int(MAX_SKEW / SKEW_STEP)
    for k in range(-steps, steps + 1):
        angle = k * SKEW_STEP
        turned = ink.rotate(angle, resample=Image.Resampling.NEAREST, fillcolor=0)
        rows = np.asarray(turned, dtype=np.float32).sum(axis=1)
        score = float(rows.var())
        if k == 0:
            level = score
        if score > best_score:
            best, best_score = angle, score
    return best if abs(best) >= 1.0 and best_score > 1.15 * level else 0.0


def _unturn(x0: int, y0: int, x1: int, y1: int, turn: int, w: int, h: int) -> tuple[int, int, int, int]:
    """A box in an image turned clockwise by ``turn`` (of size w × h) as a box of the image
    before the turn."""
    if turn == 90:    # (x, y) of the turned image was (y, h - x) … of the original
        return y0, w - x1, y1, w - x0
    if turn == 180:
        return w - x1, h - y1, w - x0, h - y0
    if turn == 270:
        return h - y1, x0, h - y0, x1
    return x0, y0, x1, y1


def _png(img) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


class _Deadline:
    def __init__(self, seconds: float) -> None:
        import time
        self.end = time.monotonic() + max(1.0, seconds)

    def left(self) -> float:
        import time
        return max(0.5, self.end - time.monotonic())


def _die_with_parent() -> None:
    try:  # Linux: killed when the worker is (the parent kills it at the document's deadline)
        import ctypes
        ctypes.CDLL(None).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):
        pass


def _tesseract(png: bytes, args: list[str], deadline: _Deadline, *configs: str) -> str:
    exe = shutil.which(ENGINE)
    if exe is None:
        raise Refused("no-engine", "Tesseract is not installed")
    env = {**os.environ, "OMP_THREAD_LIMIT": "1"}
    try:
        out = subprocess.run([exe, "stdin", "stdout", *args, *configs], input=png, capture_output=True,
                             timeout=deadline.left(), env=env, check=False,
                             preexec_fn=_die_with_parent if os.name == "posix" else None)  # noqa: PLW1509
    except subprocess.TimeoutExpired:
        raise Refused("timeout", "Tesseract took longer than the document may") from None
    except OSError as exc:
        raise Refused("no-engine", f"Tesseract could not be started ({_line(exc)})") from None
    if out.returncode != 0:
        err = out.stderr.decode("utf-8", "replace").strip().splitlines()
        why = next((x for x in err if "rror" in x or "ailed" in x), err[-1] if err else f"exit {out.returncode}")
        raise Refused("engine", f"Tesseract failed: {why[:200]}")
    return out.stdout.decode("utf-8", "replace")


def _orientation(png: bytes, deadline: _Deadline) -> int:
    """The clockwise turn (0, 90, 180, 270) Tesseract's orientation detection says the image
    needs, or 0 when it cannot tell (too little text, or no ``osd`` data)."""
    try:
        text = _tesseract(png, ["--psm", "0", "-l", "osd"], deadline)
    except Refused as exc:
        if exc.kind in ("no-engine", "timeout"):
            raise
        return 0
    turn, conf = 0, 0.0
    for line in text.splitlines():
        key, _, value = line.partition(":")
        try:
            if key.strip() == "Rotate":
                turn = int(value.strip())
            elif key.strip() == "Orientation confidence":
                conf = float(value.strip())
        except ValueError:
            return 0
    return turn if turn in (90, 180, 270) and conf >= 1.0 else 0


_HOCR_TAG = re.compile(r"<(?:p|span) class='(ocr_par|ocr_line|ocr_header|ocr_caption|ocr_textfloat|ocrx_word)'"
                       r"[^>]*?title=(['\"])(.*?)\2[^>]*>", re.S)
_HOCR_END = re.compile(r"</span>")
_TAGS = re.compile(r"<[^>]*>")


def _fields(title: str) -> dict[str, list[str]]:
    out = {}
    for part in title.split(";"):
        words = part.split()
        if words:
            out[words[0]] = words[1:]
    return out


def _read_hocr(hocr: str) -> tuple[list[list[list]], int, int]:
    """(paragraphs of [text, x0, y0, x1, y1, mean conf, size] lines, words trusted, words read)
    of Tesseract's hOCR output; a line's size is the size of its type in pixels, told from its
    x-height (:func:`_size`)."""
    paras: list[list[list]] = []
    para: list[list] = []
    line: list[tuple[str, int, int, int, int, float]] = []
    size = 0.0
    trusted = total = 0

    def close_line() -> None:
        nonlocal line
        if line and max(c for *_, c in line) >= MIN_LINE_CONF:
            text = " ".join(w for w, *_ in line)
            para.append([text, min(w[1] for w in line), min(w[2] for w in line),
                         max(w[3] for w in line), max(w[4] for w in line),
                         sum(w[5] for w in line) / len(line), size if _x_letters(text) else 0.0])
        line = []

    def close_para() -> None:
        nonlocal para
        close_line()
        if para:
            paras.append(para)
        para = []

    for m in _HOCR_TAG.finditer(hocr):
        kind, fields = m.group(1), _fields(html.unescape(m.group(3)))
        if kind == "ocr_par":
            close_para()
        elif kind != "ocrx_word":
            close_line()
            size = _size(fields)
        else:
            end = _HOCR_END.search(hocr, m.end())
            word = html.unescape(_TAGS.sub("", hocr[m.end():end.start() if end else m.end()])).strip()
            try:
                x0, y0, x1, y1 = (int(v) for v in fields["bbox"][:4])
                conf = float((fields.get("x_wconf") or ["-1"])[0])
            except (KeyError, ValueError):
                continue
            if not word or conf < 0:
                continue
            total += 1
            trusted += conf >= MIN_LINE_CONF
            if conf >= MIN_WORD_CONF:
                line.append((word, x0, y0, x1, y1, conf))
    close_para()
    return paras, trusted, total


def _size(fields: dict[str, list[str]]) -> float:
    """A line's type size in pixels from hOCR's row measures: its x-height (``x_size`` less
    ``x_ascenders`` and ``x_descenders``) over :data:`X_HEIGHT_EM`; 0 where they are missing."""
    try:
        row, up, down = (float((fields.get(k) or ["0"])[0]) for k in ("x_size", "x_ascenders", "x_descenders"))
    except ValueError:
        return 0.0
    x_height = row - up - down
    return x_height / X_HEIGHT_EM if row > 0 and x_height > 0 else 0.0


def _x_letters(text: str) -> bool:
    """Has two or more lowercase letters of x-height, on which its x-height was measured."""
    return sum(c in _X_LETTERS for c in text) >= 2


def image_op(header: dict, payload: bytes) -> dict:
    """The worker's ``image`` operation: the recognised text of one image (from the file
    ``header["path"]``, else ``payload``), with its size in pixels."""
    source = header["path"] if header.get("path") is not None else payload
    try:
        img, more = open_image(source, int(header.get("max_pixels") or DEFAULT_MAX_PIXELS))
        got = recognise(img, str(header.get("languages") or "eng"), float(header.get("seconds") or 60))
    except Refused as exc:
        return {"ok": False, "kind": exc.kind, "message": exc.message}
    return {"ok": True, "width": img.width, "height": img.height, "more_pages": more, **got}


def render_page(page, max_pixels: int, dpi: int = 300):
    """A PDF page (pypdfium2) rendered grey at ``dpi``, or smaller to stay within ``max_pixels``."""
    w, h = page.get_size()  # in points, 1/72 inch
    scale = dpi / 72
    if w * h * scale * scale > max_pixels:
        scale = (max_pixels / max(1.0, w * h)) ** 0.5
    bitmap = page.render(scale=scale, grayscale=True)
    try:
        return bitmap.to_pil().convert("L")
    finally:
        bitmap.close()
