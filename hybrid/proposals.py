"""The proposals inbox: the one place agents may write notes, and the human review of them.

An agent (through the MCP tool ``propose_note``) writes a new note into the vault's
``proposals_folder`` and nowhere else; it never overwrites or edits a note. A proposal is a
markdown file ``YYYY-MM-DD-<slug>.md`` whose frontmatter, written by us with ``yaml.safe_dump``,
says where it came from::

    ---
    title: Tailscale ACL for the lab
    status: proposed
    proposed_by: claude-code
    created: '2026-11-30T14:05:01Z'
    based_on:
    - home:home-lab/networking.md:12-40
    ---

    <the agent's text>

The human reviews them with ``hybrid proposals``: :func:`accept` moves one into a folder they
name (``status: reviewed``, ``reviewed: <time>``; every other key and the body kept), and
:func:`reject` deletes it. Everything the agent sends is treated as hostile: titles, content
and citations are checked and refused (never silently cut), file names are derived from the
title but never from its path characters, and files are created with ``O_EXCL`` so nothing is
ever overwritten.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import stat
import unicodedata
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .config import Vault
from .errors import HybridError
from .store import fsync_dir

log = logging.getLogger("hybrid")

__all__ = ["ProposalError", "Proposal", "write_proposal", "list_proposals", "read_proposal",
           "accept", "reject", "slugify"]

TITLE_MAX = 200
SLUG_MAX = 60
BASED_ON_MAX = 20
CITATION_MAX = 300
PROPOSED_BY_MAX = 100
MAX_SUFFIX = 1000          # "-2" … "-1000": past that, something is wrong with the folder
OFF_MESSAGE = "agents cannot write: proposals are off (set proposals_folder in [settings])"
# Names Windows cannot open (with any extension), for vaults synced to a Windows machine.
WINDOWS_RESERVED = {"con", "prn", "aux", "nul", *(f"com{i}" for i in range(10)),
                    *(f"lpt{i}" for i in range(10)), "conin$", "conout$"}
# Characters that end or reorder a line though they are no C0 control: C1 controls (NEL),
# the Unicode line/paragraph separators (YAML treats them as line breaks) and bidi overrides
# and isolates (a title that reads differently than it is).
_INVISIBLE = set("\u0085\u2028\u2029\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


class ProposalError(HybridError):
    """A proposal refused, or a review command that cannot be done; the message names the fix."""


@dataclass
class Proposal:
    vault: str
    path: str            # vault-relative, '/'-separated
    title: str
    status: str          # proposed | reviewed | … | unknown (frontmatter unreadable)
    proposed_by: str
    created: str         # ISO 8601 UTC (the file's mtime when the frontmatter has none)
    based_on: list[str] = field(default_factory=list)
    chars: int = 0       # characters of the body (the text after the frontmatter)

    def to_dict(self) -> dict:
        return asdict(self)


# --- checking agent input -------------------------------------------------------------------
def _bad_char(text: str, *, newlines: bool) -> str | None:
    """The first character not allowed in ``text``, or None. Never allowed: C0 controls but
    \\t (and \\n when ``newlines``: body text), DEL, and lone surrogates (not encodable). In
    one-line text (``newlines`` false) also C1 controls, line separators and bidi controls."""
    for ch in text:
        o = ord(ch)
        if ch == "\t" or (newlines and ch == "\n"):
            continue
        if o < 0x20 or o == 0x7F or 0xD800 <= o <= 0xDFFF:
            return ch
        if not newlines and (0x80 <= o <= 0x9F or ch in _INVISIBLE):
            return ch
    return None


def _check_title(title: object) -> str:
    if not isinstance(title, str):
        raise ProposalError(f"title must be text, got {type(title).__name__}")
    title = title.strip()
    if not title:
        raise ProposalError("title is empty: give the note a short title")
    if len(title) > TITLE_MAX:
        raise ProposalError(f"title is {len(title)} characters; the limit is {TITLE_MAX}: shorten it")
    bad = _bad_char(title, newlines=False)
    if bad is not None:
        raise ProposalError(f"title contains the control character U+{ord(bad):04X}: "
                            f"use one line of plain text")
    return title


def _check_content(content: object, max_chars: int) -> str:
    if not isinstance(content, str):
        raise ProposalError(f"content must be text, got {type(content).__name__}")
    content = content.replace("\r\n", "\n")
    if not content.strip():
        raise ProposalError("content is empty: write the note's text")
    if len(content) > max_chars:
        raise ProposalError(f"content is {len(content):,} characters; the limit is {max_chars:,} "
                            f"(proposal_max_chars): shorten it or split it into several notes")
    bad = _bad_char(content, newlines=True)
    if bad is not None:
        line = content.count("\n", 0, content.index(bad)) + 1
        raise ProposalError(f"content contains the control character U+{ord(bad):04X} on line {line}: "
                            f"send plain text (only newlines and tabs are allowed)")
    return content


def _check_based_on(based_on: object) -> list[str]:
    if based_on is None:
        return []
    if isinstance(based_on, (str, bytes)) or not isinstance(based_on, Sequence):
        raise ProposalError("based_on must be a list of citations like 'vault:path:12-40'")
    if len(based_on) > BASED_ON_MAX:
        raise ProposalError(f"based_on has {len(based_on)} citations; the limit is {BASED_ON_MAX}: "
                            f"keep the ones the note rests on")
    out: list[str] = []
    for i, cite in enumerate(based_on):
        if not isinstance(cite, str):
            raise ProposalError(f"based_on[{i}] must be text like 'vault:path:12-40', "
                                f"got {type(cite).__name__}")
        cite = cite.strip()
        if not cite:
            raise ProposalError(f"based_on[{i}] is empty: give a citation like 'vault:path:12-40'")
        if len(cite) > CITATION_MAX:
            raise ProposalError(f"based_on[{i}] is {len(cite)} characters; the limit is {CITATION_MAX}")
        bad = _bad_char(cite, newlines=False)
        if bad is not None:
            raise ProposalError(f"based_on[{i}] contains the control character U+{ord(bad):04X}: "
                                f"one citation per entry, on one line")
        if cite not in out:
            out.append(cite)
    return out


def _clean_client(proposed_by: object) -> str:
    """A client name cut down to one printable line of at most PROPOSED_BY_MAX characters."""
    text = str(proposed_by) if proposed_by is not None else ""
    text = "".join(" " if _bad_char(ch, newlines=False) else ch for ch in text)
    text = " ".join(text.split())[:PROPOSED_BY_MAX].strip()
    return text or "unknown"


def slugify(title: str) -> str:
    """The file-name part made from ``title``: NFKC, lower case, every run of characters that
    are not letters or digits (combining marks stay with their letter) becomes one '-', at most
    SLUG_MAX characters, "proposal" when nothing is left. No '/', '.', '\\\\' or ':' can survive,
    so a title can never name a path."""
    text = unicodedata.normalize("NFKC", title).lower()
    out: list[str] = []
    for ch in text:
        cat = unicodedata.category(ch)
        if cat[0] in "LN" or (cat[0] == "M" and out and out[-1] != "-"):
            out.append(ch)
        elif out and out[-1] != "-":
            out.append("-")
    slug = "".join(out).strip("-")[:SLUG_MAX].rstrip("-")
    return slug or "proposal"


def _utc(now: dt.datetime | None) -> dt.datetime:
    now = now or dt.datetime.now(dt.UTC)
    if now.tzinfo is None:
        now = now.replace(tzinfo=dt.UTC)  # a naive time is taken to be UTC already
    return now.astimezone(dt.UTC).replace(microsecond=0)


def _iso(now: dt.datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


# --- paths ------------------------------------------------------------------------------------
def _root(vault: Vault) -> Path:
    root = Path(vault.path).expanduser()
    if not root.is_dir():
        raise ProposalError(f"vault {vault.name!r}: folder {str(root)!r} does not exist; "
                            f"`hybrid vault move {vault.name} PATH` points it at the new place")
    return root.resolve()


def _rel_parts(value: object, what: str, *, dot_ok: bool = False) -> list[str]:
    """A vault-relative path split into parts: text, not absolute, no backslash, drive or
    control character, no '..' and no hidden part ('.' alone = the vault's top level when
    ``dot_ok``)."""
    if not isinstance(value, str):
        raise ProposalError(f"{what} must be text, got {type(value).__name__}")
    text = value.strip()
    if dot_ok and text in (".", "./"):
        return []
    if not text.strip("/"):
        raise ProposalError(f"{what} is empty: name a folder inside the vault"
                            + (" ('.' for its top level)" if dot_ok else ""))
    if text.startswith("/") or "\\" in text or ":" in text or _bad_char(text, newlines=False):
        raise ProposalError(f"{what} {value!r} is not a plain vault-relative path (no leading '/', "
                            f"'\\\\', ':' or control characters); refused")
    parts = [p for p in text.split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise ProposalError(f"{what} {value!r} contains '.' or '..'; refused: give a path inside the vault")
    if any(p.startswith(".") for p in parts):
        raise ProposalError(f"{what} {value!r} has a hidden part (starting with '.'); refused: "
                            f"hidden folders are never indexed")
    return parts


def _walk_checked(root: Path, parts: list[str], what: str, shown: str) -> Path:
    """``root/parts…``, refusing any existing component that is a symlink (it could lead out of
    the vault, or show the same files under a second path), or a file where a folder belongs,
    and anything that does not resolve inside the vault."""
    cur = root
    for i, part in enumerate(parts):
        cur = cur / part
        try:
            st = os.lstat(cur)
        except FileNotFoundError:
            break
        except OSError as exc:
            raise ProposalError(f"{what} {shown!r}: cannot read {'/'.join(parts[:i + 1])!r} "
                                f"({exc.strerror or exc})") from None
        if stat.S_ISLNK(st.st_mode):
            raise ProposalError(f"{what} {shown!r} goes through the symlink {'/'.join(parts[:i + 1])!r}; "
                                f"refused: use a real folder inside the vault")
        if i < len(parts) - 1 and not stat.S_ISDIR(st.st_mode):
            raise ProposalError(f"{what} {shown!r}: {'/'.join(parts[:i + 1])!r} is a file, not a folder")
    target = root.joinpath(*parts)
    if not target.resolve().is_relative_to(root):
        raise ProposalError(f"{what} {shown!r} resolves outside the vault; refused")
    return target


def _folder(vault: Vault, folder: str, what: str, *, create: bool,
            dot_ok: bool = False) -> tuple[Path, str]:
    """The checked folder (absolute path, vault-relative text); created, parents too, when
    ``create``, then checked again (nothing may have swapped a symlink in meanwhile)."""
    parts = _rel_parts(folder, what, dot_ok=dot_ok)
    root = _root(vault)
    target = _walk_checked(root, parts, what, folder)
    if create:
        try:
            target.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise ProposalError(f"{what} {folder!r} is a file, not a folder") from None
        except OSError as exc:
            raise ProposalError(f"cannot create {what} {folder!r}: {exc.strerror or exc}") from None
        target = _walk_checked(root, parts, what, folder)
        if not target.is_dir():
            raise ProposalError(f"{what} {folder!r} is not a folder")
    return target, "/".join(parts)


def _proposals_folder(vault: Vault, folder: str, *, create: bool = False) -> tuple[Path, str]:
    if not isinstance(folder, str) or not folder.strip().strip("/"):
        raise ProposalError(OFF_MESSAGE)
    return _folder(vault, folder, "proposals_folder", create=create)


def _inside(rel: str, folder_rel: str) -> bool:
    """Whether vault-relative ``rel`` is ``folder_rel`` or below it, ignoring case (as the
    engine does when it hides proposals: on a case-insensitive disk both are one folder)."""
    a, b = rel.casefold(), folder_rel.casefold()
    return a == b or a.startswith(b + "/")


def _find(vault: Vault, folder: str, name: object) -> tuple[Path, str, Path, str]:
    """The proposal file ``name`` names: (file, vault-relative path, folder, folder's relative
    path). ``name`` is a file name (found anywhere below the folder when unique, '.md' may be
    left off), a path relative to the folder, or a vault-relative path into it. Only regular
    files inside the folder, reached through no symlink, are found."""
    base, folder_rel = _proposals_folder(vault, folder)
    parts = _rel_parts(name, "proposal name")
    fparts = folder_rel.split("/")
    tries: list[list[str]] = [parts]
    if len(parts) > len(fparts) and [p.casefold() for p in parts[:len(fparts)]] == \
            [p.casefold() for p in fparts]:
        tries.append(parts[len(fparts):])  # vault-relative
    if not parts[-1].lower().endswith(".md"):
        tries += [t[:-1] + [t[-1] + ".md"] for t in tries]
    for t in tries:
        path = base.joinpath(*t)
        if os.path.lexists(path):
            return _checked_file(base, folder_rel, t, name), f"{folder_rel}/{'/'.join(t)}", base, folder_rel
    if len(parts) == 1 and base.is_dir():
        wanted = {parts[0], parts[0] + ".md"}
        found = [p for p in _md_files(base) if p.rsplit("/", 1)[-1] in wanted]
        if len(found) == 1:
            t = found[0].split("/")
            return _checked_file(base, folder_rel, t, name), f"{folder_rel}/{found[0]}", base, folder_rel
        if len(found) > 1:
            raise ProposalError(f"{len(found)} proposals are named {parts[0]!r} ({', '.join(found[:5])}): "
                                f"give the path relative to {folder_rel!r}")
    raise ProposalError(f"no proposal {name!r} in {vault.name}:{folder_rel}/; "
                        f"`hybrid proposals --vault {vault.name}` lists them")


def _checked_file(base: Path, folder_rel: str, parts: list[str], name: object) -> Path:
    cur = base
    for i, part in enumerate(parts):
        cur = cur / part
        try:
            st = os.lstat(cur)
        except OSError:
            raise ProposalError(f"no proposal {name!r} in {folder_rel}/") from None
        if stat.S_ISLNK(st.st_mode):
            raise ProposalError(f"proposal {name!r} is (or goes through) a symlink; refused")
        if i < len(parts) - 1 and not stat.S_ISDIR(st.st_mode):
            raise ProposalError(f"no proposal {name!r} in {folder_rel}/")
    if not stat.S_ISREG(st.st_mode) or not parts[-1].lower().endswith(".md"):
        raise ProposalError(f"{name!r} is not a proposal (a markdown file) in {folder_rel}/")
    if not cur.resolve().is_relative_to(base.resolve()):
        raise ProposalError(f"proposal {name!r} resolves outside {folder_rel}/; refused")
    return cur


def _md_files(base: Path) -> list[str]:
    """Markdown files directly in or below ``base``, relative to it: no hidden parts, no
    symlinks (neither followed nor listed)."""
    out = []
    for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        rel = Path(dirpath).relative_to(base).as_posix()
        for f in sorted(filenames):
            if f.startswith(".") or not f.lower().endswith(".md"):
                continue
            try:
                regular = stat.S_ISREG(os.lstat(os.path.join(dirpath, f)).st_mode)
            except OSError:  # gone meanwhile
                continue
            if regular:
                out.append(f if rel == "." else f"{rel}/{f}")
    return out


# --- file text --------------------------------------------------------------------------------
def _dump(meta: dict[str, Any]) -> str:
    import yaml
    # No line wrapping: a folded continuation line that reads '...' or '---' would end the
    # frontmatter early for a parser that compares stripped lines.
    return yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=1 << 30,
                          default_flow_style=False)


def _split(text: str) -> tuple[dict[str, Any] | None, str | None, str]:
    """(frontmatter mapping or None when unreadable, the frontmatter's raw text or None when
    there is none, the body exactly as in ``text``: everything after the closing fence line)."""
    from .notes import load_frontmatter, split_frontmatter
    lines = text.split("\n")
    fm_lines, body_start = split_frontmatter([ln.lstrip("\ufeff") if i == 0 else ln
                                              for i, ln in enumerate(lines[:2001])])
    if fm_lines is None:
        return None, None, text
    body = "\n".join(lines[body_start - 1:])
    raw = "\n".join(fm_lines)
    try:
        meta = load_frontmatter(raw)
    except Exception:  # malformed, refused, or whatever the YAML library raises
        return None, raw, body
    return (meta if isinstance(meta, dict) else None), raw, body


def _text(meta: dict[str, Any], body: str) -> str:
    return f"---\n{_dump(meta)}---\n{body}"


def _verify(rel: str, text: str, expect: dict[str, Any]) -> None:
    """Parse ``text`` with the project's note parser and check our keys came out as written."""
    from .notes import parse_note
    note = parse_note(rel, text)
    props = {str(k): v for k, v in note.properties.items()}
    for k, v in expect.items():
        if props.get(k) != v:
            raise ProposalError(f"internal check failed: the frontmatter of {rel!r} does not read back "
                                f"{k}={v!r}; nothing was written")


