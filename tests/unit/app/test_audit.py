"""The audit log of agent calls (hybrid.app.audit) and ``hybrid audit``: real files in tmp_path."""
import json
import os
import re
import stat
import subprocess
import sys
import textwrap
import time

import pytest
from click.testing import CliRunner
from helpers import write

from hybrid.app.audit import MAX_RECORD_BYTES, AuditError, AuditLog, audit_path, parse_since, record_epoch
from hybrid.core.settings import Settings
from hybrid.faces.cli.main import main


def rec(i, tool="search", client="claude-code 1.0.3", **extra):
    return {"tool": tool, "client": client, "args": {"query": f"q{i}"}, "returned": [f"v:n{i}.md:1-2"],
            "count": 1, "ms": 1.5, "error": None, **extra}


def lines(path):
    return path.read_bytes().split(b"\n")[:-1]


def test_round_trip_adds_utc_time(tmp_path):
    log = AuditLog(tmp_path / "data" / "audit.jsonl", 1_000_000, 5)
    log.append(rec(1))
    log.append(rec(2, time="2026-11-30T14:05:01.123Z"))
    got = list(log.records())
    assert [r["args"]["query"] for r in got] == ["q1", "q2"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", got[0]["time"])
    assert abs(record_epoch(got[0]) - time.time()) < 5
    assert got[1]["time"] == "2026-11-30T14:05:01.123Z" and got[1]["returned"] == ["v:n2.md:1-2"]
    assert list(got[0]) == ["time", "tool", "client", "args", "returned", "count", "ms", "error"]
    assert log.skipped == 0


def test_unicode_and_line_breaks_stay_one_line(tmp_path):
    log = AuditLog(audit_path(tmp_path), 1_000_000, 5)
    args = {"query": "naïve\nsecond line\r\n\u2028\u2029\x85 🦊 日本語", "lone": "\ud800", "path": 'a\\b"c'}
    log.append({"tool": "search", "args": args, "obj": object()})  # default=str for the odd value
    raw = lines(log.path)
    assert len(raw) == 1 and "日本語".encode() in raw[0]  # ensure_ascii=False
    (got,) = log.records()
    assert got["args"] == args and got["obj"].startswith("<object object")


def test_oversized_record_is_clipped(tmp_path):
    log = AuditLog(audit_path(tmp_path), 10_000_000, 5)
    log.append({"tool": "propose_note", "args": {"path": "a.md", "text": "x" * 500_000},
                "returned": [f"v:{i}.md:1-2" for i in range(20_000)]})
    log.append({"tool": "search", "args": {"deep": [[["y" * 70] * 20] * 20] * 20}})
    raw = lines(log.path)
    assert len(raw) == 2 and all(len(line) < MAX_RECORD_BYTES for line in raw)
    first, second = log.records()
    assert first["truncated"] is True and first["args"]["path"] == "a.md"
    assert first["args"]["text"].startswith("xxx") and len(first["args"]["text"]) < 5000
    assert second["truncated"] is True and second["tool"] == "search" and second["args"] is None


def test_rotation_by_size_with_keep(tmp_path):
    log = AuditLog(audit_path(tmp_path), 1000, 2)
    size = len(json.dumps(rec(0)))
    for i in range(40):
        log.append(rec(i))
    names = sorted(p.name for p in tmp_path.iterdir() if p.name != "audit.jsonl.lock")
    assert names == ["audit.1.jsonl", "audit.2.jsonl", "audit.jsonl"]
    for p in tmp_path.glob("audit*.jsonl"):
        assert 0 < p.stat().st_size <= 1000 and stat.S_IMODE(p.stat().st_mode) == 0o600
    got = [int(r["args"]["query"][1:]) for r in log.records()]
    assert got == list(range(got[0], 40))  # in order across the three files, newest last
    assert got[0] > 0 and len(got) > 2 * (1000 // (size + 40))  # the oldest were dropped
    assert [p.name for p in log.files()] == ["audit.2.jsonl", "audit.1.jsonl", "audit.jsonl"]


def test_keep_zero_and_lowered_keep(tmp_path):
    log = AuditLog(audit_path(tmp_path), 500, 0)
    for i in range(20):
        log.append(rec(i))
    assert sorted(p.name for p in tmp_path.glob("audit*.jsonl")) == ["audit.jsonl"]
    assert [r["args"]["query"] for r in log.records()][-1] == "q19"
    # Files past keep (keep was lowered since they were made) go at the next rotation.
    write(tmp_path, "audit.5.jsonl", json.dumps(rec(99)) + "\n")
    write(tmp_path, "audit.2.jsonl", json.dumps(rec(98)) + "\n")
    log = AuditLog(audit_path(tmp_path), 500, 2)
    for i in range(20, 30):
        log.append(rec(i))
    assert sorted(p.name for p in tmp_path.glob("audit*.jsonl")) == ["audit.1.jsonl", "audit.2.jsonl",
                                                                      "audit.jsonl"]
    assert {"q98", "q99"}.isdisjoint(r["args"]["query"] for r in log.records())


WRITER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from hybrid.app.audit import AuditLog
    path, who, n = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    log = AuditLog(path, 4000, 10_000)
    for i in range(n):
        log.append({"tool": "search", "client": who, "args": {"query": f"{who} {i} " + "z" * (i % 50)},
                    "returned": [], "count": 0, "ms": 0.1, "error": None})
""")


@pytest.mark.slow  # spawns processes (about a second)
def test_concurrent_appends_from_processes(tmp_path):
    path = audit_path(tmp_path / "data")
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), f"p{k}", "200"]) for k in range(4)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    log = AuditLog(path, 4000, 10_000)
    assert len(log.files()) > 5  # rotation happened while they wrote
    for f in log.files():
        for line in lines(f):
            json.loads(line)  # every line is whole JSON
    got = [r["args"]["query"].split()[:2] for r in log.records()]
    assert log.skipped == 0 and len(got) == 800
    for k in range(4):  # nothing lost, nothing doubled, each writer's records in its order
        assert [int(i) for who, i in got if who == f"p{k}"] == list(range(200))


def test_torn_last_line_is_skipped(tmp_path):
    log = AuditLog(audit_path(tmp_path), 1_000_000, 5)
    log.append(rec(1))
    log.append(rec(2))
    with open(log.path, "ab") as f:
        f.write(b'{"time":"2026-11-30T14:05:01.123Z","tool":"sea')  # a crash mid-write
    assert [r["args"]["query"] for r in log.records()] == ["q1", "q2"] and log.skipped == 1
    log.append(rec(3))  # lands on the torn line; still recovered
    with open(log.path, "ab") as f:
        f.write(b"[1, 2]\n\xff\xfe\n\n")
    assert [r["args"]["query"] for r in log.records()] == ["q1", "q2", "q3"] and log.skipped == 3


def test_permissions(tmp_path):
    log = AuditLog(audit_path(tmp_path / "new" / "data"), 1_000_000, 5)
    log.append(rec(1))
    assert stat.S_IMODE(log.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(log.path.parent.stat().st_mode) == 0o700


def test_unwritable_path_raises_audit_error(tmp_path):
    write(tmp_path, "data", "a file where the data dir should be")
    log = AuditLog(audit_path(tmp_path / "data"), 1_000_000, 5)
    with pytest.raises(AuditError, match=r"cannot write the audit log .*data/audit\.jsonl: ") as err:
        log.append(rec(1))
    assert "\n" not in str(err.value)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_read_only_dir_raises_audit_error(tmp_path):
    (tmp_path / "ro").mkdir(mode=0o500)
    log = AuditLog(audit_path(tmp_path / "ro"), 1_000_000, 5)
    with pytest.raises(AuditError, match="Permission denied; check the permissions"):
        log.append(rec(1))


def test_from_settings(tmp_path):
    log = AuditLog.from_settings(tmp_path, Settings(audit_max_mb=2, audit_keep=3))
    assert (log.path, log.max_bytes, log.keep, log.enabled) == (tmp_path / "audit.jsonl", 2_000_000, 3, True)
    off = AuditLog.from_settings(tmp_path, Settings(audit_log=False))
    off.append(rec(1))  # a no-op
    assert not off.enabled and not off.path.exists() and not off.exists()


def test_filters(tmp_path):
    log = AuditLog(audit_path(tmp_path), 1_000_000, 5)
    log.append(rec(1, time="2026-01-01T00:00:00.000Z"))
    log.append(rec(2, tool="get_note", client="Cursor 0.4", time="2026-06-01T12:00:00.000Z"))
    log.append(rec(3, client="http 127.0.0.1 curl/8.5"))
    log.append({"tool": "search", "time": "garbage"})

    def q(**kw):
        return [r["args"]["query"] for r in log.records(**kw)]

    assert q(since=parse_since("12h")) == ["q3"]
    assert q(since=parse_since("2026-03-01")) == ["q2", "q3"]
    assert q(tool="get_note") == ["q2"]
    assert q(client="CURSOR") == ["q2"] and q(client="http") == ["q3"]


def test_parse_since():
    now = time.time()
    assert abs(parse_since("12h") - (now - 12 * 3600)) < 5
    assert abs(parse_since("90min") - (now - 5400)) < 5
    assert abs(parse_since(" 30s ") - (now - 30)) < 5
    assert abs(parse_since("7d") - (now - 7 * 86400)) < 5
    assert abs(parse_since("1m") - (now - 30.44 * 86400)) < 5  # months, as in since: of queries
    assert parse_since("2026-11-01T08:30") > parse_since("2026-11-01")
    with pytest.raises(AuditError, match="bad --since 'yesterday'"):
        parse_since("yesterday")


# --- the command ------------------------------------------------------------------------------
def run(*args):
    return CliRunner().invoke(main, ["audit", *args])


@pytest.fixture
def logged(hybrid_home):
    log = AuditLog(audit_path(hybrid_home / "data"), 1_000_000, 5)
    log.append({"time": "2026-01-02T10:00:00.000Z", "tool": "search", "client": "claude-code 1.0.3",
                "args": {"query": "tailscale acl", "top_k": 3, "vaults": None},
                "returned": ["work:net/acl.md:1-20", "work:net/b.md:3-4", "home:c.md:1-2", "home:d.md:5-9"],
                "count": 4, "ms": 12.4, "error": None})
    log.append({"time": "2026-01-02T10:00:05.000Z", "tool": "get_note", "client": "Cursor 0.4",
                "args": {"path": "net/acl.md:1-20", "vault": "work"}, "returned": ["work:net/acl.md:1-20"],
                "count": 1, "ms": 3.25, "error": None})
    log.append({"time": "2026-01-02T10:01:00.000Z", "tool": "get_note", "client": "claude-code 1.0.3",
                "args": {"path": "../etc/passwd\n\x1b[31mred"}, "returned": [], "count": 0, "ms": 0.5,
                "error": "../etc/passwd: outside the vault; refused"})
    return log


def test_cli_human_output(logged):
    r = run()
    assert r.exit_code == 0, r.output
    out = r.stdout.splitlines()
    assert len(out) == 3
    assert re.fullmatch(r'2026-01-0[12] \d\d:00:00  claude-code 1\.0\.3  search  "tailscale acl" top_k=3 → '
                        r"4: work:net/acl\.md:1-20, work:net/b\.md:3-4, home:c\.md:1-2, …  \(12 ms\)", out[0])
    assert out[1].endswith("Cursor 0.4  get_note  work:net/acl.md:1-20 → 1: work:net/acl.md:1-20  (3.2 ms)")
    assert "get_note  ../etc/passwd\\n\\u001b[31mred → ERROR: ../etc/passwd: outside the vault" in out[2]
    assert "\x1b" not in r.stdout
    assert r.stderr == "3 calls shown (of 3)\n"


def test_cli_json_tool_limit_client(logged):
    r = run("--json")
    assert [x["tool"] for x in json.loads(r.stdout)] == ["search", "get_note", "get_note"]
    r = run("--json", "--tool", "get_note", "--limit", "1")
    (only,) = json.loads(r.stdout)
    assert only["error"].startswith("../etc/passwd") and r.stderr == "1 call shown (of 2 tool get_note)\n"
    r = run("--client", "cursor")
    assert len(r.stdout.splitlines()) == 1 and "Cursor 0.4" in r.stdout
    r = run("--limit", "0", "--since", "2026-01-01")
    assert len(r.stdout.splitlines()) == 3 and "since 2026-01-01 00:00" in r.stderr
    r = run("--since", "1h")
    assert r.stdout == "" and r.stderr.startswith("0 calls shown (of 0 since")


def test_cli_bad_since(logged):
    r = run("--since", "last week")
    assert r.exit_code == 1 and r.stderr.startswith("error: bad --since 'last week'")


def test_cli_no_log_yet(hybrid_home):
    r = run()
    assert r.exit_code == 0 and r.stdout == ""
    assert r.stderr.startswith("no agent calls recorded yet (") and "audit.jsonl does not exist" in r.stderr
    r = run("--json")
    assert r.exit_code == 0 and json.loads(r.stdout) == []


def test_cli_audit_off(logged, hybrid_home):
    write(hybrid_home, "config.toml", "[settings]\naudit_log = false\n")
    r = run()
    assert r.exit_code == 0 and len(r.stdout.splitlines()) == 3
    assert r.stderr.startswith("audit logging is off (audit_log = false in ")
