"""The Python side of the redaction rules (:mod:`hybrid.store.agent.redact`): how a value a project rule
captured is judged (a placeholder such as ``${TOKEN}`` or ``changeme`` is kept, a passphrase
runs on to the end of its line), and the cells of a table column headed by a credential word.
The normalised copy of a text that is scanned as well is :mod:`hybrid.store.agent.redact_copy`.
"""

from __future__ import annotations

import re
import unicodedata

REDACTED = "[redacted secret]"  # what a secret is replaced by

# How the value a project rule captured is judged (:func:`judge`). Built-in rules match fixed
# token shapes, and their findings are kept as they are.
_KEYWORD = "keyword"          # after a credential name: kept unless a placeholder or a plain word
_PASSWORD = "password"        # the same; an unquoted passphrase runs on to the end of the line
_STRICT = "strict"            # syntax that leaves no doubt (URL userinfo, `sshpass -p`): a plain word counts
_RANDOM = "random"            # near a credential word: kept if random-looking, letters and digits
_PROSE_PASSWORD = "prose"     # after "password is": kept if password-looking
_BARE_PASSWORD = "bare"       # right after "password", no verb or colon: kept if random-looking
_CODE = "code"               # after "the PIN is", "the alarm code is": kept unless one digit repeated or a date
HINT_TABLE = "table"         # a table header with a credential column: judge that column's cells
HINT_TOKEN_END = "token-end"  # a token cut by a line break, or followed by punctuation: scan a
#                               copy re-joined, or with a space after it
HINT_INVISIBLE = "invisible"  # a zero-width or other format character: scan a copy without it
HINT_MIXED = "mixed-script"   # Latin touching Cyrillic or Greek: scan a copy with look-alikes folded
RULE_KINDS = {
    "custom.url-password": _STRICT,
    "custom.keyword-password": _PASSWORD,
    "custom.keyword-secret": _KEYWORD,
    "custom.xml-secret": _KEYWORD,
    "custom.cli-password": _STRICT,
    "custom.cli-flag": _KEYWORD,
    "custom.auth-header": _KEYWORD,
    "custom.url-query-secret": _KEYWORD,
    "custom.webhook-url": _RANDOM,
    "custom.pgpass": _STRICT,
    "custom.keyword-prose": _RANDOM,
    "custom.password-prose": _PROSE_PASSWORD,
    "custom.password-bare": _BARE_PASSWORD,
    "custom.code-prose": _CODE,
    "custom.code-bare": _CODE,
    "custom.hint-table": HINT_TABLE,
    "custom.hint-token-end": HINT_TOKEN_END,
    "custom.hint-invisible": HINT_INVISIBLE,
    "custom.hint-mixed-script": HINT_MIXED,
}

