"""The search page's tag review panel: its routes serve the owner's session only, list what
waits, accept (the note's front block written, a re-index started) and reject, with one-line
errors for bad input and for a file changed since the suggestion."""
import pytest
from helpers import indexed_vault
from starlette.testclient import TestClient

from hybrid.faces.http import build_app

PORT, OWNER = 8765, "KEY"
KAFKA = "Kafka consumer lag, partitions, offsets and the broker."
NOTES = {"a.md": f"---\ntags: [kafka]\n---\n# A\n\n{KAFKA}\n", "new.md": f"# New\n\n{KAFKA}\n"}


@pytest.fixture
def setup(tmp_path):
    h = indexed_vault(tmp_path, NOTES)
    client = TestClient(build_app(h, port=PORT, owner_key=OWNER), base_url=f"http://127.0.0.1:{PORT}")
    yield h, client, tmp_path / "vault" / "new.md"
    h.close()


def sign_in(client):
    r = client.post("/ui/api/ticket", headers={"X-Hybrid-Owner": OWNER}, json={})
    client.get(r.json()["path"], follow_redirects=False)


def test_only_a_signed_in_owner_reaches_the_panel(setup):
    _, client, _ = setup
    assert client.get("/ui/api/tags").status_code == 401
    assert client.post("/ui/api/tags/accept", json={"note": "new.md", "tags": ["kafka"]}).status_code == 401


def test_suggest_accept_and_reject_through_the_page(setup):
    h, client, note = setup
    sign_in(client)
    r = client.post("/ui/api/tags/suggest", json={"note": "new.md"})
    assert r.status_code == 200 and r.json()["notes"][0]["pending"][0]["tag"] == "kafka"
    before = note.read_text()
    r = client.post("/ui/api/tags/accept", json={"vault": "v", "note": "new.md", "tags": ["kafka"]})
    assert r.status_code == 200 and r.json()["accepted"]["added"] == ["kafka"]
    assert note.read_text() == "---\ntags:\n  - kafka\n---\n" + before
    r = client.post("/ui/api/tags/reject", json={"vault": "v", "note": "new.md", "tags": ["other"]})
    assert r.status_code == 200 and r.json()["rejected"] == ["other"]


def test_bad_input_is_one_line(setup):
    h, client, note = setup
    sign_in(client)
    for body, status in (({"tags": ["x"]}, 400), ({"note": "new.md", "tags": "kafka"}, 400),
                         ({"note": "nope.md"}, 404)):
        path = "/ui/api/tags/accept" if "tags" in body else "/ui/api/tags/suggest"
        r = client.post(path, json=body)
        assert r.status_code == status and "\n" not in r.json()["error"], (body, r.text)
    client.post("/ui/api/tags/suggest", json={"note": "new.md"})
    note.write_text(note.read_text() + "edited\n")
    r = client.post("/ui/api/tags/accept", json={"note": "new.md", "tags": ["kafka"]})
    assert r.status_code == 422 and "changed on disk" in r.json()["error"]
