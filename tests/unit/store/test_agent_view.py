"""Adversarial tests of the agent view (hybrid.store.agent.view): an agent searches and reads a vault
in which the private notes were never written and every secret is redacted.

The strongest check is an equivalence: a vault with private notes, searched as an agent, must
answer exactly as a copy of that vault without them, searched as its owner: same citations,
ranks and scores, in every mode, for queries aimed at the private content (unique words, their
misspellings, phrases, prefixes, path and tag filters, exclusions, identifiers, common words).

Vaults are built once per module in tmp_path_factory; the hash embedder is used everywhere but
in the real-model tests (marked slow).
"""
from __future__ import annotations

import math
import os
import re

import pytest
from helpers import write
from secrets_fixtures import fake_secrets

import hybrid
from hybrid.app.reader import REF_RE
from hybrid.core.errors import HybridError, PathRefused
from hybrid.core.store_url import kind_of
from hybrid.store.agent.redact import REDACTED

SETTINGS = dict(embedder="hash:64", agent_exclude=["journal/**"], proposals_folder="agent_learnings")

# --- the vault ---------------------------------------------------------------------------------
PUBLIC = {
    "work/runbooks/db-failover.md": "---\ntags: [work, runbook]\n---\n# Database failover\n\n"
        "When the primary postgres node stops answering, promote the replica with `patronictl "
        "failover`.\nCheck the replication lag first; the morning on-call engineer owns it.\n\n"
        "## After the failover\n\nOpen an incident, tell the bank integration team that payments "
        "were paused, and write the timeline in the incident journal.\n",
    "work/runbooks/kafka-lag.md": "---\ntags: [work, runbook, kafka]\n---\n# Kafka consumer lag\n\n"
        "If `orders-created` lag grows past 10k, scale the consumer group.\n"
        "Look at max.poll.interval.ms before adding pods.\n",
    "work/runbooks/tls-renewal.md": "# TLS certificate renewal\n\nRun `cmctl renew` for the "
        "ingress certificate. The private key stays in the cluster secret store; never copy it "
        "into a note.\n",
    "work/runbooks/disk-full.md": "# Disk full on the build box\n\nClear docker images with "
        "`docker system prune`. Check the journal size with `journalctl --disk-usage` and vacuum "
        "it.\n",
    "work/design/orders-api.md": "---\ntags: [work, design]\n---\n# Orders API\n\nIdempotency "
        "keys expire after 24 hours. Error IDEMPOTENCY_KEY_REUSED means a client retried with "
        "another body.\n\n## Pagination\n\nCursor based; the cursor encodes the last order id.\n",
    "work/design/caching.md": "# Caching strategy\n\nRead-through cache in front of the account "
        "service, TTL five minutes. The cache key holds the account id and the currency.\n",
    "work/meetings/2026-01-05 standup.md": "# Standup 2026-01-05\n\n- Priya: finishing the "
        "orders API pagination.\n- Tom: doctor appointment in the morning, back after lunch.\n"
        "- Blocked on the bank sandbox credentials from the payments team.\n",
    "work/meetings/retro.md": "# Sprint retro\n\nWent well: the failover drill. Went badly: "
        "flaky integration tests. Action: a weekly journal club to read one paper.\n",
    "work/journal-club.md": "---\ntags: [work, reading]\n---\n# Journal club\n\nEvery Thursday "
        "we read one paper. This week: the Raft consensus paper. Next: Dynamo.\n",
    "work/people/onboarding.md": "# Onboarding a new engineer\n\nLaptop, accounts, the on-call "
        "rota, and a first small ticket. Pair on the first deploy.\n",
    "recipes/sourdough.md": "---\ntags: [cooking]\n---\n# Sourdough\n\nFeed the starter every "
        "morning. 75% hydration, 2% salt, bulk ferment until it rises by half.\n",
    "recipes/ramen.md": "# Shoyu ramen\n\nSimmer the broth for six hours with kombu and dried "
        "shiitake. Soft-boiled eggs marinate overnight in soy and mirin.\n",
    "recipes/lentil-soup.md": "# Lentil soup\n\nRed lentils, cumin, a lemon at the end. Good "
        "for a cold morning; freezes well.\n",
    "recipes/banana-bread.md": "# Banana bread\n\nThree overripe bananas, brown butter, "
        "walnuts. Bake 55 minutes at 175 degrees.\n",
    "home/garden.md": "# Garden\n\nTomatoes need six hours of sun. Water deeply twice a week "
        "in the morning.\n",
    "home/network.md": "---\ntags: [home-lab]\n---\n# Home network\n\nRun `tailscale up "
        "--advertise-routes=10.0.0.0/24`. The private subnet is 10.0.0.0/24.\n",
    "home/car.md": "# Car\n\nService every 15,000 km. Tyres rotated in spring. The insurance "
        "renewal letter goes to the home address.\n",
    "home/insurance.md": "# Home insurance\n\nPolicy renews in March; compare quotes. The "
        "premium is paid from the joint bank account by direct debit.\n",
    "home/moving.md": "# Moving checklist\n\nChange the address at the bank, the doctor's "
        "surgery, the pharmacy and the tax office. Book the van two weeks ahead.\n",
    "finance/budget.md": "---\ntags: [finance]\n---\n# Budget\n\nRent, groceries, savings: "
        "20% of income goes to the savings account on payday.\n",
    "finance/taxes.md": "---\ntags: [finance]\n---\n# Taxes\n\nFile before the end of January. "
        "Keep receipts for the home office and the health insurance statement.\n",
    "health/running.md": "---\ntags: [health]\n---\n# Running\n\nThree runs a week; long run on "
        "Sunday morning. The doctor said ibuprofen dosage must stay low after the knee injury.\n",
    "health/sleep.md": "# Sleep\n\nNo screens after ten, the room cool and dark. Magnesium "
        "before bed helps some people; ask the pharmacy.\n",
    "health/pharmacy-hours.md": "# Pharmacy hours\n\nThe pharmacy on Elm Street opens at 8 in "
        "the morning and closes at 7. Prescriptions can be collected at the side counter.\n",
    "learning/rust.md": "---\ntags: [learning]\n---\n# Rust\n\nOwnership, borrowing, lifetimes. "
        "The borrow checker rejects two mutable references.\n",
    "learning/kubernetes.md": "# Kubernetes operators\n\nAn operator is a controller with "
        "domain knowledge; reconcile loops converge on the desired state.\n",
    "learning/private-cloud.md": "---\ntags: [learning, private-cloud]\n---\n# Private cloud\n\n"
        "OpenStack versus Proxmox for a private cloud at home. Private networks, public "
        "floating IPs.\n",
    "learning/statistics.md": "# Statistics\n\nA confidence interval is not the probability "
        "that the parameter lies inside it. Bootstrap when in doubt.\n",
    "reading/books.md": "# Books\n\n- Piranesi\n- The Dispossessed\n- A Psalm for the Wild-Built"
        "\n\nA reading journal would help remember them.\n",
    "travel/lisbon.md": "# Lisbon trip\n\nBooking code K7QX2M. Tram 28 early in the morning, "
        "pastel de nata in Belem.\n",
    "travel/packing.md": "# Packing list\n\nPassport, chargers, medication for the trip, a "
        "rain jacket.\n",
    "projects/3d-printer.md": "# 3D printer\n\nPLA at 205 degrees, bed at 60. Level the bed "
        "with a sheet of paper.\n",
    "projects/hybrid-search.md": "# Hybrid search\n\nBM25 plus vectors, fused with RRF. The "
        "private notes must never reach an agent.\n",
    "notes/not-private.md": "---\nprivate: false\ntags: [misc]\n---\n# Not private\n\nThis note "
        "says private: false, so agents see it. It talks about a family dinner.\n",
    "agent_ideas/accepted.md": "---\nstatus: accepted\nproposed_by: claude\n---\n# Accepted tip\n"
        "\nRestart the consumer group after changing partitions (accepted proposal).\n",
}