# Built-in rules that are not shown (``visible: false``) report the companions a validator needs:
# most are secrets (an AWS secret key goes with its key id) but some are only names of things
# (an Azure storage account name, a client id, a host), which are not redacted.
COMPANION_NAME_RE = re.compile(r"[-_](?:id|name|url|host|domain|address|username|repository)(?:\.\d+)?$")
_WORDY_ID_RE = re.compile(r"^[a-z]+(?:[-_./][a-z0-9]+)+$|^[A-Za-z]+$|^\d+$")
_SEPARATOR_RE = re.compile(r"[-_./+]")
_PLACEHOLDER_WORDS = frozenset({
    "changeme", "change_me", "change-me", "changeit", "password", "passwd", "pass", "secret",
    "token", "apikey", "api_key", "example", "placeholder", "redacted", "hidden", "removed",
    "dummy", "sample", "true", "false", "null", "none", "nil", "undefined", "required",
    "optional", "string", "your_password", "yourpassword", "your_token", "your_api_key",
    "n/a", "tbd", "todo", "unknown", "unset", "empty", "blank",
})
# Words of instructions and sentences, not of passphrases: a value holding one is a note
# ("see the vault", "ask Bob", "stored in 1Password", a translated "Enter your password").
_STOP_WORDS = frozenset({
    "a", "an", "the", "and", "or", "of", "in", "on", "at", "to", "for", "from", "with", "by", "as",
    "is", "are", "was", "be", "it", "this", "that", "not", "no", "see", "ask", "use", "check",
    "same", "your", "my", "our", "their", "stored", "saved", "kept", "set", "via", "here", "there",
    "below", "above", "later", "never", "always", "please", "enter", "type", "when", "if", "than",
    "then", "what", "who", "how", "why", "password", "passwords", "token", "secret", "key",
    # the same kind of words, of three letters or more, in the other languages written in Latin
    # letters that the rules know ("passwd: senha atualizada com sucesso", "siehe Tresor")
    "der", "die", "das", "den", "dem", "des", "ein", "eine", "einen", "und", "oder", "ist", "sind",
    "nicht", "mit", "für", "von", "bei", "nach", "auf", "siehe", "bitte", "noch", "auch", "wird",
    "les", "une", "est", "sont", "dans", "pour", "avec", "sur", "voir", "pas", "par", "que", "qui",
    "los", "las", "una", "del", "por", "para", "con", "ver", "sin", "está", "son", "uma", "dos",
    "com", "sem", "não", "foi", "gli", "della", "per", "che", "non", "sono", "vedi", "het",
    "een", "van", "met", "voor", "zie", "niet", "ook", "och", "med", "för", "att", "inte", "eller",
    "som", "var", "blev", "till", "från", "ikke", "ble", "til", "fra", "har", "jest",
    "nie", "się", "lub", "dla", "bir", "ile", "için", "değil", "veya", "dan", "atau", "yang",
    "untuk", "dengan", "dari", "tidak", "ini", "itu", "ada", "akan", "els", "amb", "sense",
})
# A password word in any of the rules' languages: a value of plain words holding one talks about
# a password ("passwd: passordet ble oppdatert", "--passwd passwd-Datenbank editieren").
_PASSWORD_WORD_RE = re.compile(
    r"(?i)pass(?:w(?:or)?d|phrase|code|wort|ord)|kennwort|wachtwoord|adgangskode|kodeord|salasana|senha"
    r"|heslo|has[łl][oaeę]|contrase(?:ñ|n)a|contrasenya|l[öo]senord|jelsz[óo]|lozinka|parol[aăe]|[şs]ifre"
    r"|sandi|kh[ẩa]u|парол|лозинк|κωδικ|συνθηματικ|סיסמ|المرور|पासवर्ड|密码|密碼|パスワード|비밀번호")
_PIN_WORD_RE = re.compile(r"(?i)(?:^|[^a-z])(?:pin(?:[\s_-]?(?:code|код))?|пин(?:-?код)?)[^a-zа-я]*$")
# printf conversions (%s, %ld, %2$s) and a line break escaped as %0A (GnuPG's prompts): text
# of a program's message, not of a password.
_FORMAT_RE = re.compile(r"%(?:\d+\$)?[-+ #0]*\d*(?:\.\d+)?(?:hh|h|ll|l|z|j|t)?[diouxXcsfgeEp]|%0[AaDd]")
# %s, %d, %ld or %1$s inside a value (`\x1b[1m%s\x1b[0m`); never a URL's, whose escapes (%20s…) look alike
_PRINTF_S_RE = re.compile(r"%(?:\d+\$)?(?:l|ll|z)?[sdu]")
# Scripts written without spaces between words (CJK, kana) or with particles joined to words
# (Hangul): a value in them is a sentence or a description, never a password people type.
_NO_SPACE_SCRIPT_RE = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_QUOTE_MARKS = "\"'`„“”«»‘’‚‹›「」"
_PLACEHOLDER_RES = [re.compile(p) for p in (
    r"^\$[A-Za-z_]\w*$",                    # $VAR
    r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$",     # ENV_VAR_NAME
    r"^[A-Za-z_][\w.]*[()]",                # a call: getpass.getpass(), env(, strtok(line, f(token)[0]
    r"^[A-Za-z_][\w.]*\[",                  # a subscript: os.environ['X'], tokens[i]
    r"^[A-Za-z_]+(?:\.[A-Za-z_]+)+$",       # an attribute: process.env.X, settings.api_key
    r"^(/|~/|\./|\.\./)[\w./-]*$",          # a path (`pwd: /home/alice`)
    r"^[A-Z][A-Za-z]*(?:-[A-Z][A-Za-z]*)+$",  # a command or header: ConvertTo-SecureString, X-Auth-Token
    r"^#[0-9A-Fa-f]{3,8}$",                 # a colour
    r"^%\(\w+\)s$",                         # %(name)s
    r"^[A-Z]+(?:[:_-][A-Z]+)+$",            # a metavariable of a command's help: ARG:FLAG, FILE-NAME
    r"^(.)\1+$",                            # one character repeated: ********, 00000000
    r"[xX*#•]{4}",                          # a masked part: sk-xxxx..., ****1234
    r"\.\.\.|…",                            # an ellipsis
)]
_ENV_MARKERS = ("${", "{{", "}}", "environ", "getenv", "process.env", "env(", "env[", "secrets.")
_PLAIN_WORD_RE = re.compile(r"(?:[^\W\d_]|[-_'])+")      # letters of any script, `-_'`
_IDENTIFIER_RE = re.compile(r"_?[a-z]+(?:_[a-z][a-z0-9]*)+|[a-z]+(?:[A-Z][a-z]+)+")
_PUBLIC_NAME_RE = re.compile(r"(?i)public[\w.-]*[\"']?\s*(?:[:=]|=>)?\s*[\"'`]?$")  # publicKeyToken="..."
_NUMBER_RE = re.compile(r"[\d.,:/+_\- ]+")                # counts, versions, dates, times, 129_595
_NOT_A_PASSWORD_RE = re.compile(
    r"://|^[\w.+-]+@[\w-]+\.[\w.]+$|^[/~]|^\.\.?/|^v?\d+(?:\.\d+)+|^\d{4}-\d\d-\d\d|^#|^\[\[|^\$")
