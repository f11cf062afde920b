"""Fake credentials and hard negatives for the redaction tests (tests/test_redact.py).

Every secret is generated at run time from a seed, so no file in the repository holds a literal
token that a push-protection scanner would flag (ported from eval/scout/secrets_probe.py). The
private keys are random base64 in PEM armour, not real keys: kingfisher matches the armour and
the body's shape, and the tests stay free of openssl and ssh-keygen.
"""

from __future__ import annotations

import base64
import binascii
import json
import random
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


def pem_block(label: str, n_bytes: int, rnd: random.Random) -> str:
    """A PEM-armoured block of random bytes: ``-----BEGIN {label}-----``, 64-character base64
    lines, ``-----END {label}-----`` (48 bytes make one line)."""
    body = base64.b64encode(rnd.randbytes(n_bytes)).decode()
    lines = "\n".join(body[i:i + 64] for i in range(0, len(body), 64))
    return f"-----BEGIN {label}-----\n{lines}\n-----END {label}-----"


def fake_secrets(seed: int = 12) -> list[dict]:
    """One dict per case: ``name``, ``line`` (markdown text holding the secret, sometimes several
    lines) and ``secret`` (the substring that must not survive redaction)."""
    rnd = random.Random(seed)

    def rs(alphabet: str, n: int) -> str:
        return "".join(rnd.choice(alphabet) for _ in range(n))

    cases: list[dict] = []

    def add(name: str, line: str, secret: str) -> None:
        assert secret and secret in line, name
        cases.append({"name": name, "line": line, "secret": secret})

    akid = "AKIA" + rs(string.ascii_uppercase + "234567", 16)
    add("aws-access-key-id", f"The CI user is `{akid}`; rotate it yearly.", akid)
    aws_sk = rs(B64, 40)
    add("aws-secret-key", f"```ini\n[default]\naws_access_key_id = {akid}\naws_secret_access_key = {aws_sk}\n```",
        aws_sk)
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
    # Out of scope for every detector measured (eval/reports/secrets-detectors.md)
    prose = rs(string.ascii_letters, 7) + "&" + rs(string.digits, 2)
    add("prose-password", f"The wifi password is {prose} for guests.", prose)
    return cases


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
