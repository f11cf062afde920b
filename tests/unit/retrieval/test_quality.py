"""Retrieval quality on the bundled sample vault with the real bundled model."""
import pytest
from helpers import ALL_STORES

pytestmark = pytest.mark.slow
STORES = ALL_STORES  # every test (through `sample`) runs against both stores

EXACT = {  # a verbatim identifier → the note it belongs to, which must rank first
    'pq: too many connections for role "forge_app"': "work/runbooks/DB Connection Exhaustion.md",
    "--advertise-routes": "home-lab/networking.md",
    "ERR_CONN_RESET": "work/runbooks/Upstream ERR_CONN_RESET.md",
    "IDEMPOTENCY_KEY_REUSED": "work/design/Idempotency Keys.md",
    "obsidian://open?vault=dana-vault&file=Home": "Home.md",
    "max.poll.interval.ms": "work/design/Order Events Pipeline.md",
    "K7QX2M": "journal/Lisbon trip.md",
    "tail4e2c1.ts.net": "home-lab/networking.md",
    "GOMEMLIMIT": "work/runbooks/Pod OOMKilled.md",
    "cmctl renew": "work/runbooks/TLS Certificate Expiry.md",
}
TYPOS = {
    "sourdugh hydration": "misc/Sourdough.md",
    "tailscael exit node": "home-lab/networking.md",
    "mortage refinance": "finance/Mortgage refinance.md",
    "kuberntes operators": "learning/Kubernetes operators.md",
}
PARAPHRASE = {
    "how much did the car charger installation cost": "home-lab/EV charger install.md",
    "what to do when the database runs out of connections": "work/runbooks/DB Connection Exhaustion.md",
    "rules for running schema changes without downtime": "work/design/Schema Migrations.md",
}


@pytest.mark.parametrize("query, path", EXACT.items())
@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
def test_exact_identifier_ranks_its_note_first(sample, query, path, mode):
    assert sample.search(query, mode=mode, top_k=5)[0].path == path


@pytest.mark.parametrize("query, path", TYPOS.items())
def test_one_typo_still_finds_the_note(sample, query, path):
    for mode in ("lexical", "hybrid"):
        assert path in [h.path for h in sample.search(query, mode=mode, top_k=3)], mode


@pytest.mark.parametrize("query, path", PARAPHRASE.items())
def test_paraphrase_finds_the_note(sample, query, path):
    assert sample.search(query, mode="hybrid", top_k=3)[0].path == path
    assert path in [h.path for h in sample.search(query, mode="vector", top_k=3)]


def test_section_hit_carries_heading_path_and_lines(sample):
    hit = sample.search("restic retention policy", top_k=1)[0]
    assert hit.path == "home-lab/backups.md"
    assert hit.heading_path[-1] == "Retention" and len(hit.heading_path) >= 2
    note = sample.get(f"{hit.path}:{hit.start_line}-{hit.end_line}", "sample")
    assert note.text.strip() == hit.text.strip()
    assert "--keep-daily 7" in note.text
    assert hit.lexical_rank and hit.vector_rank and hit.score > 0
    assert len(hit.snippet) <= 305


def test_filters_with_the_real_model(sample):
    hits = sample.search("breaker amps", folders=["home-lab"], top_k=5)
    assert hits and all(h.path.startswith("home-lab/") for h in hits)
    assert hits[0].path == "home-lab/EV charger install.md"
    hits = sample.search("retry policy", tags=["work"], top_k=10)
    assert hits and all("work" in h.tags or any(t.startswith("work/") for t in h.tags) for h in hits)


def test_hybrid_keeps_what_either_arm_ranks_first(sample):
    for q in list(EXACT) + list(PARAPHRASE):
        lex = sample.search(q, mode="lexical", top_k=1)
        vec = sample.search(q, mode="vector", top_k=1)
        top = [h.path for h in sample.search(q, mode="hybrid", top_k=5)]
        assert (lex and lex[0].path in top) or (vec and vec[0].path in top)