_PHRASE_WORD_RE = re.compile(r"[A-Za-z][a-z]{2,}")
_PHRASE_MAX = 300  # characters: 24 words and their spaces
_SEED_RE = re.compile(r"(?i)(?:seed|recovery|mnemonic|backup)[\s_-]?(?:phrase|words)|mnemonic")
_SEED_WORDS = (12, 24)  # a BIP39 or Electrum seed: 12 to 24 words
_QUOTES = "\"'`"
_VALUE_STOP_RE = re.compile("[，。；、）」』】\u00a0\u202f]")  # ends an unquoted value (CJK text, French)
_PROSE_TRAIL = ".,;:!?)]}»*"


def _plain_word(value: str) -> bool:
    """Letters of any script and `-_'`: a word (`required`, `пароль`, `पासवर्ड`, whose vowel signs are
    marks, not letters)."""
    if _PLAIN_WORD_RE.fullmatch(value):
        return True
    return not value.isascii() and any(c.isalpha() for c in value) and all(
        c.isalpha() or c in "-_'" or unicodedata.category(c).startswith("M") for c in value)


def _is_placeholder(value: str, *, in_url: bool = False) -> bool:
    """True when a keyword or URL-password value is a stand-in rather than a secret. A plain
    short word counts as one after a keyword (`token: required`) but not as a URL's password."""
    v = value.strip(_QUOTE_MARKS + ".,;: \t").rstrip(")]}>").rstrip(_QUOTE_MARKS + ".,;:")  # `token: str)`
    if len(v) < 3 or v[0] in "[<{(*" or v.startswith("$(") or _NO_SPACE_SCRIPT_RE.match(v):
        return True
    if _FORMAT_RE.fullmatch(v) or (not in_url and _PRINTF_S_RE.search(v)):  # `Token: »%s«`, `: %ld`
        return True
    if not v.isprintable():  # a control character (an ANSI colour): output, not typed
        return True
    low = v.lower()
    if low in _PLACEHOLDER_WORDS or low.startswith(("your_", "your-", "your ", "my_", "my-")):
        return True
    if any(m in low for m in _ENV_MARKERS):
        return True
    words = low.split()
    if len(words) > 1 and (len(words) > 24 or any(w.strip(".,;:!?()") in _STOP_WORDS for w in words)):
        return True
    plain = _plain_word(v)
    if plain and _PASSWORD_WORD_RE.search(v):  # `--passwd passwd-Datenbank`
        return True
    if not in_url and ((plain and len(v) < 16)  # a plain word (`required`)
                       or _IDENTIFIER_RE.fullmatch(v)):  # a variable: `has_psk`, `passwordFromEnv`
        return True
    if _NUMBER_RE.fullmatch(v) and not (v.isdigit() and len(v) >= 10):  # a count, a port, a version
        return True
    return any(p.search(v) for p in _PLACEHOLDER_RES)


