"""Fake credentials and hard negatives for the redaction tests (tests/unit/store/test_redact*.py)
and eval/bench/redact_recall.py, and how a redaction is scored (:func:`covered`, :func:`leaked`).

Every secret is generated at run time from a seed, so no file in the repository holds a literal
token that a push-protection scanner would flag (ported from eval/scout/secrets_probe.py). The
private keys are random base64 in PEM armour, not real keys: kingfisher matches the armour and
the body's shape, and the tests stay free of openssl and ssh-keygen.

The labelled corpus is :func:`fake_secrets` (positives: each case names the exact substrings that
must disappear) plus :data:`HARD_NEGATIVES` and :data:`ORDINARY_NOTES` (text that must come back
unchanged). :func:`multilingual_set` reads the second labelled set, tests/data/secrets_multilingual.jsonl
(credentials in prose of 21 languages, config lines, commands, homoglyphs), and fills in its values.
"""

from __future__ import annotations

import base64
import binascii
import json
import random
import re
import string

B62 = string.ascii_letters + string.digits
B64 = B62 + "+/"
HEX = "0123456789abcdef"


def _b62_encode(n: int, width: int) -> str:
    digits = string.digits + string.ascii_uppercase + string.ascii_lowercase
    out = ""
    while n:
        n, d = divmod(n, 62)
        out = digits[d] + out
    return out.rjust(width, "0")


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


# A secret is leaked if any piece of it between whitespace or invisible characters survives
# (a passphrase with only its first word redacted, a token split by a newline half-redacted).
_SEPARATORS = re.compile(r"[\s\u00ad\u200b-\u200f\u2060\ufeff]+")
_MIN_PIECE = 6


def leaked(secret: str, out: str) -> bool:
    """Whether ``secret``, or a piece of it of six characters or more, is still in ``out``."""
    return secret in out or any(len(p) >= _MIN_PIECE and p in out for p in _SEPARATORS.split(secret))


def covered(text: str, secret: str, spans: list[tuple[int, int]]) -> bool:
    """Whether every visible character of the first occurrence of ``secret`` is in a span."""
    start = text.index(secret)
    return all(any(s <= i < e for s, e in spans) for i in range(start, start + len(secret))
               if not _SEPARATORS.fullmatch(text[i]))


def pem_block(label: str, n_bytes: int, rnd: random.Random) -> str:
    """A PEM-armoured block of random bytes: ``-----BEGIN {label}-----``, 64-character base64
    lines, ``-----END {label}-----`` (48 bytes make one line)."""
    body = base64.b64encode(rnd.randbytes(n_bytes)).decode()
    lines = "\n".join(body[i:i + 64] for i in range(0, len(body), 64))
    return f"-----BEGIN {label}-----\n{lines}\n-----END {label}-----"