def _write_new(path: Path, text: str) -> None:
    """Create ``path`` (never replacing anything: O_EXCL, no symlink followed), write ``text``
    fully and fsync it; a failed write removes the partial file. FileExistsError when taken."""
    data = text.encode("utf-8")
    flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags, 0o666)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        try:
            os.unlink(path)
        except OSError:
            pass
        raise
    os.close(fd)
    fsync_dir(path.parent)


def _os_error(exc: OSError, doing: str) -> ProposalError:
    return ProposalError(f"could not {doing}: {exc.strerror or exc}")


# --- the API ----------------------------------------------------------------------------------
def write_proposal(vault: Vault, folder: str, title: str, content: str, *, proposed_by: str,
                   based_on: Sequence[str] = (), max_chars: int = 20_000,
                   now: dt.datetime | None = None) -> Proposal:
    """Write a new proposal into ``folder`` (the ``proposals_folder`` setting) of ``vault``,
    created if missing. Every argument is checked and refused with a ProposalError naming the
    fix (never truncated); the file is new (``-2``, ``-3``… when its name is taken). Returns the
    proposal with its vault-relative path."""
    if not isinstance(folder, str) or not folder.strip().strip("/"):
        raise ProposalError(OFF_MESSAGE)
    title = _check_title(title)
    content = _check_content(content, max_chars)
    cites = _check_based_on(based_on)
    client = _clean_client(proposed_by)
    when = _utc(now)
    meta: dict[str, Any] = {"title": title, "status": "proposed", "proposed_by": client,
                            "created": _iso(when), "based_on": cites}
    body = "\n" + content + ("" if content.endswith("\n") else "\n")
    text = _text(meta, body)
    base, folder_rel = _proposals_folder(vault, folder, create=True)
    stem = f"{when:%Y-%m-%d}-{slugify(title)}"
    if stem.split(".")[0].lower() in WINDOWS_RESERVED:  # cannot happen with the date first; kept as a guard
        stem += "-note"
    for n in range(1, MAX_SUFFIX + 1):
        name = f"{stem}.md" if n == 1 else f"{stem}-{n}.md"
        rel = f"{folder_rel}/{name}"
        if n == 1:
            _verify(rel, text, meta)
        try:
            _write_new(base / name, text)
        except FileExistsError:
            continue
        except OSError as exc:
            raise _os_error(exc, f"write proposal {vault.name}:{rel}") from None
        log.info("%s: proposal %s written by %s", vault.name, rel, client)
        return Proposal(vault.name, rel, title, "proposed", client, meta["created"], cites, len(body) - 1)
    raise ProposalError(f"{MAX_SUFFIX} proposals named {stem}.md already exist in {folder_rel}/: "
                        f"review them with `hybrid proposals`")