def _secret_looking(value: str) -> bool:
    """For a value found in prose: letters and digits both, and not an identifier made of words
    (`release-notes-2024`, `obsidian.md/v1`, `DINOv2-with-registers`: short pieces between
    separators, where a random key has long ones)."""
    if not (any(c.isdigit() for c in value) and any(c.isalpha() for c in value)) or _WORDY_ID_RE.match(value):
        return False
    pieces = _SEPARATOR_RE.split(value)
    return len(pieces) < 2 or max(map(len, pieces)) > 10


def _password_looking(value: str) -> bool:
    """For a value after "the password is": a letter and a digit or a symbol, and not a word, a
    number, a path, a URL, an e-mail address, a version or a date."""
    if not 6 <= len(value) <= 64 or _NOT_A_PASSWORD_RE.search(value) or _FORMAT_RE.search(value) \
            or _is_placeholder(value, in_url=True):
        return False
    return any(c.isalpha() for c in value) and any(c.isdigit() or c in "!#$%&*+=?@^~|" for c in value)


# A value that is words and a number (a product or model name: OnePlus12, MacBook16, iPhone15,
# XPS13; also CopperFalcon42, which right after "password" with no verb cannot be told from one).
_NAME_WITH_NUMBER_RE = re.compile(r"[a-z]?(?:[A-Z]?[a-z]{2,}|[A-Z]{2,})+\d{0,4}")
_LOWER_RUN_RE = re.compile(r"[a-z]{2,}")
_VALUE_PIECES_RE = re.compile(r"[-_./]")
_CHAR_RUN_RE = re.compile(r"[a-z]+|[A-Z]+|\d+|[^a-zA-Z\d]+")
# The word before a hex or random value that says it is a hash, not a key ("commit 9fceb02…").
_HASH_NAME_RE = re.compile(r"(?i)(?:^|[^a-z0-9])(?:commit|sha\d*|hash|revision|rev|checksum|digest|md5|fingerprint)"
                           r"[\s:#`'\"=]{1,4}$")


def _name_with_number(value: str) -> bool:
    """Capitalised words (each small-letter run with a vowel, as words have: not the `qjrxj` of a
    random string) or capitals, and up to four digits: OnePlus12, iPhone15, XPS13."""
    return (_NAME_WITH_NUMBER_RE.fullmatch(value) is not None
            and all(any(v in run for v in "aeiouy") for run in _LOWER_RUN_RE.findall(value)))


def _has_upper(text: str) -> bool:
    return any(c.isupper() for c in text)


def _random_password(value: str) -> bool:
    """For a value right after a password word with no verb or colon: printable ASCII, 8-64
    characters, a letter and a digit or a symbol, and mixed (four runs of lower case, upper case,
    digits or symbols: Xk9mP2vL7qZ, L4nt3rn#5), not a name with a number (OnePlus12) nor a name
    of such pieces, one-kind ones or lower-case ones (AES-256-GCM, Qwen2.5-7B, k8s-prod-01,
    utf8mb4_general_ci), nor a path, URL, version or date."""
    if not 8 <= len(value) <= 64 or not value.isascii() or not value.isprintable():
        return False
    if _NOT_A_PASSWORD_RE.search(value) or _FORMAT_RE.search(value) or _is_placeholder(value, in_url=True):
        return False
    if not any(c.isalpha() for c in value) or value.isalpha() or _name_with_number(value):
        return False
    pieces = [p for p in _VALUE_PIECES_RE.split(value) if p]
    if len(pieces) > 1 and all(len(_CHAR_RUN_RE.findall(p)) <= 2 or _name_with_number(p) or not _has_upper(p)
                               for p in pieces):
        return False
    return len(_CHAR_RUN_RE.findall(value)) >= 4


