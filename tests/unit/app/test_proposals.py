"""The proposals inbox: agents write new notes into one folder only, humans accept or reject them.
Agent input is hostile: every rule of write_proposal is tried with the input that breaks it."""
import datetime as dt
import errno
import json
import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import write

import hybrid
from hybrid.app.proposals import (
    WINDOWS_RESERVED,
    ProposalError,
    accept,
    list_proposals,
    read_proposal,
    reject,
    slugify,
    write_proposal,
)
from hybrid.core.config import Vault
from hybrid.sources.markdown import parse_note

FOLDER = "agent_learnings"
NOW = dt.datetime(2026, 11, 30, 14, 5, 1, tzinfo=dt.UTC)


@pytest.fixture
def v(tmp_path) -> Vault:
    root = tmp_path / "vault"
    write(root, "note.md", "# A note\n\nmine, not the agent's\n")
    return Vault(name="vault", path=root, include=["**/*.md"], exclude=[], embedder="hash:64",
                 index_dir=tmp_path / "index")


def propose(v, title="Tailscale ACL", content="Allow the lab subnet.\n", folder=FOLDER, **kw):
    kw.setdefault("proposed_by", "claude-code")
    kw.setdefault("now", NOW)
    return write_proposal(v, folder, title, content, **kw)


def files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


# --- write_proposal: hostile input ----------------------------------------------------------
@pytest.mark.parametrize("title, name", [
    ("../../etc/passwd", "2026-11-30-etc-passwd.md"),
    (".hidden", "2026-11-30-hidden.md"),
    ("CON", "2026-11-30-con.md"),
    ("nul.txt", "2026-11-30-nul-txt.md"),
    ("a/b\\c:d|e*f?g", "2026-11-30-a-b-c-d-e-f-g.md"),
    ("🚀 Launch ✨ plan", "2026-11-30-launch-plan.md"),
    ("🚀✨", "2026-11-30-proposal.md"),
    ("...", "2026-11-30-proposal.md"),
    ("Ｆｕｌｌｗｉｄｔｈ Café", "2026-11-30-fullwidth-café.md"),
    ("Заметка о сети", "2026-11-30-заметка-о-сети.md"),
])
def test_hostile_titles_make_safe_file_names(v, title, name):
    p = propose(v, title=title)
    assert p.path == f"{FOLDER}/{name}"
    assert files(v.path) == sorted([f"{FOLDER}/{name}", "note.md"])  # nothing anywhere else
    assert Path(name).stem.split(".")[0].lower() not in WINDOWS_RESERVED
    assert p.title == title.strip()


def test_long_title_gives_a_short_slug(v):
    p = propose(v, title="word " * 40)  # 200 characters: allowed
    slug = p.path.rsplit("/", 1)[1][len("2026-11-30-"):-3]
    assert len(slug) <= 60 and not slug.endswith("-")
    assert slugify("x" * 500) == "x" * 60


@pytest.mark.parametrize("title, message", [
    ("x" * 201, "limit is 200"),
    ("a" * 500, "limit is 200"),
    ("   ", "title is empty"),
    ("", "title is empty"),
    ("two\nlines", "U+000A"),
    ("nul\x00byte", "U+0000"),
    ("esc\x1b[31m", "U+001B"),
    ("bidi \u202etxt.exe", "U+202E"),
    ("line\u2028sep", "U+2028"),
    (None, "title must be text"),
    (42, "title must be text"),
])
def test_bad_titles_are_refused(v, title, message):
    with pytest.raises(ProposalError, match=re.escape(message)):
        propose(v, title=title)
    assert not (v.path / FOLDER).exists() or files(v.path / FOLDER) == []


def test_content_over_the_limit_is_refused_not_truncated(v):
    with pytest.raises(ProposalError, match="101 characters; the limit is 100"):
        propose(v, content="x" * 101, max_chars=100)
    p = propose(v, content="x" * 100, max_chars=100)
    assert (v.path / p.path).read_text().endswith("\n" + "x" * 100 + "\n")
    assert p.chars == 101  # the body as written: the text and the final newline