PRIVATE = {  # hidden from agents: path → why
    "journal/2026-01-03.md": "# 2026-01-03\n\nSaw Dr. Imelda Quarrington at the Saltmarsh "
        "clinic this morning. She raised the zorvatrex dosage to 40 mg; prescription RX-88213.\n"
        "Felt anxious about the appointment all week.\n",
    "journal/2026-01-10.md": "# 2026-01-10\n\nFenwick Mutual called about the overdraft on "
        "account acct_7731_fenwick. Moving to 14 Larkspur Crescent, Dunmore in March.\n",
    "journal/2025/12-31.md": "# New year's eve\n\nResolutions: fewer late nights, call cousin "
        "Barnaby Oyelaran-Whitcombe more often, finish the Quarrington referral paperwork.\n",
    "health/medication.md": "---\ntags: [private/health]\n---\n# Medication\n\nZorvatrex-XR "
        "20 mg every morning with food. Refill code ZX-4471-Q at the pharmacy. Side effects: "
        "vertigo and a metallic taste (vesperine aftertaste).\n",
    "finance/fenwick.md": "# Fenwick Mutual\n\n#private\n\nSavings account at Fenwick Mutual, "
        "branch in Dunmore. PIN hint: quillfeather. The bank manager is Ottoline Grabowski.\n",
    "people/family.md": "---\nprivate: true\n---\n# Family\n\nCousin Barnaby Oyelaran-Whitcombe "
        "lives at 14 Larkspur Crescent. Aunt Morwenna's birthday dinner is in May.\n",
    "home/therapy.md": "---\ntags: [Private]\n---\n# Therapy\n\nSessions with Ottoline on "
        "Tuesdays; the nightjar protocol for bad nights.\n",
    "agent_learnings/2026-02-01-kafka-tip.md": "---\nstatus: proposed\nproposed_by: claude\n---\n"
        "# Kafka tip\n\nThe glimmerwick setting doubles consumer throughput (unreviewed).\n",
    "work/inbox/agent-note.md": "---\nstatus: proposed\nproposed_by: claude\n---\n# Agent note\n\n"
        "Use the trellisbound cache for account lookups in the morning batch.\n",
}
PRIVATE_LINKS = {  # symlinks inside the vault → the private note they point at
    "links/today.md": "../journal/2026-01-03.md",
    "links/meds.md": "../health/medication.md",
}
HIDDEN = set(PRIVATE) | set(PRIVATE_LINKS)
PRIVATE_WORDS = ["zorvatrex", "Quarrington", "Imelda", "Saltmarsh", "RX-88213", "Fenwick", "Mutual",
                 "acct_7731_fenwick", "Larkspur", "Dunmore", "Oyelaran", "Whitcombe", "Barnaby",
                 "vesperine", "ZX-4471-Q", "quillfeather", "Ottoline", "Grabowski", "Morwenna",
                 "nightjar", "glimmerwick", "trellisbound", "overdraft", "vertigo", "Zorvatrex-XR"]