def _ascii_end(text: str, s: int, e: int) -> int:
    """Where a value that starts in ASCII meets another script: CJK and Korean text go on without
    a space (パスワードは8文字以上, 비밀번호는 X입니다). A value that starts in another script (a
    Cyrillic password) is left whole."""
    if s >= e or not text[s].isascii():
        return e
    return next((i for i in range(s, e) if not text[i].isascii()), e)


def _phrase_end(text: str, s: int) -> int | None:
    """The end of a passphrase of plain words that starts at ``s`` and fills its line (three to
    eight words with none of :data:`_STOP_WORDS` and no password word; 12 to 24 of any kind after
    "seed phrase" or "mnemonic")."""
    eol = text.find("\n", s, s + _PHRASE_MAX + 1)
    if eol < 0:
        if len(text) - s > _PHRASE_MAX:
            return None
        eol = len(text)
    phrase = text[s:eol].rstrip(" \t.")
    words = phrase.split()
    if len(words) < 3 or not all(_PHRASE_WORD_RE.fullmatch(w) for w in words):
        return None
    seed = _SEED_RE.search(text, max(text.rfind("\n", max(0, s - 80), s) + 1, s - 80), s)
    if seed and _SEED_WORDS[0] <= len(words) <= _SEED_WORDS[1]:
        return s + len(phrase)
    lowered = [w.lower() for w in words]
    if len(words) > 8 or lowered[0] in _PLACEHOLDER_WORDS or any(w in _STOP_WORDS for w in lowered) \
            or any(_PASSWORD_WORD_RE.match(w) for w in lowered):
        return None
    return s + len(phrase)


def _pin(text: str, s: int, value: str) -> bool:
    """Four digits or more (not one repeated) after a PIN or password word: a PIN or passcode
    (`pin: 4711`, `passcode: 12345678`), where after `pass:` or a count it is a number."""
    if not (value.isdigit() and len(value) >= 4 and len(set(value)) > 1):
        return False
    before = text[max(text.rfind("\n", 0, s) + 1, s - 40):s]
    return _PIN_WORD_RE.search(before) is not None or _PASSWORD_WORD_RE.search(before) is not None


# “…”, ”…”, „…“, „…”, «…», »…«, ‹…›, ›…‹, ‘…’, 「…」, 『…』: the closing marks of each opening one
_CLOSING = {"\u201c": "\u201d\u201c", "\u201d": "\u201d", "\u201e": "\u201c\u201d", "\u00ab": "\u00bb",
            "\u00bb": "\u00ab", "\u2039": "\u203a", "\u203a": "\u2039", "\u2018": "\u2019", "\u300c": "\u300d",
            "\u300e": "\u300f"}
_YEAR_RE = re.compile(r"(?:19|20)\d\d")  # "the password policy is 2024 compliant"
_DATE_RE = re.compile(r"(\d{4})([-./])(\d\d?)\2(\d\d?)|(\d\d?)([-./])(\d\d?)\6(\d{2}|\d{4})")
# words that say where a password is, or that it is not given: a quoted phrase holding one is no passphrase
_NOT_GIVEN_WORDS = frozenset({
    "see", "ask", "same", "stored", "saved", "kept", "in", "here", "there", "below", "above", "later",
    "never", "vault", "manager", "check", "use", "please", "enter", "type", "your", "my", "our", "their",
    "not", "no", "none", "empty", "blank", "unchanged", "default"}) | _PLACEHOLDER_WORDS


def _code(value: str) -> bool:
    """A PIN or a door's code after its word and a verb: four digits or more, not one digit
    repeated (`0000` is a stand-in) and not a date."""
    digits = "".join(c for c in value if c.isdigit())
    return len(digits) >= 4 and len(set(digits)) > 1 and not _date(value)


def _date(value: str) -> bool:
    """2024-05-01, 01.05.2024, 5/1/24: a year and two numbers that can be a month and a day."""
    m = _DATE_RE.fullmatch(value)
    if m is None:
        return False
    a, b = (int(m[3]), int(m[4])) if m[1] else (int(m[5]), int(m[7]))
    return 1 <= min(a, b) <= 12 and 1 <= max(a, b) <= 31


