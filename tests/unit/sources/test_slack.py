"""Slack exports (zip or folder) → one markdown document per channel day: listing, stamps,
rendering (threads, runs, mentions), and untrusted or broken input."""

import datetime as dt
import json
import os
import zipfile
from pathlib import Path

import pytest

from hybrid.core.errors import VaultError
from hybrid.indexing.chunk import HEADING_RE, Chunker
from hybrid.sources import slack
from hybrid.sources.markdown import parse_note
from hybrid.sources.slack import SlackExport

USERS = [
    {"id": "U01", "name": "alice", "real_name": "Alice Archer",
     "profile": {"display_name": "Alice", "real_name": "Alice Archer"}},
    {"id": "U02", "name": "bob", "profile": {"display_name": "", "real_name": "Bob Stone"}},
    {"id": "U03", "name": "carol", "real_name": "Carol King", "profile": {"display_name": ""}},
]
CHANNELS = [{"id": "C01", "name": "general", "created": 1700000000},
            {"id": "C02", "name": "random", "created": 1700000000}]
GROUPS = [{"id": "G01", "name": "secret-plans", "created": 1700000000}]
DMS = [{"id": "D01", "members": ["U01", "U02"]}]


def ts(day: int, hour: int, minute: int, micro: int = 100) -> str:
    stamp = dt.datetime(2024, 3, day, hour, minute, tzinfo=dt.UTC).timestamp()
    return f"{int(stamp)}.{micro:06d}"


PARENT = ts(5, 9, 20)
GENERAL_05 = [
    {"type": "message", "subtype": "channel_join", "user": "U03", "text": "<@U03> has joined the channel",
     "ts": ts(5, 9, 0)},
    {"type": "message", "user": "U01", "ts": ts(5, 9, 10),
     "text": "Morning <!here>, the deploy is at 10 &amp; the <https://ci.example.com/run/1|CI run> is green"},
    {"type": "message", "user": "U02", "ts": ts(5, 9, 12),
     "text": "<@U01> thanks, see <#C02|random> and <#C02> or mail <mailto:ops@example.com|ops@example.com>"},
    {"type": "message", "user": "U03", "ts": PARENT, "thread_ts": PARENT, "reply_count": 3,
     "text": "Should we roll back the release if the smoke tests fail today?"},
    {"type": "message", "user": "U01", "ts": ts(5, 9, 25), "thread_ts": PARENT, "parent_user_id": "U03",
     "text": "Yes, roll back &lt;immediately&gt; <https://runbook.example.com>"},
    {"type": "message", "subtype": "thread_broadcast", "user": "U02", "ts": ts(5, 9, 40), "thread_ts": PARENT,
     "text": "Agreed with <@U03>"},
    {"type": "message", "user": "U01", "ts": ts(5, 10, 30),
     "text": "# not a heading\nsecond line\n  ## also not\n```\ncode"},
    {"type": "message", "subtype": "bot_message", "username": "deploybot", "bot_id": "B01",
     "ts": ts(5, 10, 35), "text": "Deploy finished"},
    {"type": "message", "subtype": "file_share", "user": "U03", "ts": ts(5, 10, 40), "text": "Here are the notes",
     "files": [{"id": "F01", "name": "notes.pdf", "title": "Release notes"}]},
]
GENERAL_06 = [
    {"type": "message", "user": "U03", "ts": ts(6, 8, 0), "thread_ts": PARENT, "text": "Rolled back after all"},
    {"type": "message", "user": "U01", "ts": ts(6, 8, 5),
     "text": "<@U99> and <@U02|bobby> please check", "user_profile": {"real_name": "Alice Archer"}},
    {"type": "message", "subtype": "channel_leave", "user": "U02", "ts": ts(6, 8, 6), "text": "<@U02> has left"},
]
RANDOM_05 = [{"type": "message", "user": "U02", "ts": ts(5, 12, 0), "text": "Lunch?",
              "user_profile": {"display_name": "Bobby", "real_name": "Bob Stone"}}]
SECRET_07 = [{"type": "message", "user": "U01", "ts": ts(7, 7, 0), "text": "The plan <!channel>"}]
DM_05 = [{"type": "message", "user": "U02", "ts": ts(5, 13, 0), "text": "private words"}]

