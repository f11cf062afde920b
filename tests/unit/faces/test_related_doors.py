"""Related notes through the HTTP doors (issue #30, part 1): ``POST /api/related`` (the agent
view and an audit record unless the owner key is sent) and the page's ``POST /ui/api/related``,
plus ``hybrid related`` on the command line. In-process (Starlette's TestClient, click's runner),
real index of the conftest vault with the hash embedder."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from helpers import write
from starlette.testclient import TestClient

from hybrid.app.audit import audit_path
from hybrid.faces.cli.main import main
from hybrid.faces.http import build_app

OWNER = "KEY"
BASE = "http://127.0.0.1:8765"


@pytest.fixture
def h(fake, vault):
    write(vault, "work/billing.md", "---\ntags: [work]\n---\n# Billing\n\nBilling reads the orders topic. "
                                    "See [[orders]].\n")
    write(vault, "work/secret.md", "---\nprivate: true\n---\n# Secret\n\nOrders of the board. [[orders]]\n")
    fake.add_vault(vault, "vault")
    assert fake.index()[0].error is None
    yield fake
    fake.close()


@pytest.fixture
def client(h):
    return TestClient(build_app(h, port=8765, owner_key=OWNER), base_url=BASE)


def audit_records(h) -> list[dict]:
    path = audit_path(h.config.data)
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def test_api_related_serves_agents_the_agent_view_and_audits(h, client):
    r = client.post("/api/related", json={"note": "work/orders.md", "top_k": 5})
    assert r.status_code == 200, r.text
    paths = [n["path"] for n in r.json()["notes"]]
    assert "work/billing.md" in paths and "work/secret.md" not in paths
    billing = next(n for n in r.json()["notes"] if n["path"] == "work/billing.md")
    assert billing["links"] == ["linked from"] and billing["shared_tags"] == ["work"]
    record = audit_records(h)[-1]
    assert record["tool"] == "api/related" and record["args"]["note"] == "work/orders.md"
    assert record["returned"] == [n["citation"] for n in r.json()["notes"]]
    owner = client.post("/api/related", json={"note": "work/orders.md", "top_k": 5}, headers={"X-Hybrid-Owner": OWNER})
    assert "work/secret.md" in [n["path"] for n in owner.json()["notes"]]
    assert len(audit_records(h)) == 1  # the owner's call is not an agent's


def test_api_related_bad_input(h, client):
    hidden = client.post("/api/related", json={"note": "work/secret.md"})
    absent = client.post("/api/related", json={"note": "work/nothing.md"})
    assert hidden.status_code == absent.status_code == 422
    assert hidden.json()["error"] == absent.json()["error"].replace("nothing", "secret")
    for body, status in (({}, 400), ({"note": "work/orders.md", "top_k": 0}, 400),
                         ({"note": "work/orders.md", "top_k": "5"}, 400), ([1], 400)):
        r = client.post("/api/related", json=body)
        assert r.status_code == status and "\n" not in r.json()["error"], (body, r.text)
    assert client.post("/api/related", content=b"note=x", headers={"Content-Type": "text/plain"}).status_code == 415
    assert all(rec["error"] for rec in audit_records(h))  # refused calls are on record too


def test_the_page_route_serves_the_owner(h, client):
    assert client.post("/ui/api/related", json={"note": "work/orders.md"}).status_code == 401
    t = client.post("/ui/api/ticket", headers={"X-Hybrid-Owner": OWNER}, json={}).json()["path"]
    client.get(t, follow_redirects=False)
    r = client.post("/ui/api/related", json={"note": "work/orders.md", "vault": "vault"})
    assert r.status_code == 200 and "work/secret.md" in [n["path"] for n in r.json()["notes"]]
    missing = client.post("/ui/api/related", json={"note": "work/nothing.md", "vault": "vault"})
    assert missing.status_code == 404 and "nothing" in missing.json()["error"]


def test_cli(h):
    run = CliRunner().invoke(main, ["related", "orders", "--json"])
    assert run.exit_code == 0, run.output
    data = json.loads(run.stdout)
    assert data["path"] == "work/orders.md" and "work/billing.md" in [n["path"] for n in data["notes"]]
    text = CliRunner().invoke(main, ["related", "[[orders]]", "-n", "2"])
    assert text.exit_code == 0 and "1. " in text.stdout and "· it links to the note" in text.stdout
    agent = CliRunner().invoke(main, ["related", "work/orders.md", "--as-agent", "--json"])
    assert "work/secret.md" not in agent.stdout
    bad = CliRunner().invoke(main, ["related", "no such note"])
    assert bad.exit_code == 1 and bad.stderr.startswith("error: ") and bad.stderr.count("\n") == 1
