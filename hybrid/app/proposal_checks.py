"""Checking what reaches the proposals inbox: the agent's text and every path, before a byte is written.

Everything an agent sends through ``propose_note`` is treated as hostile, and so is every name
or folder typed at ``hybrid proposals``. This module refuses (never silently cuts) what does not
pass, with a :class:`ProposalError` naming the fix:

* agent input: the title, the content and the ``based_on`` citations (length limits; no control,
  line-separator or bidi characters); the client's name is cleaned rather than refused, and
  :func:`slugify` makes the file-name part from the title with no path character left;
* paths: folders and proposal names resolve inside the vault only: plain and vault-relative
  (no '..', hidden part, drive or backslash), reached through no symlink, checked again after a
  folder is created; a proposal is a regular markdown file inside the proposals folder.

:mod:`hybrid.app.proposals` writes, lists, accepts and rejects proposals on top of these checks.
"""

from __future__ import annotations

import os
import stat
import unicodedata
from collections.abc import Sequence
from pathlib import Path

from hybrid.core.config import Vault
from hybrid.core.errors import HybridError
from hybrid.core.folding import fold

TITLE_MAX = 200
SLUG_MAX = 60
BASED_ON_MAX = 20
CITATION_MAX = 300
PROPOSED_BY_MAX = 100
OFF_MESSAGE = "agents cannot write: proposals are off (set proposals_folder in [settings])"
# Characters that end or reorder a line though they are no C0 control: C1 controls (NEL),
# the Unicode line/paragraph separators (YAML treats them as line breaks) and bidi overrides
# and isolates (a title that reads differently than it is).
_INVISIBLE = set("\u0085\u2028\u2029\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


class ProposalError(HybridError):
    """A proposal refused, or a review command that cannot be done; the message names the fix."""


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


def check_title(title: object) -> str:
    return _one_line(title, "title", TITLE_MAX, empty="give the note a short title", too_long=": shorten it",
                     bad="use one line of plain text")


def _one_line(value: object, name: str, limit: int, *, like: str = "", empty: str, too_long: str = "",
              bad: str) -> str:
    """``value`` stripped, or ProposalError naming ``name``: not text (``like``: an example of
    it), empty (``empty``: what to give), over ``limit`` characters, or holding a control
    character (``bad``: the fix)."""
    if not isinstance(value, str):
        raise ProposalError(f"{name} must be text{like}, got {type(value).__name__}")
    value = value.strip()
    if not value:
        raise ProposalError(f"{name} is empty: {empty}")
    if len(value) > limit:
        raise ProposalError(f"{name} is {len(value)} characters; the limit is {limit}{too_long}")
    found = _bad_char(value, newlines=False)
    if found is not None:
        raise ProposalError(f"{name} contains the control character U+{ord(found):04X}: {bad}")
    return value


def check_content(content: object, max_chars: int) -> str:
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


def check_based_on(based_on: object) -> list[str]:
    if based_on is None:
        return []
    if isinstance(based_on, (str, bytes)) or not isinstance(based_on, Sequence):
        raise ProposalError("based_on must be a list of citations like 'vault:path:12-40'")
    if len(based_on) > BASED_ON_MAX:
        raise ProposalError(f"based_on has {len(based_on)} citations; the limit is {BASED_ON_MAX}: "
                            f"keep the ones the note rests on")
    out: list[str] = []
    for i, item in enumerate(based_on):
        cite = _one_line(item, f"based_on[{i}]", CITATION_MAX, like=" like 'vault:path:12-40'",
                         empty="give a citation like 'vault:path:12-40'",
                         bad="one citation per entry, on one line")
        if cite not in out:
            out.append(cite)
    return out


def clean_client(proposed_by: object) -> str:
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


# --- paths ------------------------------------------------------------------------------------
def vault_root(vault: Vault) -> Path:
    root = Path(vault.path).expanduser()
    if not root.is_dir():
        raise ProposalError(f"vault {vault.name!r}: folder {str(root)!r} does not exist; "
                            f"`hybrid vault move {vault.name} PATH` points it at the new place")
    return root.resolve()


def rel_parts(value: object, what: str, *, dot_ok: bool = False) -> list[str]:
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


def checked_folder(vault: Vault, folder: str, what: str, *, create: bool,
            dot_ok: bool = False) -> tuple[Path, str]:
    """The checked folder (absolute path, vault-relative text); created, parents too, when
    ``create``, then checked again (nothing may have swapped a symlink in meanwhile)."""
    parts = rel_parts(folder, what, dot_ok=dot_ok)
    root = vault_root(vault)
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


def locate_proposals(vault: Vault, folder: str, *, create: bool = False) -> tuple[Path, str]:
    if not isinstance(folder, str) or not folder.strip().strip("/"):
        raise ProposalError(OFF_MESSAGE)
    return checked_folder(vault, folder, "proposals_folder", create=create)


def inside_folder(rel: str, folder_rel: str) -> bool:
    """Whether vault-relative ``rel`` is ``folder_rel`` or below it, compared folded (as the
    engine does when it hides proposals: on a case-insensitive disk both are one folder)."""
    a, b = fold(rel), fold(folder_rel)
    return a == b or a.startswith(b + "/")


def find_proposal(vault: Vault, folder: str, name: object) -> tuple[Path, str, Path, str]:
    """The proposal file ``name`` names: (file, vault-relative path, folder, folder's relative
    path). ``name`` is a file name (found anywhere below the folder when unique, '.md' may be
    left off), a path relative to the folder, or a vault-relative path into it. Only regular
    files inside the folder, reached through no symlink, are found."""
    base, folder_rel = locate_proposals(vault, folder)
    parts = rel_parts(name, "proposal name")
    fparts = folder_rel.split("/")
    tries: list[list[str]] = [parts]
    if len(parts) > len(fparts) and [fold(p) for p in parts[:len(fparts)]] == \
            [fold(p) for p in fparts]:
        tries.append(parts[len(fparts):])  # vault-relative
    if not parts[-1].lower().endswith(".md"):
        tries += [t[:-1] + [t[-1] + ".md"] for t in tries]
    for t in tries:
        path = base.joinpath(*t)
        if os.path.lexists(path):
            return _checked_file(base, folder_rel, t, name), f"{folder_rel}/{'/'.join(t)}", base, folder_rel
    if len(parts) == 1 and base.is_dir():
        wanted = {parts[0], parts[0] + ".md"}
        found = [p for p in md_files(base) if p.rsplit("/", 1)[-1] in wanted]
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


def md_files(base: Path) -> list[str]:
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


def check_not_proposals(dest: Path, proposals_dir: Path, root: Path, folder_rel: str, shown: str) -> None:
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