@pytest.mark.parametrize("content, message", [
    ("", "content is empty"),
    (" \n\t\n", "content is empty"),
    ("text\x00more", "U+0000"),
    ("ok\nthen \x07 bell", "U+0007 on line 2"),
    ("lone\rreturn", "U+000D"),
    ("\x7f", "U+007F"),
    ("surrogate \ud800", "U+D800"),
    (b"bytes", "content must be text"),
])
def test_bad_content_is_refused(v, content, message):
    with pytest.raises(ProposalError, match=re.escape(message)):
        propose(v, content=content)


def test_crlf_becomes_lf_and_tabs_stay(v):
    p = propose(v, content="a\r\n\tb\r\n")
    data = (v.path / p.path).read_bytes()
    assert b"\r" not in data and data.endswith(b"\n\na\n\tb\n")


@pytest.mark.parametrize("based_on, message", [
    (["v:a.md:1-2"] * 21, "21 citations; the limit is 20"),
    (["v:" + "a" * 300], "limit is 300"),
    (["v:a.md:1-2\nstatus: reviewed"], "U+000A"),
    ("v:a.md:1-2", "must be a list"),
    ([42], "based_on[0] must be text"),
    ([""], "based_on[0] is empty"),
])
def test_bad_based_on_is_refused(v, based_on, message):
    with pytest.raises(ProposalError, match=re.escape(message)):
        propose(v, based_on=based_on)


def test_proposed_by_is_one_short_line(v):
    p = propose(v, proposed_by="evil\nstatus: reviewed\x00" + "z" * 300)
    assert "\n" not in p.proposed_by and "\x00" not in p.proposed_by and len(p.proposed_by) <= 100
    meta = parse_note(p.path, (v.path / p.path).read_text()).properties
    assert meta["status"] == "proposed" and meta["proposed_by"] == p.proposed_by
    assert propose(v, title="other", proposed_by="  ").proposed_by == "unknown"


def test_proposals_off(v):
    for folder in ("", "  ", "/"):
        with pytest.raises(ProposalError, match=r"agents cannot write: proposals are off \(set proposals_folder"):
            propose(v, folder=folder)
    with pytest.raises(ProposalError, match="proposals are off"):
        list_proposals(v, "")


@pytest.mark.parametrize("folder", ["../outside", "/tmp/abs", ".obsidian", "a/.git", "a/../../b",
                                    "C:/windows", "a\\b", "a/./b"])
def test_bad_folders_are_refused(v, folder):
    with pytest.raises(ProposalError, match="refused"):
        propose(v, folder=folder)
    assert files(v.path) == ["note.md"]


def test_folder_symlink_escaping_the_vault_is_refused(v, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (v.path / FOLDER).symlink_to(outside, target_is_directory=True)
    with pytest.raises(ProposalError, match="symlink"):
        propose(v)
    (v.path / "deep").mkdir()
    (v.path / "deep" / "link").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ProposalError, match="symlink"):
        propose(v, folder="deep/link/inbox")
    assert list(outside.iterdir()) == []


def test_folder_symlink_inside_the_vault_is_refused_too(v):
    """A link to another vault folder would show the proposal under a second, unhidden path."""
    (v.path / "real").mkdir()
    (v.path / FOLDER).symlink_to(v.path / "real", target_is_directory=True)
    with pytest.raises(ProposalError, match="symlink"):
        propose(v)


def test_folder_is_created_with_parents(v):
    p = propose(v, folder="inbox/agents/")
    assert p.path == "inbox/agents/2026-11-30-tailscale-acl.md" and (v.path / p.path).is_file()


def test_a_file_where_the_folder_belongs_is_refused(v):
    write(v.path, FOLDER, "a file")
    with pytest.raises(ProposalError, match="not a folder"):
        propose(v)
    assert (v.path / FOLDER).read_text() == "a file"


