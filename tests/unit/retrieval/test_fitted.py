"""Parameters fitted per store (hybrid/data/fitted.json, confidence.json's ``stores``): a search
over a PostgreSQL store's vaults uses that store's fit, one over local vaults the local fit
(the shipped defaults), and a fusion setting a user changed wins over both."""
from dataclasses import replace
from types import SimpleNamespace

import pytest
from helpers import ALL_STORES

from hybrid.core.settings import Settings
from hybrid.retrieval import confidence, fitted, fuse
from hybrid.retrieval.pipeline import fusion_of, store_kind
from hybrid.store.milvus.lexical import MilvusLexical

STORES = ALL_STORES
PG_FIT = {"rrf_k": 7.0, "weight_vector": 2.5, "coverage_full": 0.7, "coverage_none": 0.4, "coverage_floor": 0.2}


@pytest.fixture
def pg_fit(monkeypatch):
    """A PostgreSQL fit unlike the shipped defaults in every value (whatever the file holds)."""
    table = {"local": {}, "postgresql": {"fusion": dict(PG_FIT)}}
    monkeypatch.setattr(fitted, "table", lambda: table)
    return table


def targets(*kinds):
    return [(SimpleNamespace(name=f"v{i}"), SimpleNamespace(lexical=SimpleNamespace(store_kind=k)))
            for i, k in enumerate(kinds)]


def test_each_store_kind_names_its_fit():
    from hybrid.store.agent.store import _AgentLexical
    from hybrid.store.local.lexical import TantivyIndex
    from hybrid.store.pg.lexical import PgLexical
    assert TantivyIndex.store_kind == "local" and PgLexical.store_kind == "postgresql"
    assert MilvusLexical.store_kind == "local"  # it scores as tantivy does: tantivy's fit
    inner = SimpleNamespace(stem=None, store_kind="postgresql")
    assert _AgentLexical(inner, SimpleNamespace(chunks=set()), None).store_kind == "postgresql"  # the agent view too


def test_postgresql_vaults_take_its_fit_local_ones_the_defaults(pg_fit):
    s = Settings()
    pg = fusion_of(targets("postgresql", "postgresql"), s)
    assert (pg.rrf_k, pg.weight_lexical, pg.weight_vector) == (7.0, s.weight_lexical, 2.5)
    assert pg.coverage_weight(0.0) == 0.2 and pg.coverage_weight(0.7) == 1.0
    local = fusion_of(targets("local"), s)
    assert (local.rrf_k, local.weight_lexical, local.weight_vector) == (s.rrf_k, s.weight_lexical, s.weight_vector)
    assert local.coverage_weight(0.0) == fuse.COVERAGE_FLOOR
    assert local.coverage_weight(0.45) == fuse.coverage_weight(0.45)
    # both kinds in one search: the local fit; an unknown kind: the local fit
    assert store_kind(targets("local", "postgresql")) == "local"
    assert store_kind(targets("elastic")) == "local"


def test_a_fusion_setting_the_user_changed_wins_over_the_fit(pg_fit):
    mine = replace(Settings(), rrf_k=30, weight_vector=1.0)
    got = fusion_of(targets("postgresql"), mine)
    assert (got.rrf_k, got.weight_vector) == (30.0, 1.0)
    assert got.coverage_full == 0.7  # not a setting: the fit's


def test_the_shipped_file_fits_every_kind_in_known_names():
    for kind, fit in fitted.table().items():
        assert set(fit) <= {"fusion"}, kind
        assert set(fit.get("fusion", {})) <= {f for f in fitted.Fusion.__dataclass_fields__}, kind
        f = fitted.fusion(kind, Settings())
        assert f.coverage_none < f.coverage_full and 0 < f.coverage_floor <= 1 and f.rrf_k >= 0


def test_confidence_models_per_store_kind(monkeypatch):
    own = {"lexical": {"features": ["coverage"], "weights": [1.0], "bias": -9.0}}
    data = {"models": confidence._fitted()["models"], "stores": {"postgresql": own}}
    monkeypatch.setattr(confidence, "_fitted", lambda: data)
    assert confidence.models("postgresql")["lexical"] == own["lexical"]
    assert confidence.models("postgresql")["full"] == confidence.models("local")["full"]  # not refitted: shared
    feats = {"coverage": 1.0, "lex_rr": 1.0, "rank_rr": 1.0}
    assert confidence.probability(feats, "lexical", "postgresql") < confidence.probability(feats, "lexical")


def test_a_search_reports_the_fit_of_its_store(fake_indexed, store_kind, pg_fit):
    """On a real store of each kind: the fusion the answer reports is that kind's fit."""
    res = fake_indexed.search("tailscale subnet router", mode="hybrid")
    want = fitted.fusion(store_kind, fake_indexed.settings)
    assert res.fusion["k"] == want.rrf_k
    assert res.fusion["vector"] == want.weight_vector
    assert res.fusion["k"] == (7.0 if store_kind == "postgresql" else Settings().rrf_k)