CASES = {c["name"]: c for c in fake_secrets()}
SECRET_CASES = ["aws-access-key-id", "github-pat", "slack-bot-token", "stripe-live", "npm-token",
                "huggingface", "postgres-url", "gitlab-pat", "google-api-key", "pem-ec-private-key"]
SECRET_NOTES = {
    "setup/ci.md": "# CI setup\n\nThe pipeline needs these credentials.\n\n"
        + "\n\n".join(CASES[n]["line"] for n in SECRET_CASES[:6]) + "\n\nRotate them every quarter.\n",
    "setup/services.md": "# Services\n\n"
        + "\n\n".join(CASES[n]["line"] for n in SECRET_CASES[6:]) + "\n\nThat's all the services.\n",
    "home/router.md": CASES["frontmatter-password"]["line"] + "# Router\n\nThe router admin page "
        "lives at 192.168.1.1.\n",
    # secrets where text is not body: the title, a heading, an alias
    "setup/headings.md": f"---\naliases: [\"{CASES['openai-legacy']['secret']}\"]\n---\n"
        f"# Token {CASES['sendgrid']['secret']}\n\nThe deploy bot's token is in the title.\n\n"
        f"## Webhook {CASES['slack-webhook']['secret']}\n\nAlerts go to this webhook.\n",
}
SECRETS = ([CASES[n]["secret"] for n in SECRET_CASES]
           + [CASES[n]["secret"] for n in ("frontmatter-password", "openai-legacy", "sendgrid", "slack-webhook")])


def _check_fixture_data():
    """The premise of every test: no unique private word appears in any visible note."""
    visible = "\n".join(list(PUBLIC.values()) + list(SECRET_NOTES.values())).lower()
    for w in PRIVATE_WORDS:
        assert w.lower() not in visible, w
        assert any(w.lower() in t.lower() for t in PRIVATE.values()), w
    assert not set(PUBLIC) & set(PRIVATE)


_check_fixture_data()

# --- queries -----------------------------------------------------------------------------------
QUERIES = [
    # unique private words and names
    "zorvatrex", "Zorvatrex-XR", "Imelda Quarrington", "Quarrington", "Fenwick Mutual", "Fenwick",
    "Larkspur Crescent", "Dunmore", "Barnaby Oyelaran-Whitcombe", "quillfeather", "Ottoline Grabowski",
    "vesperine", "nightjar protocol", "glimmerwick", "trellisbound cache", "Morwenna birthday",
    "Saltmarsh clinic", "overdraft",
    # misspellings: typo repair must not reveal the private vocabulary
    "zorvatrx", "zorvatrexx", "quarington", "fenwik mutual", "larkspurr", "glimerwick", "trellisbond",
    "quilfeather", "vesperin",
    # exact phrases
    '"zorvatrex dosage"', '"Fenwick Mutual"', '"14 Larkspur Crescent"', '"the nightjar protocol"',
    '"every morning"', '"bank account"', '"doctor appointment"',
    # paraphrases and questions about the private content
    "what medication do I take every morning", "which doctor raised my dosage", "where is my savings account",
    "who is my bank manager", "where does my cousin live", "therapy sessions on tuesdays",
    "how was the appointment at the clinic",
    # path and tag tricks
    "journal", "journal 2026-01-03", "journal/2026-01-03.md", "folder:journal morning", "folder:journal zorvatrex",
    "folder:health dosage", "tag:private bank", "tag:private/health morning", "tag:health doctor",
    "folder:agent_learnings kafka", "agent_learnings glimmerwick", "folder:links morning", "links today",
    "private", "private: true", "proposed_by claude", "status proposed",
    # prefixes
    "zorv", "zorva", "quarr", "fenw", "larksp",
    # exclusions
    "morning -zorvatrex", "bank -Fenwick", "doctor -appointment", "pharmacy -zorvatrex", '-"Fenwick Mutual" bank',
    # identifiers only in private notes
    "RX-88213", "ZX-4471-Q", "acct_7731_fenwick", "14 Larkspur",
    # common words shared with public notes
    "morning", "doctor", "bank", "account", "pharmacy", "dosage", "address", "appointment",
    "savings account", "family dinner", "birthday", "cousin", "consumer", "cache", "private key",
    "morning pharmacy dosage doctor", "insurance", "March",
    # the secret values themselves
    *SECRETS, "password", "router admin password",
]
MODES = ("lexical", "vector", "hybrid")


# --- building vaults ---------------------------------------------------------------------------
def build(root, files, links=None):
    for rel, text in files.items():
        write(root, rel, text)
    for rel, target in (links or {}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, root / rel)
    return root


def indexed(tmp_path_factory, name, files, links=None, *, embedders=(), store=None, **settings):
    """A handle on a fresh home with one vault ``v`` holding ``files``, indexed (into the
    PostgreSQL database ``store`` when given)."""
    base = tmp_path_factory.mktemp(name)
    root = build(base / "vault", files, links)
    if store:
        settings["store"] = store
    h = hybrid.open(base / "home", embedders=embedders, **{**SETTINGS, **settings})
    h.add_vault(root, "v")
    h.index()
    return h


def redacted_copy(files):
    """``files`` as an agent is shown them: each note's secrets replaced by ``[redacted secret]``."""
    from hybrid.store.agent.view import agent_redactor
    r = agent_redactor()
    return {rel: r.redact(text) for rel, text in files.items()}


