"""hybrid.store.agent.redact on the multilingual labelled set (tests/data/secrets_multilingual.jsonl,
issue #47): recall with its misses pinned, no hard negative touched, and the classes the set was
built for one by one: provider token shapes the catalogue lacks, a password after its keyword
without a colon in many languages, program messages about passwords, frontmatter `key: value`
lines in many languages, PINs. Tokens with a Cyrillic or Greek letter: test_redact_normalise.py.
The figures by class and language: eval/bench/redact_recall.py."""
from collections import Counter

import pytest
from secrets_fixtures import covered, fake_value, leaked, multilingual_set

from hybrid.store.agent.redact import REDACTED, Redactor

POSITIVES, NEGATIVES = multilingual_set()
RECALL_FLOOR = 0.99
# Samples missed on purpose, by class (the redactor's docstring lists the class): a password of
# capitalised words and a number right after its keyword, with no colon or verb, reads like a
# product name (see test_a_name_with_a_number_right_after_the_keyword_is_not_taken).
EXPECTED_MISSES = {"de-prose-bare-2"}


def test_the_set_is_what_the_issue_asks_for():
    """150+ credentials in 15+ languages over the classes of the issue, ids unique, each slot filled."""
    assert len(POSITIVES) >= 150
    langs = Counter(c["lang"] for c in POSITIVES)
    assert len(set(langs) - {"code"}) >= 15 and all(n >= 6 for n in langs.values())
    classes = {c["class"] for c in POSITIVES}
    assert {"keyword-colon", "prose-connector", "prose-bare", "frontmatter", "token-prose", "token-punct",
            "token-bare", "token-wrapped", "connection-string", "env", "json", "cli", "homoglyph"} <= classes
    ids = [c["id"] for c in POSITIVES + NEGATIVES]
    assert len(ids) == len(set(ids))
    assert all("{secret}" not in c["line"] and c["secret"] in c["line"] for c in POSITIVES)
    assert len(NEGATIVES) >= 40 and len({n["lang"] for n in NEGATIVES}) >= 15


@pytest.fixture(scope="module")
def rd(kingfisher_cache):
    r = Redactor(kingfisher_cache)
    r.warm()
    return r


def test_recall_on_the_set(rd):
    """Every labelled secret covered by a span and no piece of it left, but the expected misses."""
    missed = {c["id"] for c in POSITIVES
              if not all(covered(c["line"], s, rd.spans(c["line"])) and not leaked(s, rd.redact(c["line"]))
                         for s in c["secrets"])}
    assert missed == EXPECTED_MISSES
    assert 1 - len(missed) / len(POSITIVES) >= RECALL_FLOOR


@pytest.mark.parametrize("case", NEGATIVES, ids=[n["id"] for n in NEGATIVES])
def test_hard_negatives_of_the_set_stay(rd, case):
    assert rd.spans(case["line"]) == []


# Provider token shapes the built-in catalogue lacks: Notion's `secret_` tokens (it knows `ntn_`),
# Doppler's tokens other than personal ones (`dp.pt.`), Stripe webhook secrets and test-mode keys.
TOKEN_KINDS = ["notion-secret", "doppler-st", "doppler-st-env", "doppler-ct", "doppler-sa", "whsec", "whsec-hex",
               "stripe-test"]
CONTEXTS = ["{}", "The key {} is for staging.", "`{}`", '"{}"', "({}).", "{},", "key={}", "**{}**"]


@pytest.mark.parametrize("kind", TOKEN_KINDS)
def test_provider_token_shapes_wherever_they_stand(rd, kind):
    for seed, context in enumerate(CONTEXTS):
        token = fake_value(kind, seed)
        text = context.format(token)
        assert rd.redact(text) == context.format(REDACTED), (kind, text)


@pytest.mark.parametrize("text", [
    "secret_key_base_for_the_production_environment_of_the_app",  # an identifier, not a token
    "whsec_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",                  # a placeholder
    "dp.st.dev.xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "Set NOTION_TOKEN to the secret_... value from the integration page.",
])
def test_token_shapes_are_not_their_placeholders(rd, text):
    assert rd.spans(text) == []


