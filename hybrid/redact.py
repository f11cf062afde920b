"""Redact credentials from text before an agent sees it.

Notes collect pasted secrets: an API key in a setup note, a database URL with its password, a
private key in a code block. Text shown to MCP clients (snippets, ``get_note``) goes through
:class:`Redactor` first, which replaces each secret with ``[redacted secret]``.

Detection is a maintained library plus a short project rule file, not a home-made regex list
(the comparison is in eval/reports/secrets-detectors.md):

- ``kingfisher-secret-scanner`` (import ``kingfisher_sdk``, Apache-2.0, MongoDB): about 490
  built-in rules, mostly the Betterleaks/gitleaks catalogue, compiled with Vectorscan. It gives
  the byte offsets of the secret itself, runs offline (scanning never uses the network; its
  ``Validator`` and ``Revoker`` do, and this module never touches them) and takes about 10 µs
  per snippet. It finds provider tokens (AWS, GitHub, GitLab, Slack, Stripe, OpenAI, Anthropic,
  Google, Azure storage, npm, Hugging Face, SendGrid, ...), JWTs, PEM and OpenSSH private keys
  (the whole block), MongoDB URIs and ``Authorization: Basic`` values.
- ``hybrid/data/secret_rules.yml`` adds five rules for what the catalogue misses: a password in
  a URL's userinfo for any scheme (``postgres://user:PASS@host``), a keyword assignment
  (``password: x``, ``client_secret = x``, ``SECRET_KEY = 'x'``, also in YAML frontmatter), a
  standalone AWS key id (``AKIA...``), a Telegram bot token without the word "telegram", and a
  random-looking value of letters and digits a few words after a credential word in prose
  ("the api key is Zx8v...").
  Placeholders such as ``${TOKEN}``, ``<your-token>``, ``os.environ[...]``, ``changeme``, ``xxxx``
  or short plain words are not redacted (:func:`_is_placeholder`).

Known misses: a password in prose ("the wifi password is ...") and other secrets with no
recognisable shape or keyword; a quoted password with spaces after a keyword is cut at the first
space, so only a long enough first word is redacted. Over-redaction of a random-looking value
after a keyword is accepted.

Redaction fails closed: without kingfisher, :class:`Redactor` raises
:class:`RedactionUnavailable` instead of returning text unredacted.

The first use compiles the rules (3-4 s); kingfisher caches the compiled database on disk
(``cache_dir``, else its OS cache directory), after which start-up takes about 0.4 s.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .errors import HybridError

REDACTED = "[redacted secret]"
RULES_FILE = Path(__file__).parent / "data" / "secret_rules.yml"
# Bump when the Python-side filtering below changes what is redacted (the rule file and the
# kingfisher version are the other inputs; together they say when redacted text may differ).
FILTER_REVISION = 2

# Rules whose value is free-form, so a placeholder or a variable reference can fill it.
_URL_RULE = "custom.url-password"
_PROSE_RULE = "custom.keyword-prose"
_GENERIC_RULES = frozenset({"custom.keyword-secret", _URL_RULE, _PROSE_RULE})
_WORDY_ID_RE = re.compile(r"^[a-z]+(?:[-_./][a-z0-9]+)+$|^[A-Za-z]+$|^\d+$")
_PLACEHOLDER_WORDS = frozenset({
    "changeme", "change_me", "change-me", "changeit", "password", "passwd", "pass", "secret",
    "token", "apikey", "api_key", "example", "placeholder", "redacted", "hidden", "removed",
    "dummy", "sample", "true", "false", "null", "none", "nil", "undefined", "required",
    "optional", "string", "your_password", "yourpassword", "your_token", "your_api_key",
})
_PLACEHOLDER_RES = [re.compile(p) for p in (
    r"^\$[A-Za-z_]\w*$",                    # $VAR
    r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$",     # ENV_VAR_NAME
    r"^[A-Za-z_][\w.]*\((?:.*\))?$",        # a call: getpass.getpass(), env( (before a quote)
    r"^[A-Za-z_][\w.]*\[",                  # a subscript: os.environ['X'], tokens[i]
    r"^[A-Za-z_]+(?:\.[A-Za-z_]+)+$",       # an attribute: process.env.X, settings.api_key
    r"^(/|~/|\./|\.\./)[\w./-]*$",          # a path (`pwd: /home/alice`)
    r"^%\(\w+\)s$",                         # %(name)s
    r"^(.)\1+$",                            # one character repeated: ********, 00000000
    r"[xX*#•]{4}",                          # a masked part: sk-xxxx..., ****1234
    r"\.\.\.|…",                            # an ellipsis
)]
_ENV_MARKERS = ("${", "{{", "}}", "environ", "getenv", "process.env", "env(", "env[", "secrets.")


def _is_placeholder(value: str, *, in_url: bool = False) -> bool:
    """True when a keyword or URL-password value is a stand-in rather than a secret. A plain
    short word counts as one after a keyword (`token: required`) but not as a URL's password."""
    v = value.strip("\"'`.,;:")
    if len(v) < 3 or v[0] in "[<{(*":
        return True
    low = v.lower()
    if low in _PLACEHOLDER_WORDS or low.startswith(("your_", "your-", "my_", "my-")):
        return True
    if any(m in low for m in _ENV_MARKERS):
        return True
    if not in_url and re.fullmatch(r"[A-Za-z_-]+", v) and len(v) < 16:  # a plain word (`required`, `generated`)
        return True
    if v.isdigit() and len(v) < 10:  # a count or a port
        return True
    return any(p.search(v) for p in _PLACEHOLDER_RES)