EXPORT = {
    "users.json": USERS, "channels.json": CHANNELS, "groups.json": GROUPS, "dms.json": DMS,
    "general/2024-03-05.json": GENERAL_05, "general/2024-03-06.json": GENERAL_06,
    "random/2024-03-05.json": RANDOM_05, "secret-plans/2024-03-07.json": SECRET_07,
    "D01/2024-03-05.json": DM_05,
}
PATHS = ["general/2024-03-05.slack", "general/2024-03-06.slack", "random/2024-03-05.slack",
         "secret-plans/2024-03-07.slack"]


def write_folder(root: Path, files: dict[str, object] = EXPORT) -> Path:
    for name, content in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content if isinstance(content, bytes) else json.dumps(content, indent=1).encode())
    return root


def write_zip(path: Path, files: dict[str, object] = EXPORT, prefix: str = "") -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, content in files.items():
            data = content if isinstance(content, bytes) else json.dumps(content, indent=1).encode()
            zf.writestr(prefix + name, data)
    return path


@pytest.fixture
def folder(tmp_path):
    return write_folder(tmp_path / "export")


@pytest.fixture
def zipped(tmp_path):
    return write_zip(tmp_path / "export.zip")


def texts(export: SlackExport) -> dict[str, str]:
    return {d.path: d.load() for d in export.documents()}


def headings(text: str) -> list[str]:
    return [line for line in text.split("\n") if HEADING_RE.match(line)]


def test_documents_one_per_channel_day_sorted(folder):
    export = SlackExport(folder)
    docs = export.documents()
    assert [d.path for d in docs] == PATHS
    assert export.warnings == []
    by_path = {d.path: d for d in docs}
    assert by_path["general/2024-03-05.slack"].size == (folder / "general/2024-03-05.json").stat().st_size
    assert all(0 <= d.stamp < 2**63 for d in docs)
    assert len({d.stamp for d in docs}) == len(docs)


def test_stamps_follow_the_day_file_and_users(folder):
    before = {d.path: d.stamp for d in SlackExport(folder).documents()}
    assert before == {d.path: d.stamp for d in SlackExport(folder).documents()}
    day = folder / "random/2024-03-05.json"
    day.write_text(json.dumps(RANDOM_05 + [{"type": "message", "user": "U01", "ts": ts(5, 12, 5), "text": "Yes"}]))
    after = {d.path: d.stamp for d in SlackExport(folder).documents()}
    changed = {p for p in PATHS if before[p] != after[p]}
    assert changed == {"random/2024-03-05.slack"}
    (folder / "users.json").write_text(json.dumps(USERS[:2], indent=2))
    renamed = {d.path: d.stamp for d in SlackExport(folder).documents()}
    assert all(renamed[p] != after[p] for p in PATHS)


def test_zip_stamps_follow_member_content(tmp_path):
    first = {d.path: d.stamp for d in SlackExport(write_zip(tmp_path / "a.zip")).documents()}
    assert first == {d.path: d.stamp for d in SlackExport(tmp_path / "a.zip").documents()}
    edited = dict(EXPORT, **{"general/2024-03-06.json": GENERAL_06[:1]})
    second = {d.path: d.stamp for d in SlackExport(write_zip(tmp_path / "b.zip", edited)).documents()}
    assert {p for p in PATHS if first[p] != second[p]} == {"general/2024-03-06.slack"}
    edited = dict(EXPORT, **{"channels.json": CHANNELS + [{"id": "C09", "name": "new"}]})
    third = {d.path: d.stamp for d in SlackExport(write_zip(tmp_path / "c.zip", edited)).documents()}
    assert all(first[p] != third[p] for p in PATHS)