# A password right after its keyword, with no colon: with a verb ("lautet", "είναι", "là") a
# password-looking value goes; with no verb either, only a random-looking one (a letter and a
# digit or symbol, mixed, not a word or a name with a number).
BARE = [
    "database password {}", "Use password {} for the staging VPN.", "WLAN Passwort {}",
    "Das Passwort lautet {}", "Lösenordet till wifi är {}.", "Hasło brzmi {}", "Hasło do wifi to {}.",
    "Wifi şifresi {}", "Modem şifresi {}'dir.", "Sunucunun parolası {}", "şifre {}", "Salasana on {}",
    "Ο κωδικός του wifi είναι {}.", "κωδικός {} για τον router", "הסיסמה לוויפי היא {}", "סיסמה {} לראוטר",
    "كلمة المرور للواي فاي هي {}", "كلمة السر {}", "वाईफाई का पासवर्ड {} है।", "राउटर का पासवर्ड है {}",
    "Mật khẩu wifi là {}.", "mật khẩu {} cho tài khoản admin", "Kata sandi wifi adalah {}.", "Passwordnya {}",
    "Пароль от роутера {}", "пароль {}", "Пароль до пошти це {}", "mot de passe {} pour le compte admin",
    "contraseña {} para el router", "senha {} do servidor", "wachtwoord {} voor de testomgeving",
    "路由器密码 {}", "ルーターのパスワード {}", "Wi-Fiのパスワードは{}です。", "공유기 비밀번호 {}",
    "와이파이 비밀번호는 {}입니다.",
]


@pytest.mark.parametrize("template", BARE)
def test_password_without_a_colon(rd, template):
    for seed in range(3):
        value = fake_value("pw", seed) if seed < 2 else fake_value("pw-symbol", seed)
        assert rd.redact(template.format(value)) == template.format(REDACTED), template.format(value)


@pytest.mark.parametrize("text", [
    "Reset your password in Settings.", "Das Passwort muss 8 Zeichen haben.",
    "password hashing moved to argon2id in release 4.2.0",
    "Fixed the password reset bug in commit 9fceb02d0ae598e95dc970b74767f19372d61af8.",
    "パスワードは8文字以上にしてください。", "Changed the password on my OnePlus12 yesterday.",
    "The password is hashed with AES-256-GCM before upload.", "password manager 1Password 8 on macOS14",
    "Passwort für iPhone15 zurücksetzen", "The password field of Qwen2.5-7B's demo is empty.",
    "Пароль от роутера TP-Link Archer AX55 сброшен.", "The password for k8s-prod-01 is in the vault.",
    "password collation utf8mb4_general_ci", "Şifre sıfırlama bağlantısı 24 saat geçerlidir.",
    "Le mot de passe expire après 90 jours.", "كلمة المرور قوية", "密码长度至少8位。",
    "The password is stored in 1Password.", "wifi password WPA2-PSK only",
])
def test_ordinary_sentences_about_passwords_stay(rd, text):
    assert rd.spans(text) == []


def test_a_name_with_a_number_right_after_the_keyword_is_not_taken(rd):
    """Without a colon or a verb, a value of words and a number (CopperFalcon42) reads like a
    product name (OnePlus12): a known miss, where 'the password is CopperFalcon42' is caught."""
    assert rd.spans("WLAN Passwort CopperFalcon42") == []
    assert rd.redact("Das WLAN-Passwort ist CopperFalcon42.") == f"Das WLAN-Passwort ist {REDACTED}."


# Program messages in many languages (the shapes of the gettext catalogs eval/bench/redact_recall.py
# scans with --catalogs): a printf conversion, a line break escaped as %0A, a sentence in a script
# written without spaces, a status line that names the password again, an assembler's mnemonic.
@pytest.mark.parametrize("text", [
    "Número de días máximo entre cambio de contraseña\t\t: %ld",
    "ungültiges Prozent-kodiertes Token: »%s«",
    "szintaktikai hiba a feltételben: váratlan token: „%s”",
    "%1$s：無法使用「%3$s」鹽 (salt) 加密密碼：%2$s",
    "Bitte geben Sie das Passwort ein,%0Aum Ihren Schlüssel zu schützen.",
    "Please enter the passphrase to%0Aprotect your new key",
    "Warnung: Ihr Passwort wird in %d Stunden%s am %s ablaufen.",
    "您并没有输入一个密码 - 这通常不是一个好主意！%0A请确认您不想给您的密钥加上任何的保护。",
    "-W, --password           パスワードプロンプトを強制表示します",
    "passwd: パスワードは正しく更新されました",
    "passwd: senha atualizada com sucesso", "passwd: passordet ble oppdatert",
    "passwd: contrasenya sense canvis", "passwd: kata sandi diperbaharui dengan sukses",
    "पासवर्ड: पासवर्ड सफलतापूर्वक अद्यावधिक भयो",
    "menduga mnemonic: tidak diperoleh apapun",
    "Liian pitkä käyttäjänimi tai salasana SOCKSv5-yhteyskäytäntöön.",
])
def test_program_messages_about_passwords_stay(rd, text):
    assert rd.spans(text) == []