def _proposal(vault: Vault, rel: str, path: Path, text: str) -> Proposal:
    meta, raw, body = _split(text)
    m = {str(k).lower(): v for k, v in (meta or {}).items()}

    def s(key: str, default: str = "") -> str:
        v = m.get(key)
        if isinstance(v, (dt.date, dt.datetime)):
            return v.isoformat()
        return str(v) if isinstance(v, (str, int, float)) and not isinstance(v, bool) else default

    title = s("title") or path.stem
    status = s("status", "unknown") if meta is not None else "unknown"
    created = s("created")
    if not created:
        created = _iso(dt.datetime.fromtimestamp(path.stat().st_mtime, dt.UTC))
    cites = m.get("based_on")
    cites = [str(c) for c in cites] if isinstance(cites, list) else []
    chars = len(body[1:] if raw is not None and body.startswith("\n") else body)
    return Proposal(vault.name, rel, title, status, s("proposed_by"), created, cites, chars)


def _read_text(path: Path) -> str:
    data = path.read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    return data.decode("utf-8", errors="replace")


def list_proposals(vault: Vault, folder: str) -> list[Proposal]:
    """The proposals (``.md`` files directly in or below ``folder``), newest first. A file
    that cannot be read is skipped with a warning; one whose frontmatter cannot be parsed is
    listed with status "unknown"."""
    base, folder_rel = _proposals_folder(vault, folder)
    if not base.is_dir():
        return []
    out: list[tuple[Proposal, int]] = []
    for rel in _md_files(base):
        path = base / rel
        try:
            out.append((_proposal(vault, f"{folder_rel}/{rel}", path, _read_text(path)),
                        path.stat().st_mtime_ns))
        except OSError as exc:
            log.warning("%s: cannot read proposal %s/%s (%s); skipped", vault.name, folder_rel, rel,
                        exc.strerror or exc)
    out.sort(key=lambda pm: (pm[0].created, pm[1], pm[0].path), reverse=True)
    return [p for p, _ in out]