def _secret_looking(value: str) -> bool:
    """For a value found in prose: letters and digits both, and not an identifier made of words
    (`release-notes-2024`, `obsidian.md/v1`)."""
    return (any(c.isdigit() for c in value) and any(c.isalpha() for c in value)
            and not _WORDY_ID_RE.match(value))


class RedactionUnavailable(HybridError):
    """The secret detector (kingfisher) is not installed, so agent-facing text cannot be shown."""

    def __init__(self, cause: BaseException | None = None) -> None:
        why = f" ({str(cause).splitlines()[0]})" if cause and str(cause) else ""
        super().__init__(f"secret redaction is unavailable: kingfisher_sdk cannot be imported{why}; "
                         f"install it with `pip install kingfisher-secret-scanner`")


def _import_kingfisher() -> Any:
    try:
        import kingfisher_sdk  # the package; only its offline Rules and Scanner are used
    except ImportError as err:  # includes a broken native extension
        raise RedactionUnavailable(err) from err
    return kingfisher_sdk


def available() -> bool:
    """Whether kingfisher can be imported (redaction raises :class:`RedactionUnavailable` if not)."""
    try:
        _import_kingfisher()
    except RedactionUnavailable:
        return False
    return True


def _char_offset(data: bytes, text_len: int, byte_off: int, *, ceil: bool) -> int:
    """A UTF-8 byte offset into ``data`` as a character offset, moved to a character boundary
    (back for a start, forward for an end)."""
    if len(data) == text_len:  # ASCII: bytes are characters
        return byte_off
    byte_off = max(0, min(byte_off, len(data)))
    while 0 < byte_off < len(data) and data[byte_off] & 0xC0 == 0x80:  # inside a character
        byte_off += 1 if ceil else -1
    return len(data[:byte_off].decode("utf-8", "surrogatepass"))


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def _apply(text: str, spans: Sequence[tuple[int, int]]) -> str:
    """``text`` with each span replaced by REDACTED plus the newlines it held (line numbers of
    everything after it stay the same)."""
    out: list[str] = []
    pos = 0
    for s, e in spans:
        out.append(text[pos:s])
        out.append(REDACTED + "\n" * text.count("\n", s, e))
        pos = e
    out.append(text[pos:])
    return "".join(out)


