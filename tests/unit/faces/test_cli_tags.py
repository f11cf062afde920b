"""`hybrid tags` at the command line: suggest, list, accept, reject; review refuses without a
terminal; mistakes end in one error line; and the MCP tool propose_tags only queues."""
import json

import anyio
from click.testing import CliRunner
from helpers import indexed_vault
from mcp import Client

from hybrid.faces.cli.main import main
from hybrid.faces.mcp import build_server

KAFKA = "Kafka consumer lag, partitions, offsets and the broker."
NOTES = {"a.md": f"---\ntags: [kafka]\n---\n# A\n\n{KAFKA}\n", "b.md": f"---\ntags: [kafka, ops]\n---\n{KAFKA}\n",
         "new.md": f"# New\n\n{KAFKA}\n"}


def run(home, *args):
    return CliRunner().invoke(main, list(args), env={"HYBRID_HOME": str(home)}, catch_exceptions=False)


def test_suggest_accept_reject_list(tmp_path):
    indexed_vault(tmp_path, NOTES).close()
    home, note = tmp_path / "home", tmp_path / "vault" / "new.md"
    r = run(home, "tags", "suggest", "new.md", "--json")
    got = json.loads(r.stdout)[0]
    assert r.exit_code == 0 and got["suggestions"][0]["tag"] == "kafka"
    assert json.loads(run(home, "tags", "list", "--json").stdout)[0]["path"] == "new.md"
    r = run(home, "tags", "accept", "new.md", "kafka", "--no-index")
    assert r.exit_code == 0 and note.read_text().startswith("---\ntags:\n  - kafka\n---\n# New")
    r = run(home, "tags", "reject", "new.md", "ops")
    assert r.exit_code == 0 and "never suggested" in r.stderr
    assert "ops" not in run(home, "tags", "suggest", "new.md").stdout


def test_mistakes_are_one_line(tmp_path):
    indexed_vault(tmp_path, NOTES).close()
    home = tmp_path / "home"
    for args, says in ((("tags", "suggest", "nope.md"), "no such note"),
                       (("tags", "accept", "new.md", "zebra"), "not waiting for review"),
                       (("tags", "suggest"), "--all"),
                       (("tags", "suggest", "new.md", "--new-tags"), "--new-tags goes with --llm"),
                       (("tags", "review"), "hybrid tags accept")):
        r = run(home, *args)
        assert r.exit_code != 0 and says in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)


def test_mcp_propose_tags_only_queues(tmp_path):
    h = indexed_vault(tmp_path, NOTES, proposals_folder="inbox")
    before = (tmp_path / "vault" / "new.md").read_bytes()

    async def main_():
        async with Client(build_server(h)) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            res = await c.call_tool("propose_tags", {"path": "new.md", "tags": ["kafka"]})
            bad = await c.call_tool("propose_tags", {"path": "nope.md", "tags": ["kafka"]})
            return tools, res, bad
    tools, res, bad = anyio.run(main_)
    assert tools["propose_tags"].annotations.read_only_hint is False
    assert res.structured_content == {"queued": ["kafka"]} and bad.is_error
    assert (tmp_path / "vault" / "new.md").read_bytes() == before
    assert [s.by.split(":")[0] for s in h.tags.pending()[0][1].pending] == ["agent"]
    h.close()