def _quoted_passphrase(value: str) -> bool:
    """A quoted phrase after "the passphrase is": three to ten plain words, none saying where the
    password is or that there is none ("see the vault", "the same as before"), or four to forty
    characters of a script written without spaces."""
    if _NO_SPACE_SCRIPT_RE.match(value):  # 「紫の猿の食洗機」: a phrase written without spaces
        return 4 <= len(value) <= 40 and not any(c.isspace() for c in value)
    words = value.lower().split()
    return 3 <= len(words) <= 10 and all(_PLAIN_WORD_RE.fullmatch(w) for w in words) \
        and not any(w.strip("-'") in _NOT_GIVEN_WORDS for w in words)


def judge(text: str, s: int, e: int, kind: str) -> tuple[int, int] | None:
    """The span to redact for the value a project rule captured at ``text[s:e]``, or None when
    it is a placeholder or does not look like a secret (see :data:`RULE_KINDS`)."""
    if kind in (_KEYWORD, _PASSWORD) and _PUBLIC_NAME_RE.search(text, max(0, s - 40), s):
        return None
    quoted = e - s >= 2 and (text[s] in _QUOTES and text[e - 1] == text[s]
                             or kind in (_PROSE_PASSWORD, _PASSWORD) and text[e - 1] in _CLOSING.get(text[s], ""))
    if quoted:
        s, e = s + 1, e - 1
    else:
        if kind == _PROSE_PASSWORD:  # `**x`, `"x` with no closing quote
            s += len(text[s:e]) - len(text[s:e].lstrip("\"'`*"))
        if (stop := _VALUE_STOP_RE.search(text, s, e)) is not None:
            e = stop.start()
        if kind == _BARE_PASSWORD and e < len(text) and text[e].isalpha() and not _NO_SPACE_SCRIPT_RE.match(text[e]):
            return None  # the word goes on in other letters: SOCKSv5-yhteyskäytäntöön
        if kind in (_RANDOM, _PROSE_PASSWORD, _BARE_PASSWORD):
            e = _ascii_end(text, s, e)
            e = s + len(text[s:e].rstrip(_PROSE_TRAIL))
            if _HASH_NAME_RE.search(text, max(0, s - 20), s):
                return None
        if kind == _PASSWORD and (end := _phrase_end(text, s)) is not None:
            return s, end
    value = text[s:e]
    if kind == _STRICT:
        keep = not _is_placeholder(value, in_url=True)
    elif kind in (_KEYWORD, _PASSWORD):
        keep = not _is_placeholder(value) or (kind == _PASSWORD and _pin(text, s, value))
    elif kind == _RANDOM:
        keep = _secret_looking(value) and not _is_placeholder(value)
    elif kind == _BARE_PASSWORD:
        keep = _random_password(value)
    elif kind == _CODE:
        keep = _code(value)
    elif quoted:
        keep = _password_looking(value) or _quoted_passphrase(value)
    else:  # "the wifi password is 58231", "비밀번호는 5823입니다": digits after the verb are a PIN
        keep = _password_looking(value) or (value.isdigit() and _code(value) and not _YEAR_RE.fullmatch(value))
    return (s, e) if keep and e > s else None


# --- Tables: a column whose header is a credential word -----------------------------------------

# the words of the keyword rules (hybrid/data/secret_rules.yml) as a header or key says them
_PASSWORD_HEADER = (r"password|passwd|pass|pwd|pw|passphrase|passcode|passwort|kennwort|mot[ _-]de[ _-]passe|mdp"
                    r"|contraseña|contrasena|contrasenya|senha|palavra[ _-]passe|wachtwoord|hasło|haslo|heslo"
                    r"|salasana|passord|kodeord|adgangskode|lösenord|losenord|şifre|sifre|jelszó|lozinka|parola|parolă"
                    r"|kata[ _-]sandi|sandi|mật[ _-]khẩu|mat[ _-]khau|пароль|κωδικός|συνθηματικό|密码|密碼|口令"
                    r"|パスワード|暗証番号|비밀번호|암호|סיסמה|סיסמא|كلمة[ _-]المرور|كلمة[ _-]السر|पासवर्ड"
                    r"|(?:seed|recovery|mnemonic|backup)[ _-]?(?:phrase|words)|mnemonic")