@pytest.fixture(scope="module")
def full(tmp_path_factory, new_store):
    """Everything: public notes, private ones, notes with secrets, symlinks to private notes."""
    h = indexed(tmp_path_factory, "full", {**PUBLIC, **PRIVATE, **SECRET_NOTES}, PRIVATE_LINKS,
                store=new_store())
    yield h
    h.close()


@pytest.fixture(scope="module")
def eq_full(tmp_path_factory, new_store):
    """Public and private notes, no secrets (so the vector arm's input is the same text)."""
    h = indexed(tmp_path_factory, "eqfull", {**PUBLIC, **PRIVATE}, PRIVATE_LINKS, store=new_store())
    yield h
    h.close()


@pytest.fixture(scope="module")
def eq_public(tmp_path_factory, new_store):
    """``eq_full`` minus every hidden note: what an agent must believe the vault is."""
    h = indexed(tmp_path_factory, "eqpublic", dict(PUBLIC), store=new_store())
    yield h
    h.close()


@pytest.fixture(scope="module")
def public_redacted(tmp_path_factory, new_store):
    """``full`` minus every hidden note, with the secrets already redacted in the files."""
    h = indexed(tmp_path_factory, "pubred", {**PUBLIC, **redacted_copy(SECRET_NOTES)}, store=new_store())
    yield h
    h.close()


# --- comparing results -------------------------------------------------------------------------
def close(a, b, rel=1e-6):
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=rel, abs_tol=2e-6)


def outcome(h, q, **kw):
    try:
        return h.search(q, **kw)
    except HybridError as exc:  # a query error must read the same for both
        return f"{type(exc).__name__}: {exc}"


def assert_same(agent_hits, owner_hits, label, rel=1e-6):
    if isinstance(agent_hits, str) or isinstance(owner_hits, str):
        assert agent_hits == owner_hits, label
        return
    a = [(h.path, h.start_line, h.end_line, h.lexical_rank, h.vector_rank) for h in agent_hits]
    o = [(h.path, h.start_line, h.end_line, h.lexical_rank, h.vector_rank) for h in owner_hits]
    assert a == o, label
    for ha, ho in zip(agent_hits, owner_hits):
        for f in ("lexical_score", "vector_score", "score"):
            assert close(getattr(ha, f), getattr(ho, f), rel), (label, ha.path, f, getattr(ha, f), getattr(ho, f))
        assert ha.snippet == ho.snippet and ha.text == ho.text, (label, ha.path)


def leaks(hit) -> list[str]:
    """What of the private content a hit shows."""
    out = []
    if hit.path in HIDDEN or hit.path.lower().startswith(("journal/", "agent_learnings/")):
        out.append(f"path {hit.path}")
    shown = "\n".join([hit.snippet, hit.text, hit.title, *hit.heading_path]).lower()
    out += [w for w in PRIVATE_WORDS if w.lower() in shown]
    out += [f"secret {s[:12]}…" for s in SECRETS if s.lower() in shown]
    return out


# --- equivalence -------------------------------------------------------------------------------
def test_there_are_enough_queries():
    assert len(QUERIES) >= 50 and len(set(QUERIES)) == len(QUERIES)


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
@pytest.mark.parametrize("mode", MODES)
def test_agent_search_equals_the_vault_without_private_notes(eq_full, eq_public, mode):
    for q in QUERIES:
        for k in (3, 10, 50):
            assert_same(outcome(eq_full, q, agent=True, top_k=k, mode=mode),
                        outcome(eq_public, q, top_k=k, mode=mode), (q, mode, k))


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
@pytest.mark.parametrize("mode", MODES)
def test_filters_and_excluded_folders_keep_the_equivalence(eq_full, eq_public, mode):
    for q in ["morning", "doctor appointment", "bank account", "zorvatrex", "pharmacy dosage"]:
        for opts in (dict(folders=["journal"]), dict(folders=["health"]), dict(tags=["private"]),
                     dict(tags=["health"]), dict(exclude_folders=["work"]), dict(folders=["links"])):
            assert_same(outcome(eq_full, q, agent=True, top_k=10, mode=mode, **opts),
                        outcome(eq_public, q, top_k=10, mode=mode, **opts), (q, mode, opts))


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_lexical_equivalence_with_secrets_redacted(full, public_redacted):
    """BM25 over the agent index is BM25 over a vault whose secrets were redacted on disk."""
    for q in QUERIES:
        for k in (5, 50):
            assert_same(outcome(full, q, agent=True, top_k=k, mode="lexical"),
                        outcome(public_redacted, q, top_k=k, mode="lexical"), (q, k))


def test_status_counts_are_those_of_the_public_vault(eq_full, eq_public, full, public_redacted):
    for agent_h, owner_h in ((eq_full, eq_public), (full, public_redacted)):
        a, = agent_h.status(agent=True)
        o, = owner_h.status()
        assert (a.notes, a.chunks) == (o.notes, o.chunks)
        assert a.disk_bytes == 0 and a.pending == 0
        owner, = agent_h.status()
        assert owner.notes > a.notes