def read_proposal(vault: Vault, folder: str, name: str) -> tuple[Proposal, str]:
    """The proposal ``name`` (a file name, a path relative to ``folder`` or a vault-relative
    path) and its whole text."""
    path, rel, _, _ = _find(vault, folder, name)
    try:
        text = _read_text(path)
    except OSError as exc:
        raise _os_error(exc, f"read proposal {vault.name}:{rel}") from None
    return _proposal(vault, rel, path, text), text


def accept(vault: Vault, folder: str, name: str, to_folder: str, *,
           now: dt.datetime | None = None) -> Proposal:
    """Move proposal ``name`` to ``to_folder`` (vault-relative, '.' = the top level; created if
    missing; not inside the proposals folder), with ``status: reviewed`` and ``reviewed: <UTC
    time>`` in its frontmatter; every other key and the body are kept. The new file is written
    (O_EXCL, fsync) before the proposal is removed, so a crash leaves two copies, never none.
    Returns the moved note."""
    src, rel, base, folder_rel = _find(vault, folder, name)
    parts = _rel_parts(to_folder, "--to folder", dot_ok=True)
    if parts and _inside("/".join(parts), folder_rel):
        raise ProposalError(f"--to {to_folder!r} is inside the proposals folder {folder_rel!r}: "
                            f"name a folder outside it, where reviewed notes belong")
    try:
        data = src.read_bytes()
    except OSError as exc:
        raise _os_error(exc, f"read proposal {vault.name}:{rel}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ProposalError(f"{vault.name}:{rel} is not valid UTF-8: fix it in an editor, then accept "
                            f"it again") from None
    text = text.removeprefix("\ufeff")
    meta, raw, body = _split(text)
    if raw is None:  # no frontmatter (edited away): give it ours
        meta, body = {}, "\n" + text
    elif meta is None:
        raise ProposalError(f"the frontmatter of {vault.name}:{rel} cannot be parsed: fix it in an "
                            f"editor (or remove it), then accept it again")
    assert meta is not None
    when = _iso(_utc(now))
    # Every key kept, in its place; status changed where it stands (added when missing).
    new_meta = {k: ("reviewed" if k == "status" else v) for k, v in meta.items() if k != "reviewed"}
    new_meta.setdefault("status", "reviewed")
    new_meta["reviewed"] = when
    new_text = _text(new_meta, body)
    dest_dir, to_rel = _folder(vault, to_folder, "--to folder", create=False, dot_ok=True)
    _check_not_proposals(dest_dir, base, _root(vault), folder_rel, to_folder)
    file_name = src.name
    new_rel = f"{to_rel}/{file_name}" if to_rel else file_name
    _verify(new_rel, new_text, {"status": "reviewed", "reviewed": when})
    if os.path.lexists(dest_dir / file_name):
        raise ProposalError(f"{vault.name}:{new_rel} already exists: rename or move that note, or "
                            f"accept into another folder")
    dest_dir, to_rel = _folder(vault, to_folder, "--to folder", create=True, dot_ok=True)
    try:
        _write_new(dest_dir / file_name, new_text)
    except FileExistsError:
        raise ProposalError(f"{vault.name}:{new_rel} already exists: rename or move that note, or "
                            f"accept into another folder") from None
    except OSError as exc:
        raise _os_error(exc, f"write {vault.name}:{new_rel}") from None
    try:
        src.unlink()
    except OSError as exc:
        raise ProposalError(f"accepted into {vault.name}:{new_rel}, but could not remove the proposal "
                            f"{rel} ({exc.strerror or exc}): delete it by hand") from None
    fsync_dir(src.parent)
    accepted = _proposal(vault, new_rel, dest_dir / file_name, new_text)
    log.info("%s: proposal %s accepted as %s", vault.name, rel, new_rel)
    return accepted