def test_render_day_with_thread_and_runs(folder):
    text = texts(SlackExport(folder))["general/2024-03-05.slack"]
    note = parse_note("general/2024-03-05.slack", text)
    assert note.warnings == []
    assert note.title == "#general 2024-03-05"
    assert note.created == "2024-03-05" and note.updated == "2024-03-05"
    assert note.properties["channel"] == "general"
    assert note.properties["authors"] == ["Alice", "Bob Stone", "Carol King", "deploybot"]
    assert headings(text) == [
        "# #general 2024-03-05",
        "## 09:10–09:12 Alice: Morning @here, the deploy is at 10 & …",
        "## 09:20 Carol King: Should we roll back the release if the …",
        "## 10:30–10:40 Alice: # not a heading second line ## also …",
    ]
    body = "\n".join(note.lines[note.body_start - 1:])
    thread = body.split("## 09:20 ")[1].split("\n## ")[0]
    assert thread.index("**Carol King** (09:20): Should we") < thread.index("**Alice** (09:25): Yes, roll back") \
        < thread.index("**Bob Stone** (09:40): Agreed with @Carol King")
    assert "\n\n**Alice** (09:25)" in thread
    assert "the deploy is at 10 & the CI run (https://ci.example.com/run/1) is green" in body
    assert "@Alice thanks, see #random and #random or mail ops@example.com" in body
    assert "Yes, roll back <immediately> https://runbook.example.com" in body
    assert "**deploybot** (10:35): Deploy finished" in body
    assert "**Carol King** (10:40): Here are the notes [file: Release notes]" in body
    assert "has joined" not in text and "<@" not in text and "&amp;" not in text
    assert "**Alice** (10:30): # not a heading\nsecond line\n  \\## also not\n\\```\ncode" in body


def test_render_chunks_along_conversations(folder):
    text = texts(SlackExport(folder))["general/2024-03-05.slack"]
    note = parse_note("general/2024-03-05.slack", text)
    chunker = Chunker(lambda texts: [len(t.split()) for t in texts], 254, 200, 32, True)
    paths = [c.heading_path for c in chunker.chunk(note)]
    assert [p[-1] for p in paths] == [
        "09:10–09:12 Alice: Morning @here, the deploy is at 10 & …",
        "09:20 Carol King: Should we roll back the release if the …",
        "10:30–10:40 Alice: # not a heading second line ## also …",
    ]


def test_thread_continued_next_day_and_unknown_users(folder):
    export = SlackExport(folder)
    docs = texts(export)
    text = docs["general/2024-03-06.slack"]
    assert headings(text) == ["# #general 2024-03-06", "## 08:00 thread continued: Rolled back after all",
                              "## 08:05 Alice: @U99 and @bobby please check"]
    assert "has left" not in text
    assert parse_note("x.slack", docs["random/2024-03-05.slack"]).properties["authors"] == ["Bob Stone"]
    assert "**Alice** (07:00): The plan @channel" in docs["secret-plans/2024-03-07.slack"]
    assert export.render("general", "2024-03-06") == text
    with pytest.raises(ValueError, match="no day file"):
        export.render("general", "2024-03-09")


def test_zip_and_folder_give_the_same_documents(folder, zipped, tmp_path):
    from_folder = texts(SlackExport(folder))
    assert texts(SlackExport(zipped)) == from_folder
    nested = write_zip(tmp_path / "nested.zip", prefix="slack-export/")
    assert texts(SlackExport(nested)) == from_folder
    assert [d.size for d in SlackExport(zipped).documents()] == [d.size for d in SlackExport(folder).documents()]
    with SlackExport(zipped) as export:
        doc = export.documents()[0]
        assert doc.load() == from_folder[doc.path]
    with pytest.raises(ValueError):
        doc.load()


def test_missing_path(tmp_path):
    with pytest.raises(VaultError) as err:
        SlackExport(tmp_path / "nowhere.zip")
    assert str(tmp_path / "nowhere.zip") in str(err.value) and "\n" not in str(err.value)


def test_not_a_zip(tmp_path):
    bad = tmp_path / "export.zip"
    bad.write_text("this is not a zip archive\n")
    with pytest.raises(VaultError) as err:
        SlackExport(bad)
    assert str(bad) in str(err.value) and "zip" in str(err.value) and "\n" not in str(err.value)


def test_truncated_zip(zipped, tmp_path):
    cut = tmp_path / "cut.zip"
    cut.write_bytes(zipped.read_bytes()[:200])
    with pytest.raises(VaultError, match="not a readable zip file"):
        SlackExport(cut)


def test_folder_that_is_no_export(tmp_path):
    other = tmp_path / "notes"
    (other / "sub").mkdir(parents=True)
    (other / "readme.md").write_text("# hello\n")
    (other / "sub" / "data.json").write_text("[]")
    with pytest.raises(VaultError) as err:
        SlackExport(other)
    assert str(other) in str(err.value) and "not a Slack export" in str(err.value)
    assert "\n" not in str(err.value)