# --- never overwriting --------------------------------------------------------------------------
def test_same_title_twice_gives_two_files(v):
    a, b = propose(v, content="first\n"), propose(v, content="second\n")
    c = propose(v, content="third\n")
    assert [a.path, b.path, c.path] == [f"{FOLDER}/2026-11-30-tailscale-acl.md",
                                        f"{FOLDER}/2026-11-30-tailscale-acl-2.md",
                                        f"{FOLDER}/2026-11-30-tailscale-acl-3.md"]
    assert (v.path / a.path).read_text().endswith("\nfirst\n")
    assert (v.path / b.path).read_text().endswith("\nsecond\n")


def test_existing_file_is_untouched(v):
    mine = write(v.path, f"{FOLDER}/2026-11-30-tailscale-acl.md", "the human's own note\n")
    (v.path / FOLDER / "2026-11-30-tailscale-acl-2.md").mkdir()  # a folder takes a name too
    p = propose(v)
    assert p.path == f"{FOLDER}/2026-11-30-tailscale-acl-3.md"
    assert mine.read_text() == "the human's own note\n"


def test_existing_symlink_is_never_written_through(v, tmp_path):
    target = tmp_path / "victim.txt"
    target.write_text("secret")
    (v.path / FOLDER).mkdir()
    (v.path / FOLDER / "2026-11-30-tailscale-acl.md").symlink_to(target)
    p = propose(v)
    assert p.path.endswith("-2.md") and target.read_text() == "secret"