class Redactor:
    """Finds and redacts secrets. Kingfisher is imported and its rules compiled on first use,
    once; the instance is thread-safe. Share one per process with :func:`redactor`."""

    def __init__(self, cache_dir: Path | None = None) -> None:
        self.cache_dir = cache_dir
        self._scanner: Any = None
        self._init_lock = threading.Lock()
        # kingfisher does not document Scanner as safe for concurrent scans; a scan takes ~10 µs
        self._scan_lock = threading.Lock()

    def _get_scanner(self) -> Any:
        scanner = self._scanner
        if scanner is None:
            with self._init_lock:
                if self._scanner is None:
                    kf = _import_kingfisher()
                    if self.cache_dir is not None:
                        self.cache_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
                    rules = kf.Rules([str(RULES_FILE)], confidence="low", cache_dir=self.cache_dir)
                    self._scanner = kf.Scanner(rules)
                scanner = self._scanner
        return scanner

    def warm(self) -> None:
        """Import kingfisher and compile the rules now (else the first scan does it)."""
        self._get_scanner()

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Sorted, merged character spans of the secrets in ``text``."""
        scanner = self._get_scanner()
        if not text:
            return []
        data = text.encode("utf-8", "surrogatepass")  # a lone surrogate (from a bad file name) is kept
        with self._scan_lock:
            findings = scanner.scan(data)
        found: list[tuple[int, int]] = []
        for f in findings:  # f.visible == False too: e.g. the key id that goes with an AWS secret
            loc = f.location
            s = _char_offset(data, len(text), loc["start_offset"], ceil=False)
            e = _char_offset(data, len(text), loc["end_offset"], ceil=True)
            rule = f.rule_id
            if e <= s or (rule in _GENERIC_RULES and _is_placeholder(text[s:e], in_url=rule == _URL_RULE)):
                continue
            if rule == _PROSE_RULE and not _secret_looking(text[s:e]):
                continue
            found.append((s, e))
        return _merge(found)

    def redact(self, text: str) -> str:
        """``text`` with every secret replaced by ``[redacted secret]``; the line count is kept."""
        spans = self.spans(text)
        return _apply(text, spans) if spans else text

    def redact_parts(self, parts: Sequence[str]) -> list[str]:
        """Redact the consecutive chunk texts of one note as one text, so that a secret cut by a
        chunk boundary (a PEM block split in two) is still found and each fragment redacted.
        Chunk i+1 may start with the end of chunk i (the chunker's overlap,
        :func:`hybrid.lexical.overlap`): that text is scanned once and redacted in both."""
        if not parts:
            return []
        from .lexical import overlap

        starts = [0]
        pieces = [parts[0]]
        end = len(parts[0])
        for prev, nxt in zip(parts, parts[1:]):
            k = overlap(prev, nxt)
            if k > 0:  # prev is the end of the joined text, and it ends with nxt[:k]
                starts.append(end - k)
                pieces.append(nxt[k:])
                end += len(nxt) - k
            else:
                starts.append(end + 1)
                pieces.append("\n" + nxt)
                end += 1 + len(nxt)
        spans = self.spans("".join(pieces))
        if not spans:
            return list(parts)
        out: list[str] = []
        for part, start in zip(parts, starts):
            stop = start + len(part)
            local = [(max(s, start) - start, min(e, stop) - start) for s, e in spans if s < stop and e > start]
            out.append(_apply(part, local) if local else part)
        return out


_shared: dict[Path | None, Redactor] = {}
_shared_lock = threading.Lock()


def redactor(cache_dir: Path | None = None) -> Redactor:
    """The process-wide :class:`Redactor` for ``cache_dir`` (rules compile once per process)."""
    key = cache_dir.resolve() if cache_dir is not None else None
    with _shared_lock:
        r = _shared.get(key)
        if r is None:
            r = _shared[key] = Redactor(cache_dir)
        return r
