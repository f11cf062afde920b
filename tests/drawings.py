"""Obsidian canvases and Excalidraw drawings written the way Obsidian and its Excalidraw plugin
write them, for the tests of hybrid.sources.canvas and hybrid.sources.excalidraw.

``compress_to_base64`` is lz-string's ``compressToBase64`` (the plugin's ``compressed-json``),
written here from the algorithm so that the decoder is tested against an independent encoder;
``drawing_file`` lays a drawing out as the plugin saves it (front block, banner, ``# Excalidraw
Data``, ``## Text Elements`` with ``^id`` s, links, and the drawing between ``%%``)."""
import json

_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="
BANNER = ("==⚠  Switch to EXCALIDRAW VIEW in the MORE OPTIONS menu of this document. ⚠== You can "
          "decompress Drawing data with the command palette: 'Decompress current Excalidraw file'. "
          "For more info check in plugin settings under 'Saving'")


def compress_to_base64(text: str) -> str:
    """lz-string's compressToBase64 of ``text`` (as JavaScript sees it: UTF-16 code units)."""
    units = text.encode("utf-16-le", "surrogatepass")
    chars = [chr(units[i] | units[i + 1] << 8) for i in range(0, len(units), 2)]
    out: list[str] = []
    val = pos = 0

    def write(value: int, bits: int) -> None:
        nonlocal val, pos
        for _ in range(bits):
            val = (val << 1) | (value & 1)
            value >>= 1
            if pos == 5:
                out.append(_ALPHABET[val])
                val = pos = 0
            else:
                pos += 1

    dictionary: dict[str, int] = {}
    to_create: set[str] = set()
    w, enlarge, size, width = "", 2, 3, 2

    def emit(w: str) -> None:
        nonlocal enlarge, width
        if w in to_create:
            if ord(w[0]) < 256:
                write(0, width)
                write(ord(w[0]), 8)
            else:
                write(1, width)
                write(ord(w[0]), 16)
            enlarge -= 1
            if enlarge == 0:
                enlarge, width = 1 << width, width + 1
            to_create.discard(w)
        else:
            write(dictionary[w], width)
        enlarge -= 1
        if enlarge == 0:
            enlarge, width = 1 << width, width + 1

    for c in chars:
        if c not in dictionary:
            dictionary[c] = size
            size += 1
            to_create.add(c)
        if w + c in dictionary:
            w = w + c
        else:
            emit(w)
            dictionary[w + c] = size
            size += 1
            w = c
    if w:
        emit(w)
    write(2, width)
    while True:  # flush the last character
        val <<= 1
        if pos == 5:
            out.append(_ALPHABET[val])
            break
        pos += 1
    data = "".join(out)
    return data + "=" * (-len(data) % 4)


def text_element(eid: str, text: str, x: float, y: float, deleted: bool = False, link=None) -> dict:
    return {"id": eid, "type": "text", "x": x, "y": y, "width": 200, "height": 25, "angle": 0,
            "strokeColor": "#1e1e1e", "backgroundColor": "transparent", "isDeleted": deleted,
            "link": link, "locked": False, "fontSize": 20, "fontFamily": 1, "text": text,
            "rawText": text, "originalText": text, "textAlign": "left", "verticalAlign": "top",
            "containerId": None, "autoResize": True, "lineHeight": 1.25}


def scene(elements: list[dict]) -> str:
    return json.dumps({"type": "excalidraw", "version": 2,
                       "source": "https://github.com/zsviczian/obsidian-excalidraw-plugin",
                       "elements": elements, "appState": {"gridSize": None, "viewBackgroundColor": "#ffffff"},
                       "files": {}}, indent="\t")


def drawing_file(texts: dict[str, str], elements: list[dict], *, links: dict[str, str] | None = None,
                 embedded: dict[str, str] | None = None, compressed: str | None = None,
                 own: str = "", text_section: bool = True, front: str = "tags: [excalidraw]") -> str:
    """A drawing as the plugin saves it. ``texts``: id -> text of the Text Elements section;
    ``compressed``: the compressed-json payload to write instead of compressing ``elements``
    (a broken one, say); ``text_section=False``: an older or hand-made file without one."""
    payload = compressed if compressed is not None else compress_to_base64(scene(elements))
    chunks = "\n\n".join(payload[i:i + 64] for i in range(0, len(payload), 64))  # as the plugin splits it
    out = ["---", "", "excalidraw-plugin: parsed", front, "", "---", ""]
    if own:
        out += [own, ""]
    out += [BANNER, "", "", "# Excalidraw Data", ""]
    if text_section:
        out += ["## Text Elements"] + [f"{t} ^{i}\n" for i, t in texts.items()]
    if links:
        out += ["## Element Links"] + [f"{i}: {t}" for i, t in links.items()] + [""]
    if embedded:
        out += ["## Embedded Files"] + [f"{i}: {t}" for i, t in embedded.items()] + [""]
    out += ["%%", "## Drawing", "```compressed-json", chunks, "```", "%%"]
    return "\n".join(out)


def json_canvas(nodes: list[dict], edges: list[dict] | None = None) -> str:
    """A canvas file as Obsidian writes one (tab-indented, one node per line)."""
    rows = ",\n\t\t".join(json.dumps(n, ensure_ascii=False, separators=(",", ":")) for n in nodes)
    erows = ",\n\t\t".join(json.dumps(e, ensure_ascii=False, separators=(",", ":")) for e in edges or [])
    return '{\n\t"nodes":[\n\t\t' + rows + '\n\t],\n\t"edges":[\n\t\t' + erows + "\n\t]\n}"