# --- leaks -------------------------------------------------------------------------------------
@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_no_agent_hit_shows_a_hidden_note_a_private_word_or_a_secret(full):
    found = []
    for q in QUERIES:
        for mode in MODES:
            for k in (5, 50):
                hits = outcome(full, q, agent=True, top_k=k, mode=mode)
                if isinstance(hits, str):
                    assert not any(w.lower() in hits.lower() for w in PRIVATE_WORDS if w.lower() not in q.lower())
                    continue
                found += [(q, mode, h.path, bad) for h in hits if (bad := leaks(h))]
    assert found == []


def test_secrets_are_searchable_by_the_owner_only(full):
    for s in SECRETS:
        if "://" in s:  # a quoted URL matches any note holding a URL: see test_quoted_url_...
            continue
        q = s[:60] if len(s) > 60 else s
        assert not [h.path for h in outcome(full, f'"{q}"', agent=True, mode="lexical", top_k=50)
                    if not isinstance(h, str)], s[:12]
    # the owner does find them (the view only affects agents)
    owner = full.search(f'"{CASES["github-pat"]["secret"]}"', mode="lexical", top_k=5)
    assert owner and owner[0].path == "setup/ci.md"


def test_snippets_of_secret_notes_are_redacted(full):
    hits = full.search("CI setup pipeline credentials rotate token title webhook alerts", agent=True,
                       mode="lexical", top_k=50)
    texts = [h.text for h in hits if h.path in SECRET_NOTES]
    assert texts and any(REDACTED in t for t in texts)
    assert not [s for s in SECRETS if any(s in t for t in texts)]
    shown = [h for h in hits if h.path == "setup/headings.md"]
    assert shown and all(REDACTED in h.title and REDACTED in " ".join(h.heading_path) for h in shown)
    assert not [s for s in SECRETS if any(s in repr(h.to_dict()) for h in hits)]


def test_the_owner_still_finds_every_private_note(full):
    for path, word in [("journal/2026-01-03.md", "zorvatrex dosage"), ("journal/2026-01-10.md", "overdraft"),
                       ("journal/2025/12-31.md", "resolutions"), ("health/medication.md", "vesperine"),
                       ("finance/fenwick.md", "quillfeather"), ("people/family.md", "Morwenna"),
                       ("home/therapy.md", "nightjar"), ("agent_learnings/2026-02-01-kafka-tip.md", "glimmerwick"),
                       ("work/inbox/agent-note.md", "trellisbound")]:
        for mode in ("lexical", "hybrid"):
            assert path in found_paths(full.search(word, mode=mode, top_k=5)), (word, mode)  # a link's copy: folded
        assert full.get(path).text == PRIVATE[path].rstrip("\n")


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_agent_result_lists_are_full(full, eq_public):
    visible_chunks = full.status(agent=True)[0].chunks
    for q in ["morning", "bank", "account", "doctor", "the", "pharmacy morning doctor bank account",
              "zorvatrex morning", "Fenwick bank"]:
        public_matches = len(eq_public.search(q, mode="lexical", top_k=1000, passages=True))
        for k in (3, 5, 10):
            if public_matches >= k:
                assert len(full.search(q, agent=True, mode="lexical", top_k=k, passages=True)) == k, (q, k)
                assert len(full.search(q, agent=True, mode="hybrid", top_k=k, passages=True)) == k, (q, k)
        for k in (5, 50, 1000):
            got = full.search(q, agent=True, mode="vector", top_k=k, passages=True)
            assert len(got) == min(k, visible_chunks), (q, k)


def test_quoted_url_matches_only_notes_holding_it(full):
    hook = CASES["slack-webhook"]["secret"]
    owner = full.search(f'"{hook}"', mode="lexical", top_k=5)
    assert owner and all(hook in f"{x.heading}\n{x.text}" for x in owner)  # only the note holding it
    assert full.search(f'"{hook}"', agent=True, mode="lexical", top_k=5) == []  # redacted for agents
    assert full.search('"https://hooks.slack.com/services/T00000000"', mode="lexical", top_k=5) == []


# --- get ---------------------------------------------------------------------------------------
def _shape(message: str, ref: str) -> str:
    """``message`` with the path it names (``ref`` less any ``:START-END``) replaced by REF."""
    path = REF_RE.match(ref.removeprefix("v:")).group("path")  # "v:" names the vault
    return message.replace(repr(path), "REF")


def refusal(h, ref) -> str:
    with pytest.raises(PathRefused) as exc:
        h.get(ref, "v", agent=True)
    return str(exc.value)


@pytest.mark.parametrize("path", sorted(HIDDEN))
def test_get_refuses_hidden_notes_as_if_they_did_not_exist(full, path):
    missing = refusal(full, "work/no-such-note.md")
    variants = [path, "./" + path, "work/../" + path, path.upper(), path[:1].upper() + path[1:],
                f"{path}:1-5", f"{path}:2", "v:" + path]
    for ref in variants:
        assert _shape(refusal(full, ref), ref) == _shape(missing, "work/no-such-note.md"), ref
    for ref in ["work/../journal/nope.md", "JOURNAL/nope.md", "journal/nope.md:1-5"]:
        assert _shape(refusal(full, ref), ref) == _shape(missing, "work/no-such-note.md"), ref


def test_the_owner_reads_hidden_notes(full):
    for path, text in PRIVATE.items():
        assert full.get(path, "v").text == text.rstrip("\n")
        assert full.get(f"{path}:1-2", "v").text == "\n".join(text.split("\n")[:2])


def test_get_of_a_symlink_into_a_hidden_note_is_refused(full):
    missing = refusal(full, "links/nope.md")
    for link in PRIVATE_LINKS:
        assert _shape(refusal(full, link), link) == _shape(missing, "links/nope.md")