def test_a_seed_phrase_is_twelve_to_twenty_four_words(rd):
    words = "quartz violin lantern meadow copper falcon pebble walrus tundra marble orchid saddle"
    assert rd.redact(f"Wallet seed phrase: {words}") == f"Wallet seed phrase: {REDACTED}"
    # fewer words are judged as any passphrase: a sentence is not one
    assert rd.redact("seed phrase: stored with the lawyer") == "seed phrase: stored with the lawyer"


# Frontmatter and YAML lines `key: value` with a credential key in the languages of the set: the
# agent view's property filter asks the redactor about `f"{key}: {value}"`.
PASSWORD_KEYS = ["wifi_password", "db_pass", "пароль", "Passwort", "mot_de_passe", "mot de passe", "contraseña",
                 "senha", "palavra-passe", "wachtwoord", "lösenord", "hasło", "heslo",
                 "salasana", "şifre", "parola", "κωδικός", "סיסמה", "كلمة_المرور", "पासवर्ड", "mat_khau", "mật khẩu",
                 "kata_sandi", "密码", "パスワード", "비밀번호", "mdp", "adgangskode", "jelszó"]
TOKEN_KEYS = ["api_key", "notion_token", "API-Schlüssel", "clé API", "clave_api", "chave de API", "chiave API",
              "API-sleutel", "API-nyckel", "klucz API", "токен", "API-ключ", "API anahtarı", "κλειδί API",
              "מפתח API", "مفتاح API", "API कुंजी", "khóa API", "kunci API", "API密钥", "令牌", "APIキー",
              "トークン", "API 키", "토큰", "jeton"]


@pytest.mark.parametrize("key", PASSWORD_KEYS)
def test_frontmatter_password_keys(rd, key):
    for seed, kind in enumerate(("pw", "pw-symbol", "pw-words")):
        value = fake_value(kind, seed)
        assert rd.redact(f"{key}: {value}") == f"{key}: {REDACTED}", (key, value)
        assert rd.redact(f"---\ntitle: x\n{key}: {value}\n---") == f"---\ntitle: x\n{key}: {REDACTED}\n---"


@pytest.mark.parametrize("key", TOKEN_KEYS)
def test_frontmatter_token_keys(rd, key):
    for seed, kind in enumerate(("hex-40", "b62-32")):
        value = fake_value(kind, seed)
        assert rd.redact(f"{key}: {value}") == f"{key}: {REDACTED}", (key, value)


@pytest.mark.parametrize("key", ["password_del_router", "passwort_fritzbox", "пароль_wifi", "wifi_password_guest"])
def test_a_key_that_starts_with_the_password_word_needs_a_random_value(rd, key):
    """`password_wifi: x` names a password too, but `password_min_length: 12` or
    `password_reset_url: https://…` name things about one: only a random-looking value goes."""
    value = fake_value("pw", 1)
    assert rd.redact(f"{key}: {value}") == f"{key}: {REDACTED}"
    for line in (f"{key}: 12", f"{key}: https://example.org/reset", f"{key}: strict", f"{key}: CopperFalcon42"):
        assert rd.spans(line) == [], line


@pytest.mark.parametrize(("line", "redacted"), [
    ("passcode: 12345678", True), ("pin: 4711", True), ("PIN-Code: 4711", True), ("Passwort: 20191", True),
    ('pin: "4711"', True), ("pin: true", False), ("pin: 3", False), ("pin: 0000", False),
    ("pass: 1024", False),            # `pass` is also a test count
    ("password_min_length: 12", False), ("pinned: 2024", False), ("spin: 4711", False),
])
def test_digits_after_a_pin_or_password_key(rd, line, redacted):
    value = line.split(": ")[1].strip('"')
    assert rd.redact(line) == (line.replace(value, REDACTED) if redacted else line)


@pytest.mark.parametrize("line", [
    "токен: см. в хранилище", "API-Schlüssel: siehe Tresor", "clé API : voir le coffre", "密钥：请在保险库中查找。",
    "トークン：管理者に聞いてください", "mot_de_passe: ${MDP}", "kata_sandi: <isi sendiri>", "API-ключ: ********",
    "PIN = ‘\x1b[1m%s\x1b[0m’     Admin PIN = ‘\x1b[1m%s\x1b[0m’",    # GnuPG's message: printf, colours
    "--flag=PAROLA:ARG:FLAG  flag aggiuntiva per le stringhe",         # a command's metavariables
])
def test_localised_keys_with_placeholders_stay(rd, line):
    assert rd.spans(line) == []


def test_a_url_password_with_escapes_is_not_taken_for_a_format(rd):
    """%20s in a URL's password is an escaped space and an s, not printf's %20s."""
    url = "https://jo%40example.com:Zq7v%20secret9@files.example.org/x"
    assert rd.redact(url) == url.replace("Zq7v%20secret9", REDACTED)