def test_unsafe_zip_members_ignored(tmp_path):
    evil = dict(EXPORT)
    evil["../evil/2024-01-01.json"] = GENERAL_05
    evil["/abs/2024-01-02.json"] = GENERAL_05
    evil["win\\2024-01-03.json"] = GENERAL_05
    work = tmp_path / "work"
    work.mkdir()
    path = write_zip(work / "evil.zip", evil)
    export = SlackExport(path)
    assert [d.path for d in export.documents()] == PATHS
    assert len(export.warnings) == 3 and all("unsafe name" in w for w in export.warnings)
    assert any("../evil/2024-01-01.json" in w for w in export.warnings)
    texts(export)
    assert not (tmp_path / "evil").exists() and not (work / "evil").exists()
    assert sorted(p.name for p in work.iterdir()) == ["evil.zip"]


def test_corrupt_day_json(tmp_path):
    files = dict(EXPORT, **{"general/2024-03-06.json": b'[{"type": "message", "text": "cut off',
                            "random/2024-03-05.json": {"not": "a list"}})
    for export in (SlackExport(write_folder(tmp_path / "f", files)), SlackExport(write_zip(tmp_path / "z.zip", files))):
        docs = {d.path: d for d in export.documents()}
        assert list(docs) == PATHS
        with pytest.raises(ValueError) as err:
            docs["general/2024-03-06.slack"].load()
        assert "general/2024-03-06.json: not valid JSON" in str(err.value) and "\n" not in str(err.value)
        with pytest.raises(ValueError, match="not a list of messages"):
            docs["random/2024-03-05.slack"].load()
        assert "# #general 2024-03-05" in docs["general/2024-03-05.slack"].load()


def test_missing_users_json_shows_ids(tmp_path):
    files = {k: v for k, v in EXPORT.items() if k != "users.json"}
    export = SlackExport(write_folder(tmp_path / "f", files))
    assert len(export.warnings) == 1 and "users.json" in export.warnings[0]
    docs = texts(export)
    assert "**U01** (09:10): Morning @here" in docs["general/2024-03-05.slack"]
    assert "Agreed with @U03" in docs["general/2024-03-05.slack"]
    assert "**Alice Archer** (08:05): @U99 and @bobby" in docs["general/2024-03-06.slack"]
    assert "**Bobby** (12:00): Lunch?" in docs["random/2024-03-05.slack"]


def test_direct_messages_and_unlisted_folders_left_out(tmp_path):
    files = dict(EXPORT, **{"stray/2024-03-05.json": RANDOM_05})
    export = SlackExport(write_folder(tmp_path / "f", files))
    paths = [d.path for d in export.documents()]
    assert paths == PATHS and not any(p.startswith("D01/") for p in paths)
    assert len(export.warnings) == 1 and "stray" in export.warnings[0]
    bare = {k: v for k, v in EXPORT.items() if k not in ("channels.json", "groups.json")}
    assert [d.path for d in SlackExport(write_zip(tmp_path / "bare.zip", bare)).documents()] == PATHS


def test_day_files_capped_in_size_and_number(folder, monkeypatch):
    monkeypatch.setattr(slack, "MAX_DAY_BYTES", (folder / "random/2024-03-05.json").stat().st_size)
    export = SlackExport(folder)
    assert [d.path for d in export.documents()] == ["random/2024-03-05.slack", "secret-plans/2024-03-07.slack"]
    assert len(export.warnings) == 2 and all("skipped" in w for w in export.warnings)
    monkeypatch.undo()
    monkeypatch.setattr(slack, "MAX_DAY_FILES", 2)
    export = SlackExport(folder)
    assert [d.path for d in export.documents()] == PATHS[:2]
    assert export.warnings == [f"{folder}: more than 2 channel day files; the rest are skipped"]


def test_channel_names_made_safe(tmp_path):
    files = {"channels.json": [{"id": "C05", "name": "ops\x07team"}], "ops\x07team/2024-03-05.json": RANDOM_05}
    with zipfile.ZipFile(tmp_path / "odd.zip", "w") as zf:
        for name, content in files.items():
            zf.writestr(name, json.dumps(content))
    assert [d.path for d in SlackExport(tmp_path / "odd.zip").documents()] == ["opsteam/2024-03-05.slack"]
    assert os.listdir(tmp_path) == ["odd.zip"]