def test_get_as_agent_redacts_secrets_and_keeps_the_lines(full):
    for path, text in SECRET_NOTES.items():
        agent, owner = full.get(path, "v", agent=True), full.get(path, "v")
        assert owner.text == text.rstrip("\n")
        assert agent.total_lines == owner.total_lines and agent.text.count("\n") == owner.text.count("\n")
        assert REDACTED in agent.text
        assert not [s for s in SECRETS if s in agent.text]
        assert any(s in owner.text for s in SECRETS)
        # a line range reads the same lines, redacted
        part = full.get(f"{path}:3-{owner.total_lines}", "v", agent=True)
        assert part.text == "\n".join(agent.text.split("\n")[2:])


def test_get_as_agent_reads_visible_notes(full):
    for path in ["work/journal-club.md", "learning/private-cloud.md", "notes/not-private.md",
                 "agent_ideas/accepted.md"]:
        assert full.get(path, "v", agent=True).text == PUBLIC[path].rstrip("\n")


# --- every way of marking a note private --------------------------------------------------------
MARKED = {  # path → text; each holds a unique word "<name>word"
    "fm/yes.md": "---\nprivate: yes\n---\n# A\n\nalphaword here\n",
    "fm/quoted.md": "---\nprivate: \"true\"\n---\n# B\n\nbravoword here\n",
    "fm/capital-key.md": "---\nPrivate: True\n---\n# C\n\ncharlieword here\n",
    "fm/one.md": "---\nprivate: 1\n---\n# K\n\nkiloword here\n",
    "fm/on.md": "---\nprivate: on\n---\n# M\n\nmikeword here\n",
    "fm/spaces.md": "---\nprivate:   TRUE  \n---\n# R\n\nromeoword here\n",
    "fm/list.md": "---\nprivate: [true]\n---\n# R1\n\nlistword here\n",
    "fm/block-list.md": "---\nprivate:\n  - true\n---\n# R2\n\nblocklistword here\n",
    "fm/y.md": "---\nprivate: y\n---\n# R3\n\nyletterword here\n",
    "fm/unclear.md": "---\nprivate: maybe\n---\n# R4\n\nunclearword here\n",  # not a no: fail closed
    "fm/mapping.md": "---\nprivate:\n  level: high\n---\n# R5\n\nmappingword here\n",
    # a key twice: YAML allows it not, the parser kept the last (issue #47): unreadable, hidden
    "fm/twice.md": "---\nprivate: true\nprivate: false\n---\n# R6\n\ntwiceword here\n",
    "fm/twice-case.md": "---\nprivate: true\nPrivate: false\n---\n# R7\n\ntwicecaseword here\n",
    "tags/twice.md": "---\ntags: [private]\ntags: [work]\n---\n# R8\n\ntagstwiceword here\n",
    "tags/scalar.md": "---\ntags: private\n---\n# D\n\ndeltaword here\n",
    "tags/hash.md": "---\ntags: \"#private\"\n---\n# E\n\nechoword here\n",
    "tags/capital.md": "---\nTags: [Private/Health]\n---\n# F\n\nfoxtrotword here\n",
    "tags/block.md": "---\ntags:\n  - work\n  - private\n---\n# G\n\ngolfword here\n",
    "tags/quoted.md": "---\ntags: [\"private\"]\n---\n# O\n\noscarword here\n",
    "tags/comma.md": "---\ntags: private, work\n---\n# U\n\nuniformword here\n",
    "tags/tag-key.md": "---\ntag: private\n---\n# L\n\nlimaword here\n",
    "tags/inline-upper.md": "# J\n\njulietword here #PRIVATE\n",
    "tags/nested.md": "# P\n\npapaword here\n\n#private/deep/nested\n",
    "proposals/case.md": "---\nstatus: Proposed\nProposed_By: bot\n---\n# H\n\nhotelword here\n",
    "Agent_Learnings/upper-folder.md": "# I\n\nindiaword here\n",
    "JOURNAL/upper-folder.md": "# N\n\nnovemberword here\n",
    "Journal/2026/deep.md": "# N2\n\nnovemberdeepword here\n",
}
NOT_MARKED = {  # look private to a careless reader, are not
    "fm/false.md": "---\nprivate: false\n---\n# S\n\nsierraword here\n",
    "fm/no.md": "---\nprivate: no\n---\n# S1\n\nnoword here\n",
    "fm/empty.md": "---\nprivate:\n---\n# S2\n\nemptyword here\n",
    "fm/zero.md": "---\nprivate: 0\n---\n# S3\n\nzeroword here\n",
    "fm/list-false.md": "---\nprivate: [false]\n---\n# S4\n\nlistfalseword here\n",
    "fm/n.md": "---\nprivate: n\n---\n# S5\n\nnletterword here\n",
    "tags/prefix.md": "---\ntags: [privateer]\n---\n# T\n\ntangoword here\n",
    "tags/in-code.md": "# X\n\nxrayword here\n\n```\n#private\n```\n",
    "accepted.md": "---\nstatus: accepted\nproposed_by: bot\n---\n# Y\n\nyankeeword here\n",
    "notes/journal.md": "# Z\n\nzuluword here\n",
}