def test_failed_write_leaves_no_partial_file(v, monkeypatch):
    real_write = os.write

    def half(fd, data):
        real_write(fd, bytes(data[:10]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", half)
    with pytest.raises(ProposalError, match="No space left on device"):
        propose(v)
    monkeypatch.setattr(os, "write", real_write)
    assert files(v.path / FOLDER) == []


# --- the file -------------------------------------------------------------------------------------
def test_frontmatter_round_trip(v):
    title = "key: value # no comment - [x] 'q' \"dq\" --- ... &anchor *alias !!python/object"
    cites = ["vault:note.md:1-3", "other:a b/c.md:12-40", "--- not a fence", "..."]
    p = propose(v, title=title, content="Body text.\n", based_on=cites,
                now=dt.datetime(2026, 11, 30, 22, 0, tzinfo=dt.timezone(dt.timedelta(hours=-5))))
    assert p.path == f"{FOLDER}/2026-12-01-key-value-no-comment-x-q-dq-anchor-alias-python-object.md"
    text = (v.path / p.path).read_text()
    note = parse_note(p.path, text)
    assert note.warnings == []
    assert note.properties == {"title": title, "status": "proposed", "proposed_by": "claude-code",
                               "created": "2026-12-01T03:00:00Z", "based_on": cites}
    assert note.title == title and p.created == "2026-12-01T03:00:00Z" and p.based_on == cites
    assert text.split("---\n", 2)[2] == "\nBody text.\n"  # a blank line, then the content
    assert p.to_dict() == {"vault": "vault", "path": p.path, "title": title, "status": "proposed",
                           "proposed_by": "claude-code", "created": "2026-12-01T03:00:00Z",
                           "based_on": cites, "chars": len("Body text.\n")}


@pytest.mark.parametrize("title", ["null", "true", "123", "2026-11-30", "~", "- item", "'", "#tag",
                                   "a: b", "[x]", "{y}", "|", ">", "%", "@", "`", "  padded  "])
def test_yaml_lookalike_titles_stay_text(v, title):
    p = propose(v, title=title)
    assert parse_note(p.path, (v.path / p.path).read_text()).properties["title"] == title.strip()


def test_content_may_hold_unicode_line_separators_and_bidi(v):
    p = propose(v, content="RTL \u202bטקסט\u202c and \u2028 separator\n")
    assert "\u2028" in (v.path / p.path).read_text()


def test_agent_frontmatter_cannot_forge_status(v):
    content = "---\nstatus: reviewed\nproposed_by: the-human\ntitle: Forged\n---\n# Real body\n"
    p = propose(v, content=content)
    text = (v.path / p.path).read_text()
    note = parse_note(p.path, text)
    assert note.properties["status"] == "proposed" and note.properties["title"] == "Tailscale ACL"
    assert text.endswith("\n\n" + content)  # the agent's block stays body text
    assert list_proposals(v, FOLDER)[0].status == "proposed"


# --- listing and reading ------------------------------------------------------------------------
def test_list_newest_first_and_unreadable_frontmatter(v):
    for day in (3, 1, 2):
        propose(v, title=f"day {day}", now=NOW.replace(day=day))
    write(v.path, f"{FOLDER}/sub/hand.md", "---\ntitle: [unclosed\n---\nbody\n")
    write(v.path, f"{FOLDER}/notes.txt", "not markdown")
    write(v.path, f"{FOLDER}/.hidden.md", "hidden")
    write(v.path, f"{FOLDER}/.trash/old.md", "hidden")
    os.utime(v.path / FOLDER / "sub" / "hand.md", (0, 0))  # 1970: oldest
    got = list_proposals(v, FOLDER)
    assert [p.title for p in got] == ["day 3", "day 2", "day 1", "hand"]
    assert got[-1].status == "unknown" and got[-1].path == f"{FOLDER}/sub/hand.md"
    assert got[0].status == "proposed" and got[0].proposed_by == "claude-code"


def test_list_missing_folder_is_empty(v):
    assert list_proposals(v, FOLDER) == []


def test_read_by_name_forms(v):
    p = propose(v, title="sub", folder=FOLDER)
    name = p.path.rsplit("/", 1)[1]
    for ref in (name, name[:-3], p.path, f"{FOLDER}/{name}"):
        got, text = read_proposal(v, FOLDER, ref)
        assert got.path == p.path and text == (v.path / p.path).read_text()
    write(v.path, f"{FOLDER}/deep/x.md", "---\nstatus: proposed\n---\nx\n")
    assert read_proposal(v, FOLDER, "x.md")[0].path == f"{FOLDER}/deep/x.md"
    assert read_proposal(v, FOLDER, "deep/x.md")[0].path == f"{FOLDER}/deep/x.md"
    write(v.path, f"{FOLDER}/other/x.md", "y\n")
    with pytest.raises(ProposalError, match="2 proposals are named 'x.md'"):
        read_proposal(v, FOLDER, "x.md")


@pytest.mark.parametrize("name", ["../note.md", "note.md", f"{FOLDER}/../note.md", "/etc/passwd",
                                  str(Path("/tmp")), "..", ".", "a\\..\\note.md", "", ".hidden.md"])
def test_names_outside_the_folder_are_not_found(v, name):
    propose(v)
    with pytest.raises(ProposalError):
        read_proposal(v, FOLDER, name)
    with pytest.raises(ProposalError):
        reject(v, FOLDER, name)
    assert (v.path / "note.md").read_text() == "# A note\n\nmine, not the agent's\n"


# --- accept -------------------------------------------------------------------------------------
def _body(text: str) -> str:
    return text.split("\n---\n", 1)[1]


def test_accept_moves_with_status_reviewed_and_body_unchanged(v):
    content = "# Tailscale ACL\r\n\nAllow 10.0.0.0/24.\n\n---\nstatus: proposed\n---\ntrailing  \n\n"
    p = propose(v, content=content, based_on=["vault:note.md:1-3"])
    src = v.path / p.path
    # The human edits it before accepting: an extra key, a body line.
    text = src.read_text().replace("status: proposed\n", "status: proposed\nreviewer_note: ok\n", 1)
    src.write_text(text + "edited by the human\n")
    before = src.read_bytes()
    done = accept(v, FOLDER, p.path.rsplit("/", 1)[1], "home-lab/net",
                  now=dt.datetime(2026, 12, 2, 9, 0, tzinfo=dt.UTC))
    assert done.path == "home-lab/net/2026-11-30-tailscale-acl.md" and done.status == "reviewed"
    assert not src.exists() and files(v.path / FOLDER) == []
    after = (v.path / done.path).read_bytes()
    assert _body(after.decode()) == _body(before.decode())  # byte for byte
    props = parse_note(done.path, after.decode()).properties
    assert props == {"title": "Tailscale ACL", "status": "reviewed", "reviewer_note": "ok",
                     "proposed_by": "claude-code", "created": "2026-11-30T14:05:01Z",
                     "based_on": ["vault:note.md:1-3"], "reviewed": "2026-12-02T09:00:00Z"}
    assert list(props) == ["title", "status", "reviewer_note", "proposed_by", "created", "based_on",
                           "reviewed"]


def test_accept_to_the_top_level(v):
    p = propose(v)
    done = accept(v, FOLDER, p.path, ".")
    assert done.path == "2026-11-30-tailscale-acl.md" and (v.path / done.path).is_file()


def test_accept_refuses_an_existing_target(v):
    p = propose(v)
    theirs = write(v.path, "notes/2026-11-30-tailscale-acl.md", "already here\n")
    with pytest.raises(ProposalError, match="already exists"):
        accept(v, FOLDER, p.path, "notes")
    assert theirs.read_text() == "already here\n" and (v.path / p.path).is_file()


@pytest.mark.parametrize("to", [FOLDER, f"{FOLDER}/sub", "Agent_Learnings/x", "../elsewhere", "/tmp",
                                ".obsidian", "notes/../..", "", "a\\b"])
def test_accept_refuses_bad_targets(v, to):
    p = propose(v)
    with pytest.raises(ProposalError):
        accept(v, FOLDER, p.path, to)
    assert (v.path / p.path).is_file() and files(v.path) == sorted(["note.md", p.path])


def test_accept_refuses_a_target_through_a_symlink(v, tmp_path):
    p = propose(v)
    (tmp_path / "out").mkdir()
    (v.path / "notes").symlink_to(tmp_path / "out", target_is_directory=True)
    with pytest.raises(ProposalError, match="symlink"):
        accept(v, FOLDER, p.path, "notes")
    assert list((tmp_path / "out").iterdir()) == [] and (v.path / p.path).is_file()


def test_accept_refuses_symlinked_proposals(v):
    propose(v)
    (v.path / FOLDER / "link.md").symlink_to(v.path / "note.md")
    with pytest.raises(ProposalError, match="symlink"):
        accept(v, FOLDER, "link.md", "notes")
    with pytest.raises(ProposalError, match="symlink"):
        reject(v, FOLDER, "link.md")
    assert (v.path / "note.md").is_file() and (v.path / FOLDER / "link.md").is_symlink()


def test_accept_without_or_with_broken_frontmatter(v):
    write(v.path, f"{FOLDER}/plain.md", "just text\n")
    done = accept(v, FOLDER, "plain.md", "notes", now=NOW)
    text = (v.path / done.path).read_text()
    assert text.endswith("---\n\njust text\n")
    assert parse_note(done.path, text).properties == {"status": "reviewed", "reviewed": "2026-11-30T14:05:01Z"}
    write(v.path, f"{FOLDER}/broken.md", "---\ntitle: [unclosed\n---\nbody\n")
    with pytest.raises(ProposalError, match="cannot be parsed"):
        accept(v, FOLDER, "broken.md", "notes")
    assert (v.path / FOLDER / "broken.md").is_file()


# --- reject -------------------------------------------------------------------------------------
def test_reject_deletes_only_the_proposal(v):
    p, q = propose(v, title="one"), propose(v, title="two")
    gone = reject(v, FOLDER, p.path.rsplit("/", 1)[1])
    assert gone.path == p.path and gone.title == "one"
    assert files(v.path) == sorted(["note.md", q.path])


# --- the command ----------------------------------------------------------------------------------
@pytest.fixture
def home(hybrid_home, v):
    """A registered vault, not indexed (the commands run with --no-index)."""
    write(hybrid_home, "config.toml", f'[settings]\nembedder = "hash:64"\nproposals_folder = "{FOLDER}"\n')
    res = run("vault", "add", str(v.path), "--name", "vault")
    assert res.exit_code == 0, res.output
    return hybrid_home


@pytest.fixture
def indexed(home, v):
    res = run("index", "--vault", "vault")
    assert res.exit_code == 0, res.output
    return home


def run(*args):
    from hybrid.faces.cli.main import main
    return CliRunner().invoke(main, list(args))


def test_cli_list_show_accept_reindexes_and_search_finds_it(indexed, v):
    p = propose(v, title="Zanzibar routing", content="The zanzibarquux router forwards the lab subnet.\n")
    propose(v, title="Older", now=NOW.replace(day=1))
    assert run("index").exit_code == 0  # the owner's index holds the proposal at its old path
    res = run("proposals", "--json")
    assert res.exit_code == 0, res.output
    listed = json.loads(res.stdout)
    assert [d["title"] for d in listed] == ["Zanzibar routing", "Older"]
    res = run("proposals")
    assert res.exit_code == 0 and "Zanzibar routing" in res.stdout and "accept NAME --to" in res.stderr
    assert res.stdout.splitlines()[0].split() == ["path", "status", "proposed_by", "created", "title", "chars"]
    res = run("proposals", "show", p.path.rsplit("/", 1)[1])
    assert res.exit_code == 0 and res.stdout == (v.path / p.path).read_text()

    res = run("proposals", "accept", p.path.rsplit("/", 1)[1], "--to", "home-lab")
    assert res.exit_code == 0, res.output
    assert res.stdout.strip() == "vault:home-lab/2026-11-30-zanzibar-routing.md"
    assert "re-indexed vault" in res.stderr
    h = hybrid.open()
    hits = h.search("zanzibarquux", mode="lexical")
    assert [hit.path for hit in hits] == ["home-lab/2026-11-30-zanzibar-routing.md"]
    h.close()


def test_cli_reject_and_errors(home, v):
    p = propose(v)
    res = run("proposals", "reject", "../note.md", "--yes", "--no-index")
    assert res.exit_code == 1 and res.stderr.count("\n") == 1 and res.stderr.startswith("error: ")
    assert (v.path / "note.md").is_file()
    res = run("proposals", "accept", p.path, "--to", FOLDER + "/x", "--no-index")
    assert res.exit_code == 1 and "inside the proposals folder" in res.stderr
    res = run("proposals", "reject", p.path, "--yes", "--no-index")
    assert res.exit_code == 0, res.output
    assert "not re-indexed" in res.stderr and not (v.path / p.path).exists()
    res = run("proposals", "list", "--json")
    assert json.loads(res.stdout) == []


def test_cli_proposals_off(hybrid_home, v):
    write(hybrid_home, "config.toml", '[settings]\nembedder = "hash:64"\n')
    assert run("vault", "add", str(v.path), "--name", "vault").exit_code == 0
    for args in (["proposals"], ["proposals", "list", "--json"], ["proposals", "show", "x.md"]):
        res = run(*args)
        assert res.exit_code == 1 and res.stdout == ""
        assert res.stderr.count("\n") == 1 and "proposals are off (set proposals_folder" in res.stderr


def test_a_full_inbox_refuses_more(tmp_path, monkeypatch):
    from hybrid.app import proposals as mod
    vault = tmp_path / "v"
    vault.mkdir()
    v = Vault("v", vault, ["**/*.md"], [], "hash:8", tmp_path / "idx")
    monkeypatch.setattr(mod, "MAX_PENDING", 3)
    for i in range(3):
        mod.write_proposal(v, "inbox", f"note {i}", "text", proposed_by="agent")
    with pytest.raises(mod.ProposalError, match="inbox v:inbox/ is full \\(3 unreviewed\\)"):
        mod.write_proposal(v, "inbox", "one more", "text", proposed_by="agent")
    assert len(list((vault / "inbox").glob("*.md"))) == 3