def fake_secrets(seed: int = 12) -> list[dict]:
    """One dict per case: ``name``, ``line`` (markdown text holding the secret, sometimes several
    lines), ``secrets`` (the substrings of ``line`` that must not survive redaction; a secret cut by
    a newline or a zero-width character is one substring holding it) and ``secret`` (the first)."""
    rnd = random.Random(seed)

    def rs(alphabet: str, n: int) -> str:
        return "".join(rnd.choice(alphabet) for _ in range(n))

    cases: list[dict] = []

    def add(name: str, line: str, *secrets: str) -> None:
        assert secrets and all(s and s in line for s in secrets), name
        assert name not in {c["name"] for c in cases}, name
        cases.append({"name": name, "line": line, "secret": secrets[0], "secrets": secrets})

    akid = "AKIA" + rs(string.ascii_uppercase + "234567", 16)
    add("aws-access-key-id", f"The CI user is `{akid}`; rotate it yearly.", akid)
    aws_sk = rs(B64, 40)
    add("aws-secret-key", f"```ini\n[default]\naws_access_key_id = {akid}\naws_secret_access_key = {aws_sk}\n```",
        aws_sk, akid)
    body = rs(B62, 30)
    gh = "ghp_" + body + _b62_encode(binascii.crc32(body.encode()), 6)
    add("github-pat", f"GITHUB_TOKEN={gh}", gh)
    ghf = "github_pat_" + rs(B62, 22) + "_" + rs(B62, 59)
    add("github-pat-fine-grained", f"- fine-grained PAT: {ghf}", ghf)
    xoxb = f"xoxb-{rs(string.digits, 12)}-{rs(string.digits, 13)}-{rs(B62, 24)}"
    add("slack-bot-token", f"Slack bot for #alerts uses `{xoxb}` (scopes: chat:write).", xoxb)
    hook = (f"https://hooks.slack.com/services/T{rs(string.ascii_uppercase + string.digits, 8)}"
            f"/B{rs(string.ascii_uppercase + string.digits, 10)}/{rs(B62, 24)}")
    add("slack-webhook", f"Post alerts to {hook} from the cron job.", hook)
    stripe = "sk_live_" + rs(B62, 24)
    add("stripe-live", f"> [!warning]\n> Prod Stripe key {stripe} - do not share", stripe)
    oai = "sk-" + rs(B62, 20) + "T3BlbkFJ" + rs(B62, 20)
    add("openai-legacy", f"OPENAI_API_KEY={oai}", oai)
    oaip = "sk-proj-" + rs(B62 + "-_", 74) + "T3BlbkFJ" + rs(B62 + "-_", 74)
    add("openai-project", f"My OpenAI key: {oaip}", oaip)
    ant = "sk-ant-api03-" + rs(B62 + "-_", 93) + "AA"
    add("anthropic", f"Anthropic console key {ant} (team plan)", ant)
    header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    payload = _b64url(json.dumps({"sub": "1234567890", "name": "Ada", "iat": 1716239022}).encode())
    jwt = f"{header}.{payload}.{_b64url(rnd.randbytes(32))}"
    add("jwt", f"Debugging auth: the bearer was {jwt} and it expired.", jwt)
    rsa = pem_block("RSA PRIVATE KEY", 28 * 48, rnd)  # 30 lines with the armour
    add("pem-rsa-private-key", f"Server key:\n\n```\n{rsa}\n```", rsa)
    ec = pem_block("EC PRIVATE KEY", 121, rnd)
    add("pem-ec-private-key", f"## TLS\n\n{ec}\n\nThat's it.", ec)
    ssh = pem_block("OPENSSH PRIVATE KEY", 400, rnd)
    add("openssh-private-key", f"Deploy key for the box:\n\n{ssh}\n", ssh)
    pgpw = rs(B62, 14)
    add("postgres-url", f"DB is at postgres://app_user:{pgpw}@db.internal.example.com:5432/notes", pgpw)
    mpw = rs(B62, 16)
    add("mongodb-url", f"`mongodb+srv://admin:{mpw}@cluster0.ab1cd.mongodb.net/test`", mpw)
    hpw = "hunter" + rs(string.digits, 2)
    word = "".join(rnd.choice(string.ascii_lowercase) for _ in range(7))
    add("url-plain-word-password", f"redis://default:{word}@cache.internal:6379", word)
    add("https-url-password", f"Mirror: https://alice:{hpw}@files.example.org/backup/ (temporary)", hpw)
    add("frontmatter-password", "---\ntitle: Router\nuser: admin\npassword: hunter2x\ntags: [home]\n---\n",
        "hunter2x")
    dv = rs(B62, 12)
    add("dataview-field-password", f"- wifi:: guest\n- password:: {dv}", dv)
    bold = rs(B62, 10)
    add("bold-label-password", f"**Password:** `{bold}`", bold)
    hi = base64.b64encode(rnd.randbytes(30)).decode()
    add("api-key-assignment", f'    api_key = "{hi}"', hi)
    hx = rs(HEX, 40)
    add("client-secret-hex", f"client_secret: {hx}", hx)
    dj = rs(string.ascii_lowercase + string.digits + "!@#$%^&*(-_=+)", 50)
    add("django-secret-key", f"SECRET_KEY = '{dj}'", dj)
    gkey = "AIza" + rs(B62 + "-_", 35)
    add("google-api-key", f"Maps embed uses key={gkey} on the site.", gkey)
    azkey = base64.b64encode(rnd.randbytes(64)).decode()
    add("azure-storage-account-key",
        f"DefaultEndpointsProtocol=https;AccountName=notesbackup;AccountKey={azkey};EndpointSuffix=core.windows.net",
        azkey)
    npm = "npm_" + rs(B62, 36)
    add("npm-token", f"//registry.npmjs.org/:_authToken={npm}", npm)
    hf = "hf_" + rs(string.ascii_letters, 34)
    add("huggingface", f"HF token: {hf}", hf)
    sg = "SG." + rs(B62 + "-_", 22) + "." + rs(B62 + "-_", 43)
    add("sendgrid", f"SENDGRID_API_KEY = '{sg}'", sg)
    glpat = "glpat-" + rs(B62 + "-_", 20)
    add("gitlab-pat", f"GitLab runner token {glpat}", glpat)
    tg = f"{rs(string.digits, 10)}:AA{rs(B62 + '-_', 33)}"
    add("telegram-bot-token", f"Bot {tg} posts the daily digest", tg)
    basic = base64.b64encode(b"svc_backup:" + rs(B62, 12).encode()).decode()
    add("http-basic-auth", f"curl -H 'Authorization: Basic {basic}' https://api.example.com", basic)
    # a random key next to a credential word in prose (project rule custom.keyword-prose)
    loose = rs(B62, 20) + rs(string.digits, 2)
    add("prose-api-key", f"The api key is {loose}, ask me before using it.", loose)
    loose2 = rs(string.digits, 1) + rs(B62, 23)
    add("prose-access-key", f"My access key for the staging bucket is {loose2}.", loose2)
    # a password in prose, with no token shape (every detector measured in
    # eval/reports/security/secrets-detectors.md missed it; the project rule custom.password-prose finds it)
    prose = rs(string.ascii_letters, 7) + "&" + rs(string.digits, 2)
    add("prose-password", f"The wifi password is {prose} for guests.", prose)
    _more_secrets(rs, rnd, add)
    return cases


def _pw(rs) -> str:
    """A password as people pick them: letters, digits and a symbol, 10 to 14 characters."""
    return rs(string.ascii_letters, 6) + rs(string.digits, 2) + rs("!#%*+?@", 1) + rs(B62, 3)


# Words for fake passphrases: none of them occurs in the context sentences around a secret.
_PASSPHRASE_WORDS = ("quartz", "violin", "lantern", "meadow", "copper", "falcon", "pebble", "walrus",
                     "tundra", "marble", "orchid", "saddle", "nebula", "juniper", "harbor", "velvet")


