"""What an agent may learn about a frontmatter property's value: one rule, judged with its key.

A value alone often says nothing (``CorrectHorse42`` is a word, ``12345678`` a number); beside
its key it is a password (``wifi_password: CorrectHorse42``, ``passcode: 12345678``). So a value
is judged with its key:

- under a key naming a credential (:func:`hybrid.store.agent.redact_rules.column_kind`, the
  words that head a table's password or token column: ``wifi_password``, ``db_pass``, ``pin``,
  ``Passwort``, ``пароль``, ``api_key``) every value is a secret, whatever it is: a passphrase
  of common words, ``yes``, a number YAML reads in another base (``pin: 0420`` is 272 to the
  parser), ``12:34``; a property is a field, not prose, so nothing there is "see the vault";
- under any key, a value the redactor finds in the line ``key: value`` (a token).

:func:`hides_value` is that judgement, and everything an agent is told of a value follows it:
the front block ``get_note`` shows (:func:`front_spans`, part of every redaction), which values
a property filter matches, the values and ranges a filter that matches nothing suggests
(:mod:`hybrid.retrieval.properties`), the properties of the rows it is served, and what the
audit log records of its filters. A value shown redacted is therefore never matched, suggested,
ranged or written in clear, so no filter can confirm a guess of it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from hybrid.store.agent.redact_rules import REDACTED, column_kind

_KEY_LINE = re.compile(r"^(?P<indent>[ \t]*)(?:-[ \t]+)?(?P<key>[^\s:#\-\[{][^:]*?|\"[^\"]+\"|'[^']+')[ \t]*:"
                       r"(?:[ \t]+(?P<value>.*?))?[ \t]*$")
_ITEM_LINE = re.compile(r"^(?P<indent>[ \t]*)-[ \t]+(?P<value>.*?)[ \t]*$")
_QUOTES = "\"'"
RESERVED = "hybrid:"  # hybrid's own keys (hybrid.store.props.RESERVED): no value of the owner's
# credential words a key may hold that a table's column header does not count (a "Pin" column
# of a wiring diagram), and the password word in languages the keyword rules do not know
_OTHER_CREDENTIAL = re.compile(
    r"(?i)pins?|pin_?code|pin_?nummer|geheimzahl|puk|totp(?:_(?:seed|secret|key))?|otp(?:_(?:seed|secret|key))?"
    r"|(?:recovery|backup|mfa|2fa)_codes?"
    r"|(?:door|safe|gate|alarm|lock|garage|entry|access|security|keypad|key|t(?:ü|ue)r|tor)_?(?:codes?|combo)"
    r"|code_?words?|codewort|combination|cvv2?|cvc2?|csc|card_?(?:verification|security)_?(?:code|value)"
    r"|credentials?|creds|login_?(?:data|details|info)|zugangsdaten|anmeldedaten|logindaten|identifiants"
    r"|credenciales|credenziali|inloggegevens|учетные_данные|учётные_данные"
    # a network's key, in the words routers and their stickers use
    r"|(?:wifi|wi_fi|wlan|wpa2?|wep|wireless|network|netzwerk|sicherheits|r(?:é|e)seau|red|wpa_psk)_?"
    r"(?:key|schl(?:ü|ue)ssel|sleutel|nyckel|n(?:ø|o)kkel|avain|klucz|ключ|cl(?:é|e)|clave|chiave)"
    r"|(?:ключ|cl(?:é|e)|clave|chiave)_(?:wifi|wi_fi|wlan|wpa|сети|доступа|(?:de_|du_)?r(?:é|e)seau|de_red)"
    r"|parool|geslo|slapta(?:ž|z)odis|parole|lykilor(?:ð|d)|รหัสผ่าน"
    # short forms and the words for a PIN in other scripts (`пин`, not inside `пинг`: a whole word)
    r"|pswd|psw|pword|p_w|пин|पिन|핀|비번|(?:wifi|wi_fi|wlan)_(?:code|c(?:ó|o)digo|codice|kod|код)"
    r"|(?:code|c(?:ó|o)digo|codice|kod|код)_(?:wifi|wi_fi|wlan)")
# words that name a code or a key only sometimes (a song's key, a login name, a safe place): a
# value under them is hidden when it reads like a code (a digit in a few words) or a pair
_CODE_WORD = re.compile(
    r"(?i)keys?|codes?|kod|kode|koda|kód|код|c(?:ó|o)digo|codice|combo|safe|door|gate|lock|locker|login|logins"
    r"|keypad|tresor|coffre|candado|lucchetto|cassaforte|sejf|сейф|auth|account|accounts|basic"
    r"|padlock|cadenas|schloss|vorh(?:ä|ae)ngeschloss|caja_fuerte|kłódka|klodka|замок"
    r"|schl(?:ü|ue)ssel|ключ|cl(?:é|e)|clave|chiave|sleutel|nyckel|n(?:ø|o)kkel|avain|klucz")
_PAIR = re.compile(r"\S+[:/]\S{3,}")  # user:secret, user/secret
# a code that names a place, a status or a product, not a lock's
_PUBLIC_CODE = re.compile(
    r"(?i)zip|postal|post|plz|postleitzahl|area|country|region|language|lang|status|error|exit|http|response"
    r"|return|product|course|colou?r|source|iso|currency|airport|dial|phone|tax|vat|sku|ean|bar|qr|shell|date"
    r"|result|results|point|points|idea|ideas|takeaways?|figures?|signature|word|words|words?_count|count")
# Credential words found inside a key's letters, glued to others or inflected (`WiFi密码`,
# `wifipassword`, `Routerpasswort`, `Passwörter`, `mots de passe`), in the key folded to plain
# lower-case letters (accents, look-alike letters and digits folded, separators dropped).
_STEM = re.compile(
    r"passw|passphr|passcod|kennw|wachtw|passord|adgangskod|kodeord|salasan|senha|contrase|losenord|jelsz"
    r"|lozink|hesl[oa]|haslo|hasla|sifre|motsdepass|motdepass|palavrapass|katasandi|matkhau"
    r"|парол|лозинк|κωδικ|συνθηματικ|סיסמ|المرور|كلمةالسر|पासवर्ड|密码|密碼|口令|パスワード|暗証|비밀번호|암호"
    r"|credential|apikey|apitoken|accesskey|secretkey|privatekey|authtoken|accesstoken|clientsecret"
    r"|geheimzahl|geheimnummer|pincod|pinkod|pinnumm|pin码|pinコード|пинкод|tresorcod|safecod|zahlenschloss"
    r"|kartenprufnummer|prufnummer|securityanswer|sicherheitsfrage|sicherheitsantwort|recoverycod|backupcod"
    r"|seedphrase|mnemonic|twofactor|totp|otpseed|otpsecret|2fa|wifikey|wlankey|wlanschlussel|netzwerkschlussel"
    r"|wpakey|wpapsk|🔑|🔐|🗝|パスコード|pin번호|핀번호|비밀번호|katalaluan|geheimcod")
# a short credential word glued after what it opens (`adminpass`, `rootpw`, `simpin`)
_GLUED = re.compile(
    r"(?:admin|root|db|user|wifi|wlan|master|mail|email|ftp|sftp|ssh|sql|mysql|pg|postgres|router|server|vpn"
    r"|guest|app|web|site|account|login|sudo|net|home|bank|pc|windows|linux|local|smtp|imap|redis|git|aws"
    r"|gmail|icloud|apple|google|phone|sim|card|door|safe|lock|alarm|gate|my|atm|debit|credit|visa|amex|bankcard"
    r"|giro|girocard|cash)(?:pass|pw|pwd|pin|psk|code|secret|token)(?:s|\d*)$")
_FOLD_LETTERS = str.maketrans({"ł": "l", "ø": "o", "æ": "ae", "ß": "ss", "đ": "d", "ı": "i", "œ": "oe"})
_SEPARATORS = re.compile(r"[\s_\-.:/@'’`]+")
_KEY_WORDS = re.compile(r"[\s_\-.:/@#+]+|\d+")  # what separates the words of a key
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")    # dbPass: db Pass
_LEET = str.maketrans("@$01345!7", "asoieasit")  # p@ssw0rd, pa55word, p4ssw0rd, 4pik3y
_SHOWN_MARKS = (REDACTED, REDACTED.strip("[]"))  # the mark as YAML reads it back: a list of one item
_PLAIN_MARK = "hybridredactedsecret"  # the mark as the check of what a front block shows writes it


def hides_value(redactor: Any, key: str, value: str) -> bool:
    """Whether an agent is shown ``value`` of property ``key`` redacted (see the module's doc)."""
    return hidden_pairs(redactor, [(key, value)])[0]


def hidden_pairs(redactor: Any, pairs: Sequence[tuple[str, str]]) -> list[bool]:
    """:func:`hides_value` of each ``(key, value)`` of ``pairs`` (a note's properties), with one
    scan of their lines ``key: value`` (a line apart each: the redactor's rules stop at a line's
    end), not one a value: what a search's first look at a note's rows costs."""
    keys = [str(k) for k, _ in pairs]
    values = [" ".join(str(v).split()) for _, v in pairs]  # one line each
    out = [bool(v) and _by_key(k, v) for k, v in zip(keys, values)]
    todo = [i for i, v in enumerate(values) if v and not out[i]]
    if not todo:
        return out
    lines = [f"{keys[i]}: {values[i]}" for i in todo]
    spans = redactor.spans("\n\n".join(lines))
    start = 0
    for i, line in zip(todo, lines):
        end = start + len(line)
        out[i] = any(s < end and e > start for s, e in spans)
        start = end + 2
    return out


def hidden_in_note(redactor: Any, properties: dict[str, Any]) -> set[tuple[str, str]]:
    """The ``(key, value)`` pairs (both as text, the key as written) of a note's frontmatter that
    an agent is shown redacted: :func:`hidden_pairs` of every scalar, and every pair whose value
    is one of those under another key (YAML's anchors: ``shared: &pw X`` then ``wifi_password:
    *pw`` show ``X`` under ``shared`` too, which must not confirm it)."""
    pairs = [(k.strip(), str(v)) for key, value in properties.items() if not str(key).startswith(RESERVED)
             for k, v in _scalars(str(key), value)]
    hidden = {pair for pair, h in zip(pairs, hidden_pairs(redactor, pairs)) if h}
    values = {" ".join(v.split()) for _, v in hidden}
    return hidden | {(k, v) for k, v in pairs if " ".join(v.split()) in values}


def front_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of the values in the front block that opens ``text`` which the key rule
    hides (a scan of the text finds the rest): under a key naming a credential, a scalar with
    the lines it continues on, each item of a list (inline ``[a, b]`` or one ``- item`` a line),
    the lines of a block scalar, a flow mapping holding such a key, whatever the value's type.
    What the spans leave is checked with the YAML parser the indexer reads the block with: when
    a value under such a key survives (a form of YAML the lines do not show: a ``? key``, an
    escaped key), every value of the block is hidden."""
    if not text.startswith("---"):
        return []
    first = text.find("\n")
    if first < 0 or text[:first].strip() != "---":
        return []
    body_start = first + 1
    close = _closing(text, body_start)
    if close is None:
        return []
    spans, judged_key = _line_spans(text, body_start, close)
    if not judged_key and not _YAML_FORMS.search(text, body_start, close):
        return spans  # no key to judge, and no YAML form the lines could miss: no parse needed
    secrets = _credential_values(text[body_start:close])
    if secrets is None:  # not a front block the indexer reads: its note is hidden from agents whole
        return spans
    if secrets and not _leaves_no_secret(text[body_start:close], spans, body_start, secrets):
        return _every_value(text, body_start, close)
    return spans


# what YAML can say that a line-by-line reading misses: an anchor or alias, a complex key, a
# tag, an escape in a quoted key, a flow mapping
_YAML_FORMS = re.compile(r"[&*?!\\{]")


def _closing(text: str, pos: int) -> int | None:
    """Where the front block's closing ``---`` (or ``...``) line starts, or None."""
    while pos < len(text):
        end = text.find("\n", pos)
        end = len(text) if end < 0 else end
        if text[pos:end].strip() in ("---", "..."):
            return pos
        pos = end + 1
    return None


def _line_spans(text: str, pos: int, close: int) -> tuple[list[tuple[int, int]], bool]:
    """The spans the lines of the block show under keys naming a credential, and whether a key
    of its lines names a credential or a code (whatever its value)."""
    spans: list[tuple[int, int]] = []
    judged_key = False
    key_at: list[tuple[int, str]] = []  # (indent, key) of the keys whose values may follow
    block: tuple[int, str] | None = None   # a block scalar (``key: |``) or a scalar that goes on
    while pos < close:
        end = text.find("\n", pos)
        end = len(text) if end < 0 else end
        line = text[pos:end]
        indent = len(line) - len(line.lstrip(" \t"))
        if block is not None:
            if line.strip() and indent <= block[0]:
                block = None
            elif line.strip():
                if _by_key(block[1], line):
                    spans.append((pos + indent, end - (len(line) - len(line.rstrip()))))
                pos = end + 1
                continue
        m = _KEY_LINE.match(line)
        item = _ITEM_LINE.match(line) if m is None else None
        if m is not None:
            key = _key_text(m["key"])
            judged_key = judged_key or _credential(key) or _code_key(key)
            while key_at and key_at[-1][0] >= indent:
                key_at.pop()
            key_at.append((indent, key))
            value = m["value"] or ""
            if value and not value.startswith("#"):
                if value[0] in "|>" and value.strip("|>+-0123456789") == "" or not value.startswith(("[", "{")):
                    block = (indent, key)  # a block scalar's lines, or a plain scalar's next ones
                if value[0] not in "|>" or value.strip("|>+-0123456789") != "":
                    spans += _judged(key, pos + m.start("value"), value)
        elif item is not None and key_at:
            spans += _judged(key_at[-1][1], pos + item.start("value"), item["value"])
            block = (indent, key_at[-1][1])
        pos = end + 1
    return spans, judged_key


def _judged(key: str, at: int, value: str) -> list[tuple[int, int]]:
    """The span of ``value`` (at offset ``at`` of the text) when its key names a credential (a
    quoted value without its quotes), or when it is a flow mapping holding such a key."""
    if key.startswith(RESERVED) or REDACTED in value:  # redacted already (redaction is idempotent)
        return []
    if value.startswith("{") and any(_by_key(_key_text(k.split(":", 1)[0]), k.split(":", 1)[1])
                                     for k in value[1:].rstrip("}").split(",") if ":" in k):
        return [(at + 1, at + len(value.rstrip("}")))]
    if not _by_key(key, value):
        return []
    inner = _unquoted(value)
    if value.startswith("[") and value.endswith("]"):
        inner = value[1:-1]
    if not inner.strip():
        return []
    start = at + value.find(inner)
    return [(start, start + len(inner))]


@lru_cache(maxsize=8192)
def _code_key(key: str) -> bool:
    """Whether ``key`` holds a word that names a code or a key only sometimes (and no word that
    makes it a place's or a status's code)."""
    key = key.strip()
    return not key.startswith(RESERVED) and (_named(key, _CODE_WORD) or _named(key.translate(_LEET), _CODE_WORD)) \
        and not _named(key, _PUBLIC_CODE)


@lru_cache(maxsize=8192)
def _credential(key: str) -> bool:
    """Whether property ``key`` names a credential: a password, token or API key word as a table
    column's header would (:func:`column_kind`), or a PIN, PUK, one-time-password seed, recovery
    codes or a door's code (a key, unlike a table's "Pin" column of a wiring diagram), anywhere in
    the key's words (``password_wifi``, ``admin_password_old``, ``dbPass``, ``password2``), also
    spelled with look-alike digits and signs (``p@ssw0rd``)."""
    key = key.strip()
    if key.startswith(RESERVED) or not key:
        return False
    if len(key) > _LONG_KEY:  # a paragraph as a key: judged closed, not word by word
        return True
    if _named(key, _OTHER_CREDENTIAL) or _named(key.translate(_LEET), _OTHER_CREDENTIAL):
        return True
    folded = _folded(key)
    return bool(_STEM.search(folded) or _STEM.search(folded.translate(_LEET)) or _GLUED.search(folded)
                or _GLUED.search(folded.translate(_LEET)))


@lru_cache(maxsize=4096)
def _folded(key: str) -> str:
    """``key`` as plain lower-case letters: NFKC (full-width letters), case folded, Latin
    accents dropped (a kana's voicing mark stays), Cyrillic and Greek letters drawn like Latin
    ones folded in a key that holds Latin letters too, separators dropped (``Pässwort``,
    ``pаssword``, ``ｐａｓｓｗｏｒｄ``, ``mots de passe``)."""
    import unicodedata

    from hybrid.store.agent.redact_copy import fold_look_alikes
    text = unicodedata.normalize("NFKC", key).casefold()
    text = "".join(c for c in unicodedata.normalize("NFD", text) if not "\u0300" <= c <= "\u036f")
    text = unicodedata.normalize("NFC", text).translate(_FOLD_LETTERS)
    text = "".join(c for c in text if unicodedata.category(c) != "Cf")  # a zero-width space, a soft hyphen
    if any(c.isascii() and c.isalpha() for c in text):
        text = fold_look_alikes(text)
    return _SEPARATORS.sub("", text)


def _by_key(key: str, value: str) -> bool:
    """Whether ``value`` is hidden by the rule of its ``key``: every value under a key naming a
    credential (:func:`_credential`); under a word that names a code or a key only sometimes
    (``door``, ``key``, ``login``, ``ключ``), a value that reads like a code, a digit in up to
    three words (``4821``, ``12-34-56``, ``Zq7Leet0004``), or a pair (``admin:hunter``), while
    ``key: C major`` and ``login: alice`` are shown."""
    if _credential(key):
        return True
    if not _code_key(key):
        return False
    value = _unquoted(" ".join(value.split()))
    return (any(c.isdigit() for c in value) and len(value.split()) <= 3) or bool(_PAIR.fullmatch(value))


_LONG_KEY = 400


@lru_cache(maxsize=4096)
def _named(key: str, other: re.Pattern[str]) -> bool:
    words = [w for w in _KEY_WORDS.split(_CAMEL.sub(" ", key)) if w]
    for size in (1, 2, 3):  # `api_key`, `mot_de_passe`: a credential word of up to three words
        for i in range(len(words) - size + 1):
            run = "_".join(words[i:i + size])
            if other.fullmatch(run) or (other is _OTHER_CREDENTIAL and column_kind(run) is not None):
                return True
    return False


def _key_text(key: str) -> str:
    """A key as YAML reads it: a quoted one unquoted, its escapes resolved (``"p\\x61ss"``)."""
    key = key.strip()
    if len(key) >= 2 and key[0] == key[-1] == '"' and "\\" in key:
        import yaml
        try:
            return str(yaml.safe_load(key))
        except yaml.YAMLError:
            return key[1:-1]
    return key.strip("'\"")


def _credential_values(block: str) -> set[str] | None:
    """The values (as text, spaces folded) under keys naming a credential of the front block,
    as the indexer's YAML parser reads it (aliases, complex keys and escapes resolved); None
    when the parser does not read it as a mapping (nothing to show: its note is unreadable)."""
    from hybrid.sources.markdown import load_frontmatter
    try:
        parsed = load_frontmatter(block)
    except Exception:  # noqa: BLE001 - any failure: the note's front block is unreadable
        return None
    if parsed is None:
        return set()
    if not isinstance(parsed, dict):
        return None
    out: set[str] = set()
    stack: list[tuple[Any, bool, str]] = [(parsed, False, "")]  # (item, under a credential, its key)
    while stack:
        item, cred, key = stack.pop()
        if isinstance(item, dict):
            stack += [(v, cred or _credential(str(k)), str(k)) for k, v in item.items()]
        elif isinstance(item, list):
            stack += [(v, cred, key) for v in item]
        elif item is not None and (value := " ".join(str(item).split())) and value not in _SHOWN_MARKS \
                and (cred or _by_key(key, value)):  # not redacted already
            out.add(value)
    return out


def _leaves_no_secret(block: str, spans: list[tuple[int, int]], offset: int, secrets: set[str]) -> bool:
    """Whether the block with ``spans`` redacted, read by the indexer's YAML parser, holds none
    of ``secrets`` anywhere (under another key too: an anchor's value) and no other value under
    a key naming a credential but the redaction mark. False when the redacted block does not
    parse (the original did): what it would show is not known."""
    shown, last = [], 0
    for s, e in sorted(spans):  # a plain word in the mark's place: YAML reads it in any position
        shown += [block[last:s - offset], _PLAIN_MARK]
        last = e - offset
    shown.append(block[last:])
    left = _credential_values("".join(shown))
    if left is None or any(v.replace(_PLAIN_MARK, "").strip(" ,") for v in left):
        return False  # a value under a credential key that is more than marks
    return not _holds_any("".join(shown), secrets)


def _holds_any(block: str, secrets: set[str]) -> bool:
    """Whether a scalar of the block (a key or a value, as the parser reads it) holds one of
    ``secrets``, or a word of three characters or more of one (a value cut across lines, or
    merged into a key by a flow mapping the lines did not read)."""
    from hybrid.sources.markdown import load_frontmatter
    try:
        parsed = load_frontmatter(block)
    except Exception:  # noqa: BLE001
        return True
    parts = secrets | {w for x in secrets for w in x.split() if len(w) >= 3}
    stack: list[Any] = [parsed]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack += [*item.keys(), *item.values()]
        elif isinstance(item, list):
            stack += item
        elif item is not None and any(p in str(item) for p in parts):
            return True
    return False


def _every_value(text: str, pos: int, close: int) -> list[tuple[int, int]]:
    """Every value of the block: after each key's colon, each item's dash, and any other line
    whole (what a YAML form the lines do not show may hold)."""
    spans = []
    while pos < close:
        end = text.find("\n", pos)
        end = len(text) if end < 0 else end
        line = text[pos:end]
        m = _KEY_LINE.match(line)
        item = _ITEM_LINE.match(line) if m is None else None
        if m is not None and m["value"]:
            spans.append((pos + m.start("value"), pos + m.end("value")))
        elif item is not None and item["value"]:
            spans.append((pos + item.start("value"), pos + item.end("value")))
        elif m is None and line.strip():
            spans.append((pos + len(line) - len(line.lstrip()), pos + len(line.rstrip())))
        pos = end + 1
    return spans


def _unquoted(value: str) -> str:
    v = value.strip()
    if len(v) >= 2 and v[0] == v[-1] and v[0] in _QUOTES:
        return v[1:-1]
    return v


def shown_properties(props: str, redactor: Any) -> str:
    """A note's frontmatter (JSON, as rows carry it) as an agent is shown it: each value that
    :func:`hides_value` hides replaced by the redaction mark (a list's items one by one; a
    nested mapping's values under their own keys). The same text when nothing is hidden."""
    try:
        value = json.loads(props)
    except ValueError:
        return "{}"
    if not isinstance(value, dict):
        return "{}"
    hidden = hidden_in_note(redactor, value)
    if not hidden:
        return props

    def shown(key: str, v: Any) -> Any:
        if isinstance(v, dict):
            return {k: shown(str(k), x) for k, x in v.items()}
        if isinstance(v, list):
            return [shown(key, x) for x in v]
        return REDACTED if v is not None and (key.strip(), str(v)) in hidden else v
    return json.dumps({k: v if str(k).startswith(RESERVED) else shown(str(k), v) for k, v in value.items()})


def _scalars(key: str, value: Any) -> list[tuple[str, Any]]:
    """The ``(key, value)`` of every scalar of a frontmatter value (a list's items under its key,
    a nested mapping's under their own; a boolean too: ``db_password: yes``), nothing left out."""
    if isinstance(value, dict):
        return [pair for k, v in value.items() for pair in _scalars(str(k), v)]
    if isinstance(value, list):
        return [pair for v in value for pair in _scalars(key, v)]
    if value is None:
        return []
    return [(key, value)]