@pytest.fixture(scope="module")
def marked(tmp_path_factory, new_store):
    h = indexed(tmp_path_factory, "marked", {**MARKED, **NOT_MARKED, "pub.md": "# Pub\n\nhere here\n"},
                store=new_store())
    yield h
    h.close()


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
@pytest.mark.parametrize("path", sorted(MARKED))
def test_every_way_of_marking_a_note_private_hides_it(marked, path):
    word = re.search(r"\w+word", MARKED[path]).group(0)
    for mode in MODES:
        assert path not in {x.path for x in marked.search(word, agent=True, mode=mode, top_k=50)}, mode
    assert marked.search(word, mode="lexical", top_k=1)[0].path == path
    with pytest.raises(PathRefused):
        marked.get(path, "v", agent=True)


@pytest.mark.parametrize("path", sorted(NOT_MARKED))
def test_notes_that_only_look_private_stay_visible(marked, path):
    word = re.search(r"\w+word", NOT_MARKED[path]).group(0)
    assert marked.search(word, agent=True, mode="lexical", top_k=1)[0].path == path
    assert marked.get(path, "v", agent=True).text == NOT_MARKED[path].rstrip("\n")


# --- the view follows settings and edits -------------------------------------------------------
SMALL = {
    "recipes/ramen.md": PUBLIC["recipes/ramen.md"],
    "recipes/lentil-soup.md": PUBLIC["recipes/lentil-soup.md"],
    "home/garden.md": PUBLIC["home/garden.md"],
    "health/running.md": PUBLIC["health/running.md"],
    "work/meetings/retro.md": PUBLIC["work/meetings/retro.md"],
    "health/medication.md": PRIVATE["health/medication.md"],
    "journal/2026-01-03.md": PRIVATE["journal/2026-01-03.md"],
    "agent_learnings/2026-02-01-kafka-tip.md": PRIVATE["agent_learnings/2026-02-01-kafka-tip.md"],
    "work/inbox/agent-note.md": PRIVATE["work/inbox/agent-note.md"],
}


@pytest.fixture
def small(tmp_path_factory, new_store):
    h = indexed(tmp_path_factory, "small", SMALL, store=new_store())
    yield h
    h.close()


def agent_paths(h, q, mode="lexical", k=20):
    """The notes an agent's search names: its hits and the copies folded into them (also_in)."""
    return found_paths(h.search(q, agent=True, mode=mode, top_k=k))


def found_paths(hits) -> set[str]:
    """The paths of ``hits`` and of the near-identical passages folded into them."""
    return {x.path for x in hits} | {c.split(":", 2)[1] for x in hits for c in x.also_in}


def test_agent_exclude_changed_at_run_time(small):
    assert "recipes/ramen.md" in agent_paths(small, "broth kombu shiitake")
    small.override(agent_exclude=["journal/**", "recipes"])
    for mode in MODES:
        assert not {p for p in agent_paths(small, "broth kombu shiitake lentil soup", mode)
                    if p.startswith("recipes/")}
    assert small.status(agent=True)[0].notes == 3
    with pytest.raises(PathRefused):
        small.get("recipes/ramen.md", "v", agent=True)
    # BM25 statistics are rebuilt too: lexical scores equal those of a vault without recipes
    small.override(agent_exclude=["journal/**"])
    assert "recipes/ramen.md" in agent_paths(small, "broth kombu shiitake")
    assert small.get("recipes/ramen.md", "v", agent=True).text.startswith("# Shoyu ramen")
    assert small.status(agent=True)[0].notes == 5


def test_agent_exclude_change_rebuilds_bm25_statistics(small, tmp_path_factory, new_store):
    small.override(agent_exclude=["journal/**", "recipes"])
    got = small.search("morning sun water", agent=True, mode="lexical", top_k=10)
    without = {k: v for k, v in SMALL.items() if not k.startswith(("recipes/", "journal/"))
               and k not in ("health/medication.md", "agent_learnings/2026-02-01-kafka-tip.md",
                             "work/inbox/agent-note.md")}
    ref = indexed(tmp_path_factory, "small-ref", without, store=new_store())
    # Milvus keeps BM25's weights with the mean field lengths they were written with, within 1 %
    # of the exact ones until a rebuild (hybrid/store/milvus/bm25.py): the same ranks, scores that near
    rel = 1e-2 if kind_of(small.config.vault("v").store).name == "milvus" else 1e-6
    try:
        assert_same(got, ref.search("morning sun water", mode="lexical", top_k=10), "recipes excluded", rel)
    finally:
        ref.close()


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_a_note_made_private_disappears_and_comes_back(small):
    root = small.config.vault("v").path
    note = root / "home/garden.md"
    assert "home/garden.md" in agent_paths(small, "tomatoes sun")
    note.write_text("---\nprivate: true\n---\n" + SMALL["home/garden.md"], encoding="utf-8")
    small.index()
    for mode in MODES:
        assert "home/garden.md" not in agent_paths(small, "tomatoes sun", mode)
    assert "home/garden.md" in {x.path for x in small.search("tomatoes sun", top_k=5)}
    with pytest.raises(PathRefused):
        small.get("home/garden.md", "v", agent=True)
    note.write_text(SMALL["home/garden.md"], encoding="utf-8")
    small.index()
    assert "home/garden.md" in agent_paths(small, "tomatoes sun")
    assert small.get("home/garden.md", "v", agent=True).text.startswith("# Garden")


def test_a_note_given_a_private_tag_disappears(small):
    root = small.config.vault("v").path
    (root / "home/garden.md").write_text(SMALL["home/garden.md"] + "\n#private/garden\n", encoding="utf-8")
    small.index()
    assert "home/garden.md" not in agent_paths(small, "tomatoes sun", "hybrid")