def _more_secrets(rs, rnd: random.Random, add) -> None:
    """The second half of the corpus: the formats an adversarial review found missing (key=value in
    many syntaxes and languages, passphrases, tables, command lines, text that needs normalising)
    and more provider tokens."""
    # -- key = value, in the syntaxes notes and config files use
    p = _pw(rs)
    add("env-db-password", f"```sh\nDB_HOST=db.internal\nDB_PASSWORD={p}\n```", p)
    p = rs(B62, 16)
    add("env-pgpassword", f"Restore with `PGPASSWORD={p} pg_restore -h db -U app dump.sql`", p)
    p = _pw(rs)
    add("json-password", f'{{"user": "svc_backup", "password": "{p}", "port": 5432}}', p)
    p = _pw(rs)
    add("yaml-pass", f"router:\n  user: admin\n  pass: {p}\n", p)
    p = _pw(rs)
    add("pw-shorthand", f"NAS login - user: alice, pw: {p}", p)
    p = _pw(rs)
    add("camelcase-password", f"const config = {{ host: 'db', dbPassword: '{p}' }};", p)
    p = rs(B62, 32)
    add("camelcase-bot-token", f'botToken: "{p}"', p)
    p = _pw(rs)
    add("xml-password", f"<datasource>\n  <username>app</username>\n  <password>{p}</password>\n</datasource>", p)
    p = _pw(rs)
    add("spring-properties", f"spring.datasource.password={p}", p)
    p = _pw(rs)
    add("odbc-connection-string", f"Server=tcp:sql01,1433;Database=crm;User Id=sa;Password={p};Encrypt=true", p)
    p = _pw(rs)
    add("libpq-keyword-string", f"psql 'host=db.internal user=app password={p} dbname=notes'", p)
    p = _pw(rs)
    add("qualified-keyword", f"Password for the router admin page: {p}", p)
    p = rs(B62, 20)
    add("psk-wpa-supplicant", f'network={{\n    ssid="HomeNet"\n    psk="{p}"\n}}', p)
    p = rs(B62, 12)
    add("wifi-qr-string", f"WIFI:T:WPA;S:HomeNet;P:{p};;", p)
    p = _pw(rs)
    add("netrc", f"machine api.example.com\n  login alice\n  password {p}\n", p)
    p = _pw(rs)
    add("pgpass-line", f"~/.pgpass:\n\n    db.internal:5432:notes:app:{p}\n", p)
    # -- passphrases: the whole quoted or multi-word value, not its first word
    words = " ".join(rnd.sample(_PASSPHRASE_WORDS, 4))
    add("quoted-passphrase", f'passphrase = "{words}"', words)
    words = " ".join(rnd.sample(_PASSPHRASE_WORDS, 4))
    add("unquoted-passphrase", f"GPG key backup\npassphrase: {words}\n", words)
    words = " ".join(rnd.sample(_PASSPHRASE_WORDS, 3)) + " " + rs(string.digits, 2)
    add("password-with-spaces", f"PASSWORD='{words}'", words)
    words = " ".join(rnd.choice(_PASSPHRASE_WORDS) for _ in range(12))
    add("seed-phrase", f"Wallet seed phrase: {words}", words)
    # -- a table whose column header is a credential word
    p1, p2 = _pw(rs), _pw(rs)
    add("table-password-column",
        f"| Service | User | Password |\n|---|---|---|\n| Router | admin | {p1} |\n| NAS | alice | `{p2}` |\n",
        p1, p2)
    t1 = rs(B62, 24)
    add("table-token-column", f"| Bot | Token |\n| :-- | :-- |\n| alerts | {t1} |\n", t1)
    # -- command lines
    p = _pw(rs)
    add("sshpass", f"sshpass -p '{p}' ssh pi@10.0.0.7", p)
    p = rs(B62, 14)
    add("sshpass-bare", f"`sshpass -p {p} scp backup.tar nas:/volume1/`", p)
    p = rs(B62, 12)
    add("mysql-p-attached", f"mysql -u root -p{p} -h 127.0.0.1 shop", p)
    p = _pw(rs)
    add("mysql-password-flag", f'mysqldump --user=backup --password="{p}" shop > shop.sql', p)
    p = rs(B62, 14)
    add("curl-user", f"curl -u deploy:{p} https://ci.example.com/api/trigger", p)
    p = rs(B62, 16)
    add("docker-login", f"docker login -u alice -p {p} registry.example.com", p)
    p = rs(B62, 20)
    add("redis-cli-auth", f"redis-cli -h cache.internal -a {p} ping", p)
    p = _pw(rs)
    add("cli-password-flag", f"restic --repo s3:backups --password {p} snapshots", p)
    p = _pw(rs)
    add("powershell-securestring", f'$pw = ConvertTo-SecureString "{p}" -AsPlainText -Force', p)
    # -- HTTP
    basic = base64.b64encode(b"ops:" + rs(B62, 10).encode()).decode()
    add("basic-auth-lowercase", f"GET /metrics HTTP/1.1\nauthorization: basic {basic}\n", basic)
    bearer = rs(B62, 40)
    add("bearer-opaque", f'curl -H "Authorization: Bearer {bearer}" https://api.example.com/v1/me', bearer)
    key = rs(HEX, 32)
    add("x-api-key-header", f"X-API-Key: {key}", key)
    sig = rs(B62, 43) + "%3D"
    add("azure-sas-url",
        f"https://notes.blob.core.windows.net/backup?sv=2022-11-02&ss=b&sp=rl&se=2025-01-01&sig={sig}", sig)
    sak = base64.b64encode(rnd.randbytes(32)).decode()
    add("azure-servicebus-key",
        f"Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=send;SharedAccessKey={sak}", sak)
    tok = rs(B62 + "-_", 68)
    hook = f"https://discord.com/api/webhooks/{rs(string.digits, 19)}/{tok}"
    add("discord-webhook", f"Alerts go to {hook}", tok)
    tok = rs(B62, 26)
    add("mattermost-webhook", f"curl -X POST https://chat.example.com/hooks/{tok} -d @payload.json", tok)
    # -- private keys
    body_pub = base64.b64encode(rnd.randbytes(51)).decode()
    body_priv = base64.b64encode(rnd.randbytes(36)).decode()
    mac = rs(HEX, 64)
    ppk = (f"PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: eddsa-key-20240501\n"
           f"Public-Lines: 2\n{body_pub[:64]}\n{body_pub[64:]}\nPrivate-Lines: 1\n{body_priv}\n"
           f"Private-MAC: {mac}\n")
    add("putty-key-v3", f"PuTTY key for the jump host:\n\n```\n{ppk}```", body_priv, mac)
    priv = base64.b64encode(rnd.randbytes(14 * 48)).decode()
    lines = "\n".join(priv[i:i + 64] for i in range(0, len(priv), 64))
    mac = rs(HEX, 40)
    ppk = (f"PuTTY-User-Key-File-2: ssh-rsa\nEncryption: none\nComment: rsa-key-20190312\nPublic-Lines: 1\n"
           f"{body_pub[:64]}\nPrivate-Lines: {lines.count(chr(10)) + 1}\n{lines}\nPrivate-MAC: {mac}")
    add("putty-key-v2", ppk, lines, mac)
    pgp = pem_block("PGP PRIVATE KEY BLOCK", 6 * 48, rnd)
    add("pgp-private-key", f"Signing key (old laptop):\n\n{pgp}\n", pgp)
    pk8 = pem_block("PRIVATE KEY", 10 * 48, rnd)
    add("pkcs8-private-key", f"```\n{pk8}\n```", pk8)
    sa_key = pem_block("PRIVATE KEY", 10 * 48, rnd).replace("\n", "\\n") + "\\n"
    sa = (f'{{"type": "service_account", "project_id": "notes-sync-123", "private_key_id": "{rs(HEX, 40)}", '
          f'"private_key": "{sa_key}", "client_email": "sync@notes-sync-123.iam.gserviceaccount.com"}}')
    add("gcp-service-account-json", sa, sa_key)
    age = "AGE-SECRET-KEY-1" + rs("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58)
    public = "age1" + rs("qpzry9x8gf2tvdw0s3jn54khce6mua7l", 58)
    add("age-secret-key", f"# created: 2024-05-01\n# public key: {public}\n{age}", age)
    # -- provider tokens
    body = rs(B62, 30)
    gho = "gho_" + body + _b62_encode(binascii.crc32(body.encode()), 6)
    add("github-oauth", f"gh auth token printed {gho}", gho)
    body = rs(B62, 30)
    ghp = "ghp_" + body + _b62_encode(binascii.crc32(body.encode()), 6)
    add("github-pat-in-remote-url", f"git remote set-url origin https://{ghp}@github.com/alice/notes.git", ghp)
    xoxp = f"xoxp-{rs(string.digits, 12)}-{rs(string.digits, 12)}-{rs(string.digits, 13)}-{rs(HEX, 32)}"
    add("slack-user-token", f"SLACK_USER_TOKEN={xoxp}", xoxp)
    rk = "rk_live_" + rs(B62, 24)
    add("stripe-restricted", f"Restricted key for the reporting job: {rk}", rk)
    wh = "whsec_" + rs(B62, 32)
    add("stripe-webhook-secret", f"STRIPE_WEBHOOK_SECRET={wh}", wh)
    gocspx = "GOCSPX-" + rs(B62 + "-_", 28)
    add("google-oauth-client-secret", f'"client_secret": "{gocspx}",', gocspx)
    gkey = "AIza" + rs(B62 + "-_", 35)
    add("google-api-key-in-parens", f"(Maps key {gkey}), restricted to our domain.", gkey)
    azs = rs(B62, 3) + rs(string.digits, 1) + "Q~" + rs(B62 + "~.-_", 34)
    add("azure-ad-client-secret", f"AZURE_CLIENT_SECRET={azs}", azs)
    hf = "hf_" + rs(string.ascii_letters, 34)
    add("huggingface-in-sentence", f"The HF token ({hf}) has read scope.", hf)
    sk = "SK" + rs(HEX, 32)
    add("twilio-api-key", f"Twilio API key SID {sk}", sk)
    tw = rs(HEX, 32)
    add("twilio-auth-token", f"TWILIO_ACCOUNT_SID=AC{rs(HEX, 32)}\nTWILIO_AUTH_TOKEN={tw}", tw)
    uid = base64.b64encode(str(rnd.randrange(10**17, 10**18)).encode()).decode().rstrip("=")
    dtok = f"{uid}.{rs(B62 + '-_', 6)}.{rs(B62 + '-_', 38)}"
    add("discord-bot-token", f"DISCORD_BOT_TOKEN={dtok}", dtok)
    tg = f"{rs(string.digits, 10)}:AA{rs(B62 + '-_', 33)}"
    add("telegram-in-url", f"https://api.telegram.org/bot{tg}/getUpdates", tg)
    mg = "key-" + rs(HEX, 32)
    add("mailgun-key", f"curl -s --user 'api:{mg}' https://api.mailgun.net/v3/domains", mg)
    do = "dop_v1_" + rs(HEX, 64)
    add("digitalocean-token", f"doctl auth init -t {do}", do)
    shp = "shpat_" + rs(HEX, 32)
    add("shopify-token", f"Shopify admin token: {shp}", shp)
    pypi = "pypi-AgEIcHlwaS5vcmc" + rs(B62 + "-_", 70)
    add("pypi-token", f"[pypi]\n  username = __token__\n  password = {pypi}", pypi)
    dckr = "dckr_pat_" + rs(B62 + "-_", 27)
    add("dockerhub-token", f"Docker Hub PAT {dckr} (read-only)", dckr)
    jwt_h = _b64url(json.dumps({"alg": "RS256", "typ": "JWT", "kid": rs(HEX, 8)}).encode())
    jwt_p = _b64url(json.dumps({"sub": rs(string.digits, 8), "scope": "notes:read", "exp": 1893456000}).encode())
    jwt = f"{jwt_h}.{jwt_p}.{_b64url(rnd.randbytes(64))}"
    add("jwt-bearer-header", f"Authorization: Bearer {jwt}", jwt)
    p = rs(B62, 16)
    add("mysql-url", f"DATABASE_URL=mysql://shop:{p}@db.internal:3306/shop", p)
    p = rs(B62, 16)
    add("amqp-url", f"broker: amqp://celery:{p}@rabbit.internal:5672//", p)
    p = _pw(rs)
    add("jdbc-url-password", f"jdbc:postgresql://db.internal:5432/app?user=app&password={p}&ssl=true", p)
    # -- text to normalise before scanning: newlines, zero-width characters, entities, full width
    body = rs(B62, 30)
    gh = "ghp_" + body + _b62_encode(binascii.crc32(body.encode()), 6)
    split = f"{gh[:22]}\n{gh[22:]}"
    add("token-split-by-newline", f"My token (wrapped by the mail client):\n{split}\nthanks!", split)
    ant = "sk-ant-api03-" + rs(B62 + "-_", 93) + "AA"
    split = f"{ant[:60]}\n{ant[60:]}"
    add("anthropic-key-wrapped", f"ANTHROPIC_API_KEY={split}", split)
    aws_sk = rs(B62, 40)
    split = f"{aws_sk[:24]}\n{aws_sk[24:]}"
    add("aws-secret-wrapped", f"aws_secret_access_key =\n{split}\n", split)
    stripe = "sk_live_" + rs(B62, 24)
    zw = f"{stripe[:14]}\u200b{stripe[14:]}"
    add("token-zero-width-space", f"Stripe: {zw}", zw)
    p = _pw(rs)
    add("keyword-zero-width", f"pass\u200bword: {p}", p)
    npm = "npm_" + rs(B62, 36)
    shy = f"{npm[:18]}\u00ad{npm[18:]}"
    add("token-soft-hyphen", f"npm token {shy}", shy)
    p = _pw(rs)
    add("html-entity-colon-decimal", f"password&#58; {p}", p)
    p = _pw(rs)
    add("html-entity-colon-named", f"<p>Password&colon; {p}</p>", p)
    p = rs(B62, 18)
    add("html-escaped-json", f"&quot;api_key&quot;: &quot;{p}&quot;", p)
    akid = "AKIA" + rs(string.ascii_uppercase + "234567", 16)
    wide = "".join(chr(ord(c) + 0xFEE0) for c in akid)
    add("fullwidth-aws-key-id", f"キー：{wide}", wide)
    p = _pw(rs)
    wide_kw = "".join(chr(ord(c) + 0xFEE0) for c in "password")
    add("fullwidth-keyword", f"{wide_kw}：{p}", p)
    p = _pw(rs)
    add("nbsp-before-value", f"Password:\u00a0{p}", p)
    # -- the word "password" in other languages
    for name, text in (
        ("ru", "Пароль от роутера: {}"), ("ru-lower", "логин admin, пароль: {}"),
        ("de", "WLAN-Passwort: {}"), ("de-kennwort", "Kennwort = {}"),
        ("fr", "Mot de passe : {}"), ("es", "Contraseña: {}"), ("pt", "senha: {}"),
        ("it", "La password è {}"), ("nl", "wachtwoord: {}"), ("pl", "Hasło: {}"),
        ("zh", "密码：{}"), ("zh-tw", "密碼: {}"), ("ja", "パスワード：{}"), ("ko", "비밀번호: {}"),
        ("tr", "Şifre: {}"), ("sv", "Lösenord: {}"), ("cs", "heslo: {}"), ("fi", "Salasana: {}"),
        ("el", "Κωδικός: {}"), ("uk-prose", "Пароль — {}"), ("de-prose", "Das Passwort ist {}."),
    ):
        p = _pw(rs)
        add(f"lang-{name}", text.format(p), p)


# Lines that must come back unchanged: placeholders in credential-shaped syntax, and prose that
# talks about passwords and tokens without holding one.
HARD_NEGATIVES: list[str] = [
    "token: ${GITHUB_TOKEN}",
    "password: ${DB_PASSWORD}",
    "export API_KEY=$OPENAI_API_KEY",
    "api_key: {{ vault_api_key }}",
    "password: <your password here>",
    "token=<your-token>",
    "Set `api_key = os.environ['API_KEY']` rather than hard-coding it.",
    "const token = process.env.GITHUB_TOKEN;",
    'secret_key = env("SECRET_KEY")',
    "SECRET_KEY = os.getenv('SECRET_KEY')",
    "password = changeme",
    "password: change_me",
    "api_key: xxxxxxxxxxxxxxxx",
    "token: sk-xxxxxxxxxxxxxxxxxxxx",
    "password: ********",
    "client_secret: ...",
    "password: <redacted>",
    "password: [redacted secret]",
    "token: [redacted secret]",
    "secret: true",
    "secret: false",
    "password: null",
    "api_key: None",
    "token: required",
    "password: optional",
    "password = getpass.getpass()",
    "token = tokens[i]",
    "api_key = settings.api_key",
    "The secret is to use tags sparingly.",
    "Never write your password in a note; use a password manager instead.",
    "Each token is a word piece; the model reads at most 512 tokens.",
    "Rotate API keys and access tokens every 90 days.",
    "The token bucket refills 5 tokens per second.",
    "Uploaded the token for obsidian-releases-1.4.16 yesterday.",
    "The secret of release-notes-2024-final is brevity.",
    "The password reset link expires in 24 hours.",
    "The token is stored in ~/.config/gh/hosts.yml by the CLI.",
    "Use a secret manager such as HashiCorp Vault or 1Password.",
    "The password policy: at least 12 characters.",
    "Fixed in commit 3f786850e387550fdab836ed7e6dc881de23001b, see the PR.",
    "Note id 123e4567-e89b-12d3-a456-426614174000 in the db",
    "Open obsidian://open?vault=Work&file=Daily%2F2024-05-01 to jump there.",
    "See [the wiki](https://alice@wiki.example.org/page) for details.",
    "| Date | Format |\n|---|---|\n| 2024-05-01 | YYYY-MM-DD |\n| 01/05/2024 | DD/MM/YYYY |",
    "https://www.youtube.com/watch?v=dQw4w9WgXcQ&list=PLx0sYbCqOb8TBPRdmBHs5Iftvv9TPboYG",
    "sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "pwd: /home/alice/projects",
    "postgres://user:${DB_PASSWORD}@localhost/app",
    "https://user:password@example.com (the docs' example URL)",
]


# Ordinary notes (prose, code, config, recipes, tables, identifiers) that must come back unchanged:
# the precision half of the corpus. Several use the words password, token, secret and key in their
# everyday sense, or have the shapes the rules look for (tables, command lines, long runs of
# letters and digits, entities, non-ASCII text) without a secret in them.
ORDINARY_NOTES: list[str] = [
    "## Banana bread\n\n- 3 ripe bananas\n- 1/3 cup melted butter\n- 3/4 cup sugar\n- 1 tsp baking soda\n\n"
    "Bake at 175 °C for 60 minutes. The secret is very ripe bananas.",
    "Meeting 2024-05-02 with Dana and Luis\n\n- Action: reset Bob's password via the admin console.\n"
    "- Decision: rotate the deploy tokens quarterly.\n- Next sync: Thursday 10:30.",
    "```python\ndef check_password(password: str, stored_hash: bytes) -> bool:\n"
    "    return bcrypt.checkpw(password.encode(), stored_hash)\n```",
    '```python\npassword = input("Password: ")\nif not password:\n    raise SystemExit("no password given")\n```',
    "```yaml\nservices:\n  db:\n    image: postgres:16\n    environment:\n"
    "      POSTGRES_PASSWORD: ${POSTGRES_PASSWORD}\n      POSTGRES_USER: app\n```",
    "`.env.example`:\n\n```\nDB_PASSWORD=\nAPI_KEY=your-api-key-here\nSECRET_KEY=change-me\n```",
    "```nginx\nserver {\n    listen 443 ssl;\n    server_name notes.example.org;\n"
    "    ssl_certificate /etc/letsencrypt/live/notes/fullchain.pem;\n}\n```",
    "Log in with `mysql -u root -p` and type the password at the prompt; "
    "`mysql -u root -p shop < dump.sql` restores the dump.",
    "`ssh -p 2222 alice@example.org` and then `sshpass -f ~/.ssh/nas.pass rsync -a photos nas:`",
    'curl -u "$API_USER:$API_TOKEN" https://api.example.com/v1/items',
    "PGPASSWORD=$(pass show db/prod) psql -h db.internal -U app -p 5432 notes",
    "| Service | Login | Password |\n|---|---|---|\n| Router | admin | in the vault |\n"
    "| NAS | alice | see 1Password |\n| Printer | - | none |",
    "| Key | Action |\n|---|---|\n| Ctrl+P | Command palette |\n| Ctrl+O | Quick switcher |\n"
    "| Ctrl+Shift+F | Search in all files |",
    "| Token | POS |\n|---|---|\n| The | DET |\n| cat | NOUN |\n| sat | VERB |",
    "Tokenization splits text into tokens; BPE merges the most frequent pair of symbols until the "
    "vocabulary reaches 32000 tokens.",
    "A JWT looks like `header.payload.signature`, each part base64url-encoded; never trust the "
    "payload before checking the signature.",
    "git log --oneline\n\n3f78685 Fix the flaky sync test\na94a8fe Bump obsidian to 1.5.12\n"
    "e3b0c44 Add dark theme",
    "Note ids: 123e4567-e89b-12d3-a456-426614174000, 9b2c1f0e-7d4a-4c8e-b1f2-3a5d6e7f8091.",
    "Search: https://example.com/search?q=token+bucket&page=2&sort=desc",
    "Upgraded numpy 1.26.4 -> 2.0.1, pandas 2.2.2 and torch 2.3.0+cpu; Python 3.11.9.",
    "Reading list: *Designing Data-Intensive Applications*, ISBN 978-1-4493-7332-0; "
    "*The Pragmatic Programmer*, ISBN 978-0-13-595705-9.",
    "Cite as doi:10.1145/3292500.3330701 (KDD '19).",
    "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08  obsidian-1.5.12.tar.gz",
    "Favicon: data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kg"
    "AAAABJRU5ErkJggg==",
    "Das Passwort muss mindestens 12 Zeichen lang sein und darf nicht wiederverwendet werden.",
    "Mot de passe oublié ? Cliquez sur « Réinitialiser » et suivez le lien reçu par e-mail.",
    "La contraseña debe cambiarse cada 90 días, según la política de seguridad.",
    "Пароль: хранится в менеджере паролей, спроси у Анны.",
    "密码：请在保险库中查找。",
    "パスワードを忘れた場合は管理者に連絡してください。",
    "Tom &amp; Jerry&#39;s notes &mdash; 5 &lt; 6 and 7 &gt; 3.",
    "ＡＢＣ株式会社との会議メモ：来週までに見積もりを送る。",
    "Prices\u00a0rose 3\u00a0% in Q2… see the chart below.",
    "👩\u200d💻 Pairing session with Sam: we fixed the token refresh bug.",
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl alice@laptop",
    "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUQ2Fr5T7o9m5b8y1S0JbT7Pq5mU4wCgYIKoZIzj0EAwIw\n"
    "LzEtMCsGA1UEAwwkbm90ZXMuZXhhbXBsZS5vcmcgc2VsZi1zaWduZWQgdGVzdDAe\n-----END CERTIFICATE-----",
    "---\ntitle: Token economics\ntags: [crypto, reading]\naliases: [secret santa]\n---\n\n# Token economics",
    "Secret Santa 2024: Alice → Bob, Carol → Dave, Erin → Alice.",
    "The key to good sourdough is patience and a warm kitchen.",
    "API keys are managed on the Settings › API page; never paste them into a note.",
    'timeout = 30\nretries = 5\nlog_level = "debug"\ncache_dir = "~/.cache/hybrid"',
    "```yaml\nenv:\n  - name: DB_PASSWORD\n    valueFrom:\n      secretKeyRef:\n        name: db-secret\n"
    "        key: password\n```",
    "```yaml\njobs:\n  deploy:\n    env:\n      TOKEN: ${{ secrets.DEPLOY_TOKEN }}\n```",
    'resource "aws_db_instance" "notes" {\n  username = "app"\n  password = var.db_password\n}',
    'ansible_become_pass: "{{ vault_become_pass }}"',
    "ALTER USER app WITH PASSWORD :'new_password';",
    "1. e4 e5 2. Nf3 Nc6 3. Bb5 a6 - the Ruy Lopez, my favourite opening.",
    "Let x = 3; then f(x) = x² + 2x = 15.",
    "Flight LH 1234 on 2024-06-03, booking ref K7QX2P, seat 14C.",
    "Guest Wi-Fi: network `CafeGuest`, no password needed.",
    'export PATH="$HOME/.local/bin:$PATH"',
    "[credential]\n    helper = osxkeychain\n[user]\n    name = Alice Example",
    "| Endpoint | Auth |\n|---|---|\n| /v1/tokens | Bearer |\n| /v1/health | none |",
    "name,email,role\nalice,alice@example.com,admin\nbob,bob@example.com,viewer",
    "DB at 10.0.0.12:5432, cache at 10.0.0.13:6379, last backup 2024-05-01T03:00:00Z.",
    '{"password": os.environ["DB_PASSWORD"], "user": "app"}',
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt.",
    "Firmware checksum 3f2a9c0d8e7b6a5f4e3d2c1b0a9f8e7d, flashed on the spare router.",
    "git remote add origin git@github.com:alice/notes.git",
    'ssh-keygen -t ed25519 -C "alice@laptop"\nEnter passphrase (empty for no passphrase):\n'
    "Enter same passphrase again:",
    "Passphrase: (none)",
    "password: ••••••••",
    "See https://github.com/obsidianmd/obsidian-releases/blob/master/community-plugins\n"
    "json for the plugin list.",
    "test results:\n  pass: true\n  first_pass: 0.93\n  retries: 2",
    "docker run -p 8080:80 -v $PWD:/usr/share/nginx/html nginx",
    "psql -U postgres -p 5432 -d notes -c 'select 1'",
    "curl -u alice: https://files.example.org/upload   # curl asks for the password",
    '<input type="password" name="password" placeholder="Password">',
    "<password>${DB_PASS}</password>",
    "Use `--password-file ~/.restic-pass` rather than --password on the command line.",
    "The password reset link expires after 24 hours; the token is single-use.",
    "Access token lifetime: 3600 seconds, refresh token lifetime: 30 days.",
    "Export from Bitwarden: File > Export vault > .json (encrypted).",
    "The secret ingredient is a pinch of smoked paprika.",
    "Dataview: `TABLE file.mtime AS Modified FROM #project WHERE status = \"active\"`",
    "~/Library/Application Support/obsidian/obsidian.json holds the vault list.",
    "Commit 3f786850e387550fdab836ed7e6dc881de23001b fixed it, see PR #2291.",
    "Backup key fingerprint: SHA256:uNiVztksCsDhcc0u9e8BujQXVUpKZIDTMczCvj3tD2s",
    "AWS region eu-west-1, bucket notes-backup-2024, account 123456789012.",
    "Passwort vergessen? Einfach auf „Zurücksetzen“ klicken.",
    "The PIN pad on the front door beeps twice when the battery is low.",
    "In C, `char *token = strtok(line, \",\");` walks the fields of a CSV line.",
]


# --- The multilingual labelled set (tests/data/secrets_multilingual.jsonl) ----------------------
#
# Each line of the file is a sample: ``id``, ``lang`` (an ISO 639-1 code, or ``code`` for a config
# line, a command or a bare token with no prose around it), ``class`` and ``text``. A positive has
# ``kind``, the shape of the value its ``{secret}`` slot gets at run time (so the file holds no
# literal token, as above): that value is the exact substring that must disappear. A negative
# (``class`` "negative") has no slot and must come back unchanged; ``why`` says what it is.

MULTILINGUAL_SET = "secrets_multilingual.jsonl"

# Latin letters and the Cyrillic (first) and Greek (second, where there is one) letters drawn
# the same: the homoglyph samples swap one letter of a token for one of these.
_HOMOGLYPHS = {
    "A": "\u0410\u0391", "B": "\u0412\u0392", "C": "\u0421", "E": "\u0415\u0395", "H": "\u041d\u0397",
    "K": "\u041a\u039a", "M": "\u041c\u039c", "O": "\u041e\u039f", "P": "\u0420\u03a1", "T": "\u0422\u03a4",
    "X": "\u0425\u03a7", "Y": "\u0423\u03a5", "a": "\u0430\u03b1", "c": "\u0441", "e": "\u0435",
    "o": "\u043e\u03bf", "p": "\u0440\u03c1", "x": "\u0445", "y": "\u0443",
}
_LEET = {"a": "4", "e": "3", "i": "1", "o": "0"}


def _github_token(prefix: str, rs) -> str:
    body = rs(B62, 30)
    return prefix + body + _b62_encode(binascii.crc32(body.encode()), 6)


def _value_makers(rs, rnd: random.Random) -> dict:
    """The value of each ``kind``: a function of no arguments that draws a fresh one."""

    def pw() -> str:  # typed at random: letters of both cases and digits, 10-14 characters
        n = rnd.randint(10, 14)
        while True:
            v = rs(B62, n)
            if any(c.isdigit() for c in v) and any(c.isupper() for c in v) and any(c.islower() for c in v):
                return v

    def pw_symbol() -> str:  # a word in leetspeak with a symbol and a digit: L4nt3rn#5
        word = rnd.choice(_PASSPHRASE_WORDS).capitalize()
        word = "".join(_LEET.get(c, c) if rnd.random() < 0.6 else c for c in word)
        if not any(c.isdigit() for c in word):
            word += rs(string.digits, 1)
        return word + rs("!#%&*+?@", 1) + rs(string.digits, 1)

    def pw_words() -> str:  # two capitalised words and a number: CopperFalcon42
        a, b = rnd.sample(_PASSPHRASE_WORDS, 2)
        return a.capitalize() + b.capitalize() + rs(string.digits, 2)

    def doppler(kind: str, env: bool = False) -> str:
        middle = f"{rnd.choice(['dev', 'stg', 'prd', 'ci_test'])}." if env else ""
        return f"dp.{kind}.{middle}{rs(B62, rnd.randint(40, 44))}"

    makers = {
        "pw": pw, "pw-symbol": pw_symbol, "pw-words": pw_words,
        "digits-4": lambda: rs("123456789", 1) + rs(string.digits, 3),
        "digits-8": lambda: rs("123456789", 1) + rs(string.digits, 7),
        "b62-32": lambda: rs(B62, 32),
        "hex-32": lambda: rs(HEX, 32),
        "hex-40": lambda: rs(HEX, 40),
        "notion-secret": lambda: "secret_" + rs(B62, 43),
        "notion-ntn": lambda: "ntn_" + rs(string.digits, 11) + rs(B62, 35),
        "doppler-pt": lambda: doppler("pt"), "doppler-ct": lambda: doppler("ct"),
        "doppler-sa": lambda: doppler("sa"), "doppler-st": lambda: doppler("st"),
        "doppler-st-env": lambda: doppler("st", env=True),
        "whsec": lambda: "whsec_" + rs(B62, 32),
        "whsec-hex": lambda: "whsec_" + rs(HEX, 64),
        "stripe-sk": lambda: "sk_live_" + rs(B62, 24),
        "stripe-rk": lambda: "rk_live_" + rs(B62, 24),
        "stripe-test": lambda: "sk_test_" + rs(B62, 24),
        "ghp": lambda: _github_token("ghp_", rs),
        "github-fine": lambda: "github_pat_" + rs(B62, 22) + "_" + rs(B62, 59),
        "gitlab": lambda: "glpat-" + rs(B62 + "-_", 20),
        "slack-bot": lambda: f"xoxb-{rs(string.digits, 12)}-{rs(string.digits, 13)}-{rs(B62, 24)}",
        "slack-webhook": lambda: (f"https://hooks.slack.com/services/T{rs(string.ascii_uppercase + string.digits, 8)}"
                                  f"/B{rs(string.ascii_uppercase + string.digits, 10)}/{rs(B62, 24)}"),
        "openai-proj": lambda: "sk-proj-" + rs(B62 + "-_", 74) + "T3BlbkFJ" + rs(B62 + "-_", 74),
        "hf": lambda: "hf_" + rs(string.ascii_letters, 34),
        "aws-akid": lambda: "AKIA" + rs(string.ascii_uppercase + "234567", 16),
    }

    def homoglyph(kind: str) -> str:
        """A token of ``kind`` with one letter after its prefix drawn in Cyrillic or Greek."""
        places: list[int] = []
        while not places:  # a token with no letter that has a look-alike is drawn again
            token = makers[kind]()
            start = 4 if kind == "aws-akid" else token.index("_" if "_" in token else "-") + 1
            places = [i for i in range(start, len(token)) if token[i] in _HOMOGLYPHS]
        i = rnd.choice(places)
        return token[:i] + rnd.choice(_HOMOGLYPHS[token[i]]) + token[i + 1:]

    for kind in ("ghp", "stripe-sk", "aws-akid", "slack-bot", "gitlab", "openai-proj"):
        makers[f"homoglyph-{kind}"] = lambda kind=kind: homoglyph(kind)
    return makers


def multilingual_set(seed: int = 47) -> tuple[list[dict], list[dict]]:
    """The positives and the negatives of tests/data/secrets_multilingual.jsonl. A positive's
    ``line`` is its text with the slot filled, ``secrets`` the one value that must disappear
    (the same keys as :func:`fake_secrets`, so the scoring of test_redact_corpus.py applies)."""
    from pathlib import Path

    rnd = random.Random(seed)

    def rs(alphabet: str, n: int) -> str:
        return "".join(rnd.choice(alphabet) for _ in range(n))

    makers = _value_makers(rs, rnd)
    positives, negatives = [], []
    path = Path(__file__).parent / "data" / MULTILINGUAL_SET
    for row in map(json.loads, path.read_text(encoding="utf-8").splitlines()):
        if row["class"] == "negative":
            negatives.append({**row, "line": row["text"]})
            continue
        value = makers[row["kind"]]()
        line = row["text"].replace("{secret}", value)
        positives.append({**row, "name": row["id"], "line": line, "secret": value, "secrets": (value,)})
    return positives, negatives


def fake_value(kind: str, seed: int = 0) -> str:
    """One value of ``kind`` (a ``kind`` of tests/data/secrets_multilingual.jsonl), drawn from ``seed``."""
    rnd = random.Random(seed)
    return _value_makers(lambda alphabet, n: "".join(rnd.choice(alphabet) for _ in range(n)), rnd)[kind]()
