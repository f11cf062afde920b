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
ever overwritten. Those checks, of the agent's text and of every path, live in
:mod:`hybrid.app.proposal_checks`.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hybrid.app.proposal_checks import (
    OFF_MESSAGE,
    ProposalError,
    check_based_on,
    check_content,
    check_not_proposals,
    check_title,
    checked_folder,
    clean_client,
    find_proposal,
    inside_folder,
    locate_proposals,
    md_files,
    rel_parts,
    slugify,
    vault_root,
)
from hybrid.core.config import Vault
from hybrid.core.files import fsync_dir

log = logging.getLogger("hybrid")

__all__ = ["ProposalError", "Proposal", "write_proposal", "list_proposals", "read_proposal",
           "accept", "reject", "slugify"]

MAX_SUFFIX = 1000          # "-2" … "-1000": past that, something is wrong with the folder
MAX_PENDING = 500          # unreviewed proposals in one inbox: an agent in a loop stops there
# Names Windows cannot open (with any extension), for vaults synced to a Windows machine.
WINDOWS_RESERVED = {"con", "prn", "aux", "nul", *(f"com{i}" for i in range(10)),
                    *(f"lpt{i}" for i in range(10)), "conin$", "conout$"}


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


def _utc(now: dt.datetime | None) -> dt.datetime:
    now = now or dt.datetime.now(dt.UTC)
    if now.tzinfo is None:
        now = now.replace(tzinfo=dt.UTC)  # a naive time is taken to be UTC already
    return now.astimezone(dt.UTC).replace(microsecond=0)


def _iso(now: dt.datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


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
    from hybrid.sources.markdown import load_frontmatter, split_frontmatter
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
    from hybrid.sources.markdown import parse_note
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
    title = check_title(title)
    content = check_content(content, max_chars)
    cites = check_based_on(based_on)
    client = clean_client(proposed_by)
    when = _utc(now)
    meta: dict[str, Any] = {"title": title, "status": "proposed", "proposed_by": client,
                            "created": _iso(when), "based_on": cites}
    body = "\n" + content + ("" if content.endswith("\n") else "\n")
    text = _text(meta, body)
    base, folder_rel = locate_proposals(vault, folder, create=True)
    pending = len(md_files(base))
    if pending >= MAX_PENDING:
        raise ProposalError(f"the proposals inbox {vault.name}:{folder_rel}/ is full ({pending} "
                            f"unreviewed): ask the user to review them with `hybrid proposals`")
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
    base, folder_rel = locate_proposals(vault, folder)
    if not base.is_dir():
        return []
    out: list[tuple[Proposal, int]] = []
    for rel in md_files(base):
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
    path, rel, _, _ = find_proposal(vault, folder, name)
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
    src, rel, base, folder_rel = find_proposal(vault, folder, name)
    parts = rel_parts(to_folder, "--to folder", dot_ok=True)
    if parts and inside_folder("/".join(parts), folder_rel):
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
    dest_dir, to_rel = checked_folder(vault, to_folder, "--to folder", create=False, dot_ok=True)
    check_not_proposals(dest_dir, base, vault_root(vault), folder_rel, to_folder)
    file_name = src.name
    new_rel = f"{to_rel}/{file_name}" if to_rel else file_name
    _verify(new_rel, new_text, {"status": "reviewed", "reviewed": when})
    if os.path.lexists(dest_dir / file_name):
        raise ProposalError(f"{vault.name}:{new_rel} already exists: rename or move that note, or "
                            f"accept into another folder")
    dest_dir, to_rel = checked_folder(vault, to_folder, "--to folder", create=True, dot_ok=True)
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


def reject(vault: Vault, folder: str, name: str) -> Proposal:
    """Delete proposal ``name`` (only ever a file inside the proposals folder); returns what it
    was."""
    proposal, _ = read_proposal(vault, folder, name)
    path, rel, _, _ = find_proposal(vault, folder, name)
    try:
        path.unlink()
    except OSError as exc:
        raise _os_error(exc, f"delete proposal {vault.name}:{rel}") from None
    log.info("%s: proposal %s rejected", vault.name, rel)
    return proposal