def _check_not_proposals(dest: Path, proposals_dir: Path, root: Path, folder_rel: str, shown: str) -> None:
    """Refuse a destination that is (inside) the proposals folder under another spelling (a
    case-insensitive disk): the folder is compared by identity with each existing ancestor of
    the destination, up to the vault's top."""
    try:
        pst = os.stat(proposals_dir)
    except OSError:
        return
    cur = dest
    while True:
        try:
            st = os.stat(cur)
            if (st.st_dev, st.st_ino) == (pst.st_dev, pst.st_ino):
                raise ProposalError(f"--to {shown!r} is inside the proposals folder {folder_rel!r}: "
                                    f"name a folder outside it, where reviewed notes belong")
        except FileNotFoundError:
            pass
        if cur == root or cur.parent == cur:
            return
        cur = cur.parent


def reject(vault: Vault, folder: str, name: str) -> Proposal:
    """Delete proposal ``name`` (only ever a file inside the proposals folder); returns what it
    was."""
    proposal, _ = read_proposal(vault, folder, name)
    path, rel, _, _ = _find(vault, folder, name)
    try:
        path.unlink()
    except OSError as exc:
        raise _os_error(exc, f"delete proposal {vault.name}:{rel}") from None
    log.info("%s: proposal %s rejected", vault.name, rel)
    return proposal
