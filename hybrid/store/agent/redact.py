"""Redact credentials from text before an agent sees it.

Notes collect pasted secrets: an API key in a setup note, a database URL with its password, a
private key in a code block. Text shown to MCP clients (snippets, ``get_note``) goes through
:class:`Redactor` first, which replaces each secret with ``[redacted secret]``.

Detection is a maintained library plus a project rule file, not a home-made regex list (the
comparison is in eval/reports/security/secrets-detectors.md):

- ``kingfisher-secret-scanner`` (import ``kingfisher_sdk``, Apache-2.0, MongoDB): about 490
  built-in rules, mostly the Betterleaks/gitleaks catalogue, compiled with Vectorscan. It gives
  the byte offsets of the secret itself, runs offline (scanning never uses the network; its
  ``Validator`` and ``Revoker`` do, and this module never touches them) and takes about 20 µs
  per 1.5 kB chunk. It finds provider tokens (AWS, GitHub, GitLab, Slack, Stripe, OpenAI,
  Anthropic, Google, Azure storage, npm, Hugging Face, SendGrid, Twilio, ...), JWTs, PEM and
  OpenSSH private keys (the whole block) and MongoDB URIs. Its hidden companion findings that
  only name a thing (an Azure storage account name, a client id, a host) are not redacted.
- ``hybrid/data/secret_rules.yml`` adds what the catalogue misses, by class: a password in a
  URL's userinfo for any scheme; ``name: value`` for credential names in the syntaxes notes and
  config files use (env, YAML, JSON, XML, INI, properties, connection strings, ``PGPASSWORD=``,
  ``dbPassword:``), a quoted value taken whole (a passphrase with spaces), the word "password" in
  some thirty languages (``пароль:``, ``Passwort:``, ``mot de passe :``, ``mot_de_passe:``,
  ``kata_sandi:``, ``كلمة_المرور:``, ``密码：``), a PIN (``pin: 4711``), and the words for an API
  key or a token in the same languages (``API-Schlüssel:``, ``clé API :``, ``токен:``,
  ``API密钥：``); a password in prose after a verb ("the wifi password is ...", "Das Passwort
  lautet ...", "Ο κωδικός είναι ...", "Mật khẩu là ...") and right after the word with no colon
  or verb ("database password X", "Wifi şifresi X", "Пароль от роутера X", "路由器密码 X"), the
  latter only when the value looks random; a quoted passphrase after the verb taken whole ("the
  passphrase is "purple monkey dishwasher seven""); a PIN or a door's, alarm's, gate's or safe's
  code after its word and a verb or colon ("my PIN is 4821", "gate code: 7391", "the safe
  combination is 12-34-56", "Le code de la porte est 4821", "kod do drzwi to 4821", "門のコードは4821"),
  and right after a word that names nothing but a PIN code ("PIN-Code 4821", "пин-код 4821",
  "Kapı şifresi 4821"), four digits or more that are not a date; the password flags of common commands
  (``sshpass -p``, ``mysql -pX``, ``curl -u user:X``, ``docker login -p``, ``--password X``),
  .netrc entries, .pgpass lines and Wi-Fi QR strings; ``Authorization:`` headers; secrets in URL
  queries (``sig=``) and webhook URLs; PuTTY keys and PEM keys with escaped newlines; a
  standalone AWS key id; a Telegram bot token; Notion ``secret_`` tokens, every Doppler token
  (``dp.st.``, ``dp.ct.``, ``dp.sa.``, ...), Stripe ``whsec_`` and test-mode keys; a
  random-looking value a few words after a credential word. The keyword and prose rules take a
  no-break space for a space.
- Rules named ``custom.hint-*`` find, within the same scan, places that need a second look: a
  Markdown table with a credential column header (each cell of that column is judged), a token
  cut by a line break or followed by punctuation (the built-in rules want a token to end at a
  space or a quote), an invisible character, a Latin letter or digit touching a Cyrillic or Greek
  one.

Text that hides a secret from byte patterns is also scanned as a normalised copy, built only when
the text has something to normalise: NFKC (full-width ``ＡＫＩＡ…``, ligatures), invisible
characters (zero-width space, soft hyphen, BOM) dropped, HTML entities (``password&#58;``)
decoded, a wrapped token re-joined (where both sides of the break look random), a space put after
a token followed by punctuation, and Cyrillic and Greek letters drawn like Latin ones folded to
Latin inside a word that mixes the scripts (``ghp_…О…``, ``pаssword:``; a Russian or Greek word
is never rewritten). Spans found in the copy are mapped back to the original characters, so a
redacted span keeps the newlines it covers. A value the original scan already judged keeps that
verdict.

The value a project rule captures is judged in Python, since the regex engine has no look-ahead
(:func:`judge`): placeholders such as ``${TOKEN}``, ``<your-token>``, ``os.environ[...]``,
``changeme``, ``xxxx``, a number, a printf conversion (``%s``, ``%ld``), a variable or call in
code (``has_psk``, ``f(token)``), a plain word after a keyword, a value in Chinese, Japanese or
Korean script, or a phrase with common words or a password word (``see the vault``, ``passwd:
senha atualizada com sucesso``) are not redacted; an unquoted passphrase of plain words runs to
the end of its line; four digits or more after a PIN or password word are a PIN.

Known misses: a secret with no recognisable shape, keyword or syntax ("it's hunter2 for the
router"); a password in prose that is a plain word or an unquoted phrase ("the password is
sunshine"); a PIN in prose with no verb or colon ("PIN 4711 for the card"); right after a password
word with no colon or verb: a value of capitalised words and a number (``Passwort CopperFalcon42``,
which reads like ``OnePlus12``), a value in another script (``пароль Привет123``), a value more than
three words away or after a word with digits ("password for the office printer X"), and about 0.4 %
of random mixed-case passwords of 10-14 characters (too few changes between lower case, capitals and
digits); a key that starts with a password word and a value of words and a number (``password_wifi:
CopperFalcon42``); a value that reads as code or a name after a keyword (``password:
correct_horse_battery``, ``Correct-Horse-Battery``, ``hunter``); a multi-word cell of plain words in
a password column (kept, as "in the vault" must be); a token in lower case only (``dop_v1_<hex>``)
cut by a line break or followed by punctuation, which gets no second look; a look-alike letter from
a script other than Cyrillic, Greek or the two IPA letters drawn as Latin ones (ɑ, ɡ; a combining
accent on a Latin letter is dropped in the copy); a .pgpass line for a port other than 5432; a
no-break space inside a command line (``sshpass -p\u00a0x``).
Accepted over-redaction: a random-looking value after a keyword (a long build id after
``token:``); every non-placeholder cell in a password column; a line of three to eight plain words
after a password keyword, taken for a passphrase ("password: rotated every quarter"); four
digits after ``pin:`` that are not a PIN; a product name with a number inside it right after a
password word (``Passwort für RTX4090Ti``); a Greek κωδικός that is a product code
("ο κωδικός προϊόντος είναι AB12345").

Redaction fails closed: without kingfisher, :class:`Redactor` raises
:class:`RedactionUnavailable` instead of returning text unredacted.

The first use compiles the rules (4-6 s); kingfisher caches the compiled database on disk
(``cache_dir``, else its OS cache directory), after which start-up takes about 0.4 s. A 1.5 kB
chunk costs about 30-60 µs of CPU, depending on the machine's load (one scan, a second one for
the few texts that need a copy; eval/bench/redact_recall.py measures it).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hybrid.core.errors import HybridError
from hybrid.store.agent.redact_copy import Scan, normalised_copy, token_piece
from hybrid.store.agent.redact_rules import (
    COMPANION_NAME_RE,
    HINT_INVISIBLE,
    HINT_MIXED,
    HINT_TABLE,
    HINT_TOKEN_END,
    REDACTED,
    RULE_KINDS,
    judge,
    table_spans,
)

RULES_FILE = Path(__file__).parents[2] / "data" / "secret_rules.yml"
# Bump when the Python-side filtering (hybrid.store.agent.redact_rules, redact_copy) changes what
# is redacted (the rule file and the kingfisher version are the other inputs; together they say
# when redacted text may differ).
FILTER_REVISION = 6

# --- kingfisher ---------------------------------------------------------------------------------

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


def _char_offsets(data: bytes, text_len: int, offsets: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """UTF-8 byte spans into ``data`` as character spans, each end moved to a character boundary
    (a start back, an end forward). One pass over ``data`` for all of them."""
    if len(data) == text_len:  # ASCII: bytes are characters
        return offsets

    def boundary(off: int, ceil: bool) -> int:
        off = max(0, min(off, len(data)))
        while 0 < off < len(data) and data[off] & 0xC0 == 0x80:  # inside a character
            off += 1 if ceil else -1
        return off

    spans = [(boundary(s, False), boundary(e, True)) for s, e in offsets]
    chars: dict[int, int] = {}
    pos = count = 0
    for off in sorted({o for span in spans for o in span}):
        count += len(data[pos:off].decode("utf-8", "surrogatepass"))
        chars[off] = count
        pos = off
    return [(chars[s], chars[e]) for s, e in spans]


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

    def _scan(self, scanner: Any, text: str) -> Scan:
        """One kingfisher pass over ``text``."""
        data = text.encode("utf-8", "surrogatepass")  # a lone surrogate (from a bad file name) is kept
        with self._scan_lock:
            findings = scanner.scan(data)
        found: list[tuple[int, int]] = []
        judged: list[tuple[str, int, int, tuple[int, int] | None]] = []
        wrapped: list[tuple[int, int]] = []
        punctuated: list[int] = []
        mixed: list[int] = []
        invisible = False
        findings = [f for f in findings if f.visible or not COMPANION_NAME_RE.search(f.rule_id)]
        places = _char_offsets(data, len(text), [(f.location["start_offset"], f.location["end_offset"])
                                                 for f in findings])
        for f, (s, e) in zip(findings, places):
            kind = RULE_KINDS.get(f.rule_id)
            if e <= s:
                continue
            if kind is None:
                found.append((s, e))
            elif kind == HINT_TABLE:
                found += table_spans(text, s)
            elif kind == HINT_TOKEN_END:
                if "\n" in text[s:e]:
                    wrapped.append((s, e))
                elif token_piece(text[s:e - 1]):
                    punctuated.append(e - 1)
            elif kind == HINT_INVISIBLE:
                invisible = True
            elif kind == HINT_MIXED:
                mixed.append(s)
            else:
                judged.append((f.rule_id, s, e, judge(text, s, e, kind)))
        return Scan(found, judged, wrapped, punctuated, invisible, mixed)

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Sorted, merged character spans of the secrets in ``text``."""
        scanner = self._get_scanner()
        if not text:
            return []
        scan = self._scan(scanner, text)
        found = scan.found + [span for *_, span in scan.judged if span]
        view = normalised_copy(text, scan)
        if view is not None:
            copy = self._scan(scanner, view.text)
            spans = copy.found
            for rule, s, e, span in copy.judged:
                s, e = view.original(s, end=False), view.original(e, end=True)
                # A value the original scan judged, or judged longer (`x.set(...)` seen as `x` in the
                # copy, where a space follows `x`), keeps the original's verdict.
                if span and not any(r == rule and os <= s and e <= oe for r, os, oe, _ in scan.judged):
                    spans.append(span)
            found += [(view.original(s, end=False), view.original(e, end=True)) for s, e in spans]
        if text.startswith("---"):  # a front block: each value judged with its key, as filters judge it
            from hybrid.store.agent.values import front_spans
            found += front_spans(text)
        return _merge(found)

    def redact(self, text: str) -> str:
        """``text`` with every secret replaced by ``[redacted secret]``; the line count is kept."""
        spans = self.spans(text)
        return _apply(text, spans) if spans else text

    def redact_parts(self, parts: Sequence[str]) -> list[str]:
        """Redact the consecutive chunk texts of one note as one text, so that a secret cut by a
        chunk boundary (a PEM block split in two) is still found and each fragment redacted.
        Chunk i+1 may start with the end of chunk i (the chunker's overlap,
        :func:`hybrid.store.local.lexical.overlap`): that text is scanned once and redacted in both."""
        if not parts:
            return []
        from hybrid.store.lexicon import overlap

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