_TOKEN_HEADER = (r"secret|client[ _-]?secret|token|api[ _-]?key|access[ _-]?key|secret[ _-]?key|private[ _-]?key"
                 r"|auth[ _-]?token|access[ _-]?token|account[ _-]?key|jeton|токен|ключ[ _-]api|api[ _-]?ключ"
                 r"|api[ _-]?schl(?:ü|ue)ssel|cl(?:é|e)[ _-](?:d'|de[ _-])?api|clave[ _-](?:de[ _-])?api"
                 r"|chave[ _-](?:de[ _-])?api|chiave[ _-](?:di[ _-])?api|klucz[ _-]api|kunci[ _-]api|טוקן|토큰"
                 r"|api[ _-]?(?:密钥|金鑰|キー|키)|密钥|秘钥|令牌|トークン|टोकन")
_HEADER_RE = re.compile(rf"(?i)(?:[\w-]+[ _-]){{0,2}}(?:(?P<pw>{_PASSWORD_HEADER})|(?P<tok>{_TOKEN_HEADER}))s?")
# every repetition starts at a pipe, so a long run of dashes cannot be split in many ways
_SEPARATOR_ROW_RE = re.compile(r"[ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*")
_PIPE_RE = re.compile(r"(?<!\\)\|")
_CELL_MARKUP = "`*_~ \t"


def _cells(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The character spans of the cells of the table row ``text[start:end]``, without their
    surrounding spaces and pipes."""
    cuts = [start - 1] + [m.start() for m in _PIPE_RE.finditer(text, start, end)] + [end]
    cells = []
    for a, b in zip(cuts, cuts[1:]):
        a += 1
        while a < b and text[a] in " \t":
            a += 1
        while b > a and text[b - 1] in " \t":
            b -= 1
        cells.append((a, b))
    if cells and cells[0][0] == cells[0][1]:   # a leading pipe
        cells = cells[1:]
    if cells and cells[-1][0] == cells[-1][1]:  # a trailing pipe
        cells = cells[:-1]
    return cells


def table_spans(text: str, pos: int) -> list[tuple[int, int]]:
    """The cells to redact in the Markdown table whose header row holds ``pos``: in a column
    headed by a password word each cell that is not a placeholder; in a column headed by a
    secret or token word each random-looking cell."""
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", start)
    if end < 0:
        return []
    columns = {}
    for i, (a, b) in enumerate(_cells(text, start, end)):
        kind = column_kind(text[a:b]) if b - a <= 60 else None
        if kind is not None:
            columns[i] = kind
    sep_end = text.find("\n", end + 1)
    sep_end = len(text) if sep_end < 0 else sep_end
    if not columns or not _SEPARATOR_ROW_RE.fullmatch(text, end + 1, sep_end):
        return []
    out = []
    row = sep_end + 1
    while row < len(text):
        row_end = text.find("\n", row)
        row_end = len(text) if row_end < 0 else row_end
        if "|" not in text[row:row_end]:
            break
        for i, (a, b) in enumerate(_cells(text, row, row_end)):
            if i in columns:
                while a < b and text[a] in _CELL_MARKUP:
                    a += 1
                while b > a and text[b - 1] in _CELL_MARKUP:
                    b -= 1
                if cell_is_secret(text[a:b], columns[i]):
                    out.append((a, b))
        row = row_end + 1
    return out


def column_kind(name: str) -> str | None:
    """How the values under ``name`` are judged when ``name`` heads them (a table column, a
    frontmatter property): ``strict`` for a password word (``wifi_password``, ``Passwort``,
    ``db_pass``), ``random`` for a secret or token word (``api_key``), None for anything else
    (``password_hint``, ``compass``)."""
    name = name.strip(_CELL_MARKUP)
    m = _HEADER_RE.fullmatch(name) if len(name) <= 60 else None
    if m is None:
        return None
    return _STRICT if m["pw"] else _RANDOM


def cell_is_secret(value: str, kind: str) -> bool:
    """Whether ``value``, under a name of :func:`column_kind` ``kind``, is a secret: under a
    password word any value but a stand-in (``1234`` and ``sunshine`` are passwords there,
    ``changeme`` and "see the vault" are not); under a secret or token word a random-looking one."""
    if kind == _STRICT:
        return (value.isdigit() and len(value) >= 4) or not _is_placeholder(value, in_url=True)
    return _secret_looking(value) and not _is_placeholder(value)