def test_agents_see_proposals_when_allowed(small):
    assert not agent_paths(small, "glimmerwick trellisbound", "hybrid") & set(PRIVATE)
    small.override(agents_see_proposals=True)
    got = agent_paths(small, "glimmerwick trellisbound")
    assert {"agent_learnings/2026-02-01-kafka-tip.md", "work/inbox/agent-note.md"} <= got
    assert small.get("agent_learnings/2026-02-01-kafka-tip.md", "v", agent=True).text.endswith("(unreviewed).")
    # the other private notes stay hidden
    assert not agent_paths(small, "zorvatrex Quarrington vesperine", "hybrid") & {
        "health/medication.md", "journal/2026-01-03.md"}
    small.override(agents_see_proposals=False)
    assert not agent_paths(small, "glimmerwick trellisbound", "hybrid") & set(PRIVATE)


def test_symlink_into_the_journal_is_not_searchable_by_agents(full):
    for mode in MODES:
        for q in ["zorvatrex", "Imelda Quarrington", "links today", "vertigo metallic taste"]:
            assert not agent_paths(full, q, mode, 50) & set(PRIVATE_LINKS), (q, mode)


def test_symlink_into_a_folder_excluded_at_run_time(tmp_path_factory, new_store):
    files = {"journal/2026-01-03.md": PRIVATE["journal/2026-01-03.md"], **{
        k: PUBLIC[k] for k in ("recipes/ramen.md", "home/garden.md")}}
    h = indexed(tmp_path_factory, "runtime-link", files, {"links/today.md": "../journal/2026-01-03.md"},
                agent_exclude=[], store=new_store())
    try:
        assert "links/today.md" in agent_paths(h, "zorvatrex")  # nothing is hidden yet
        h.override(agent_exclude=["journal"])
        with pytest.raises(PathRefused):
            h.get("links/today.md", "v", agent=True)  # reading is refused at once ...
        assert agent_paths(h, "zorvatrex") == set()    # ... and so must searching be
    finally:
        h.close()


def test_symlink_into_a_folder_excluded_at_run_time_is_gone_after_index(tmp_path_factory, new_store):
    files = {"journal/2026-01-03.md": PRIVATE["journal/2026-01-03.md"], "home/garden.md": PUBLIC["home/garden.md"]}
    h = indexed(tmp_path_factory, "runtime-link2", files, {"links/today.md": "../journal/2026-01-03.md"},
                agent_exclude=[], store=new_store())
    try:
        h.override(agent_exclude=["journal"])
        h.index()
        for mode in MODES:
            assert not agent_paths(h, "zorvatrex dosage", mode) & {"links/today.md", "journal/2026-01-03.md"}
        assert "journal/2026-01-03.md" in {x.path for x in h.search("zorvatrex", top_k=5)}
    finally:
        h.close()


# --- the real model ----------------------------------------------------------------------------
PARAPHRASES = [
    "what medicine do I take for my condition", "which doctor changed my prescription",
    "where do I keep my savings", "who manages my bank account", "where does my cousin live",
    "when are my therapy sessions", "side effects of my pills", "my new home address after the move",
    "family birthday dinner", "how did the clinic visit go", "the PIN for my bank card",
    "tips an assistant wrote about kafka throughput",
]


@pytest.fixture(scope="module")
def real_full(tmp_path_factory, minilm, new_store):
    h = indexed(tmp_path_factory, "real-full", {**PUBLIC, **PRIVATE, **SECRET_NOTES}, PRIVATE_LINKS,
                embedders=[minilm], embedder="minilm", store=new_store())
    yield h
    h.close()


@pytest.fixture(scope="module")
def real_pair(tmp_path_factory, minilm, new_store):
    """As eq_full / eq_public with the real model. (Not with the secret notes: MiniLM's word
    pieces cut a note with a long secret into other chunks than its redacted copy, so that
    comparison is only exact with the hash embedder's tokens.)"""
    a = indexed(tmp_path_factory, "real-eqfull", {**PUBLIC, **PRIVATE}, PRIVATE_LINKS,
                embedders=[minilm], embedder="minilm", store=new_store())
    b = indexed(tmp_path_factory, "real-eqpublic", dict(PUBLIC), embedders=[minilm], embedder="minilm",
                store=new_store())
    yield a, b
    a.close()
    b.close()


@pytest.mark.slow
def test_real_model_paraphrases_show_nothing_private(real_full):
    found = []
    for q in PARAPHRASES + QUERIES:
        for mode in ("vector", "hybrid"):
            hits = outcome(real_full, q, agent=True, top_k=50, mode=mode)
            if not isinstance(hits, str):
                found += [(q, mode, h.path, bad) for h in hits if (bad := leaks(h))]
    assert found == []
    # the owner's paraphrase search does reach the private notes (the queries are on target)
    owner = {h.path for q in PARAPHRASES for h in real_full.search(q, mode="vector", top_k=3)}
    assert len(owner & set(PRIVATE)) >= 4


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_real_model_equivalence_on_paraphrases(real_pair, mode):
    full_h, pub = real_pair
    for q in PARAPHRASES + QUERIES[:40]:
        assert_same(outcome(full_h, q, agent=True, top_k=10, mode=mode),
                    outcome(pub, q, top_k=10, mode=mode), (q, mode))