# The third re-test of issue #47: a quoted passphrase after "is" (medium), a PIN or a door's code
# in a sentence, a look-alike letter from the IPA block or a combining accent in a token (low).
@pytest.mark.parametrize("text, secret", [
    ('the passphrase is "purple monkey dishwasher seven"', "purple monkey dishwasher seven"),
    ('The wifi passphrase is "correct horse battery staple".', "correct horse battery staple"),
    ("Das Passwort lautet „Sonne Mond und Sterne“.", "Sonne Mond und Sterne"),
    ("the password is “blue lagoon at midnight”", "blue lagoon at midnight"),
    ("my PIN is 4821", "4821"),
    ("el PIN de la tarjeta es 4821", "4821"),
    ("Die PIN lautet 4821.", "4821"),
    ("the alarm code is 7391", "7391"),
    ("gate code: 7391", "7391"),
    ("the safe combination is 12-34-56", "12-34-56"),
    ("Türcode ist 2580", "2580"),
    # the fourth re-test's sentences: typographic single quotes and CJK brackets, codes in more
    # languages, a PIN code with no verb (Russian leaves "is" out)
    ("The wifi passphrase is ‘purple monkey dishwasher seven’ for guests.", "purple monkey dishwasher seven"),
    ("パスワードは「紫の猿の食洗機」です。", "紫の猿の食洗機"),
    ("Мой пин-код 4821 от домофона.", "4821"),
    ("Le code de la porte est 4821.", "4821"),
    ("Il codice della cassaforte è 12-34-56.", "12-34-56"),
    ("el código de la puerta es 4821", "4821"),
    ("o código do portão é 4821", "4821"),
    ("kod do drzwi to 4821", "4821"),
    ("код от домофона: 4821", "4821"),
    ("Kapı şifresi 4821.", "4821"),
    ("門のコードは4821", "4821"),
    ("PIN-Code 4821 für die Karte", "4821"),
    # the fifth re-test's
    ("ПИН-код: 4821", "4821"), ("пин: 7390", "7390"), ("PIN-код: 4821", "4821"),
    ("Das WLAN-Passwort ist »Sonnenblume Garten Regen«.", "Sonnenblume Garten Regen"),
    ("Lösenordet är ”solros trädgård regn”.", "solros trädgård regn"),
    ("Hasło brzmi „słonecznik ogród deszcz”.", "słonecznik ogród deszcz"),
    ("password: »purple monkey dishwasher«", "purple monkey dishwasher"),
    ("Das Passwort ist ›Sonne Mond Sterne‹", "Sonne Mond Sterne"),
    ("현관 비밀번호는 5823입니다.", "5823"),
    ("the wifi password is 58231", "58231"),
    ("De deurcode is 4821.", "4821"), ("Dörrkoden är 4821.", "4821"), ("Ovikoodi on 4821.", "4821"),
    ("Ο κωδικός της πόρτας είναι 4821.", "4821"), ("קוד הדלת הוא 4821.", "4821"), ("Mã cửa là 4821.", "4821"),
    ("Safe: 12-34-56", "12-34-56"), ("Alarm: 4821", "4821"), ("Combo for the bike lock is 1234.", "1234"),
])
def test_quoted_passphrases_and_codes_in_sentences(rd, text, secret):
    out = rd.redact(text)
    assert secret not in out and REDACTED in out, out


@pytest.mark.parametrize("text", [
    'The password field is labelled "Password" in the form.',
    'the password is "see the vault"',
    "The PIN count is 40 on this header.", "pin 13 of the header is 5V",
    "the alarm code is in the binder", "The door code changed on 2024-05-01.",
    "PIN entry is disabled since 2019.", "the combination is 2 parts flour to 1 water",
    "connect PIN 4 to ground", "the error code is 4040 on the dashboard", "Le code postal est 75001",
    "PIN-Code 2024-05-01 eingeführt", "the passphrase is ‘see the vault’",
    "The password policy is 2024 compliant", "the password was 2019 vintage", "safe to say the price is 1500",
    "Alarm: 07:30", "Пинг: 4821 мс",
])
def test_sentences_about_codes_stay(rd, text):
    assert rd.spans(text) == [], text


@pytest.mark.parametrize("lookalike", ["\u0261", "g\u0301", "g\u0300", "g\u0323\u0301"])
def test_a_token_with_an_ipa_letter_or_a_combining_accent(rd, lookalike):
    token = fake_value("ghp", 3)
    assert token.startswith("ghp_")
    text = f"token {lookalike}{token[1:]} for CI"
    out = rd.redact(text)
    assert token[4:] not in out, out
