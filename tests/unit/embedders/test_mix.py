"""The mix embedder (two models fused per query by language) and upgrading an index of one of
its parts: logic with hash embedders, then the real default pair on a multilingual vault."""

import numpy as np
import pytest
from helpers import SAMPLE_VAULT, CountingEmbedder, paths, write, write_multilingual_vault

import hybrid
from hybrid.embedders import make_embedder, spec_id
from hybrid.embedders import mix as mixmod
from hybrid.embedders.mix import MixEmbedder
from hybrid.retrieval.languages import REACH_SHARE, other_languages


def test_spec_and_id_agree_without_loading():
    emb = make_embedder("mix:hash:32,hash:16")
    assert emb.id == spec_id("mix:hash:32,hash:16") == "mix(hash:32,hash:16)"
    assert emb.dim == 48 and emb.max_tokens == make_embedder("hash:32").max_tokens
    for bad in ("mix:hash:32", "mix:hash:32,", "mix:a,b,c", "mix:mix:hash:8,hash:8,hash:8"):
        with pytest.raises(hybrid.HybridError, match="unknown embedder"):
            make_embedder(bad)


def test_scores_are_the_weighted_cosines_of_the_parts():
    a, b = make_embedder("hash:32"), make_embedder("hash:16")
    mix = MixEmbedder(a, b, english=0.0)
    doc = "tomato plants need six hours of sun"
    d = mix.embed_documents([doc])[0]
    assert np.linalg.norm(d) == pytest.approx(1.0, abs=1e-5)
    # English: the first model alone, exactly its cosine
    q = "how much sun do tomatoes need"
    assert mix.weights(q) == (1.0, 0.0)
    alone = float(a.embed_query(q) @ a.embed_documents([doc])[0])
    assert float(mix.embed_query(q) @ d) == pytest.approx(alone, abs=1e-5)
    # another language: the second model alone
    q = "wie viel Sonne brauchen Tomaten"
    wa, wb = mix.weights(q)
    assert wa < 0.5 < wb
    want = (wa * float(a.embed_query(q) @ a.embed_documents([doc])[0])
            + wb * float(b.embed_query(q) @ b.embed_documents([doc])[0])) / (wa + wb)
    assert float(mix.embed_query(q) @ d) == pytest.approx(want, abs=1e-5)


def test_known_halves_are_not_embedded_again():
    a, b = CountingEmbedder("hash:32"), CountingEmbedder("hash:16")
    mix = MixEmbedder(a, b)
    texts = ["one note", "another note", "a third"]
    whole = mix.embed_documents(texts)
    a.texts = b.texts = 0
    known = {i: a.embed_documents([t])[0] for i, t in enumerate(texts[:2])}
    a.texts = 0
    again = mix.embed_documents(texts, [known, {}])
    assert a.texts == 1 and b.texts == 3
    np.testing.assert_allclose(again, whole, atol=1e-6)


def test_an_index_of_one_part_is_upgraded_by_embedding_only_the_other(tmp_path):
    write(tmp_path / "vault", "garden.md", "# Garden\n\nTomatoes need six hours of sun.\n")
    write(tmp_path / "vault", "bikes.md", "# Bikes\n\nPatch a flat tyre with a kit.\n")
    a, b = CountingEmbedder("hash:32"), CountingEmbedder("hash:16")
    h = hybrid.open(tmp_path / "home", embedders=[a], embedder="hash:32")
    h.add_vault(tmp_path / "vault", "v")
    first = h.index()[0]
    h.close()
    assert a.texts == first.chunks_embedded == first.chunks
    a.texts = 0
    mix = MixEmbedder(a, b)
    h = hybrid.open(tmp_path / "home", embedders=[mix], embedder="mix:hash:32,hash:16")
    # before the upgrade the part the index was built with answers (no mismatch error)
    assert paths(h.search("tomatoes sun", mode="vector"))[0] == "garden.md"
    report = h.index()[0]
    assert report.upgraded == mix.id and report.chunk_parts_reused == first.chunks
    assert a.texts == 0 and b.texts == first.chunks  # only the new half was embedded
    assert h.status()[0].embedder == mix.id
    hits = h.search("tomatoes sun", mode="vector")
    assert paths(hits)[0] == "garden.md"
    again = h.index()[0]
    assert again.chunks_embedded == 0 and again.upgraded is None
    h.close()


def test_another_model_still_asks_for_reembed(tmp_path):
    write(tmp_path / "vault", "garden.md", "# Garden\n\nTomatoes need six hours of sun.\n")
    h = hybrid.open(tmp_path / "home", embedder="hash:24")
    h.add_vault(tmp_path / "vault", "v")
    h.index()
    h.close()
    h = hybrid.open(tmp_path / "home", embedder="mix:hash:32,hash:16")
    report = h.index(keep_going=True)[0]
    assert report.error and "--reembed" in report.error and "hash:24" in report.error
    h.close()


def test_english_questions_reach_other_languages_only_where_the_vault_holds_them(tmp_path):
    mix = MixEmbedder(make_embedder("hash:32"), make_embedder("hash:16"))
    assert mix.weights("how much sun do tomatoes need") == (1.0, 0.0)
    assert mix.weights("how much sun do tomatoes need", reach=True) == (1.0, mixmod.REACH_WEIGHT)
    assert mix.weights("Сколько солнца нужно помидорам?", reach=True) == (0.0, 1.0)
    # the index run measures the share of chunks in other languages
    h = hybrid.open(tmp_path / "home", embedder="hash:16")
    h.add_vault(write_multilingual_vault(tmp_path / "multi"), "multi")
    write(tmp_path / "english", "garden.md", "# Garden\n\nTomatoes need six hours of sun.\n")
    h.add_vault(tmp_path / "english", "english")
    h.index()
    shares = {}
    for name in ("multi", "english"):
        store = h.session.store(h.config.vault(name))
        shares[name] = other_languages(store)
    assert shares["english"] == 0.0 and shares["multi"] == pytest.approx(2 / 3, abs=0.01)
    assert shares["multi"] >= REACH_SHARE > shares["english"]
    h.close()


@pytest.mark.slow
def test_the_default_mix_reads_every_language_both_ways(minilm, use_model, tmp_path):
    """English questions find German and Russian notes, and German and Russian questions find the
    English one, with the default embedder and no setting changed."""
    mix = MixEmbedder(minilm, use_model)
    assert mix.id == spec_id(mixmod.DEFAULT)
    h = hybrid.open(tmp_path / "home", embedders=[mix])
    try:
        h.add_vault(write_multilingual_vault(tmp_path / "vault"), "notes")
        h.index()
        assert h.status()[0].embedder == mix.id
        for mode in ("vector", "hybrid"):
            assert paths(h.search("Wie viel Sonne brauchen Tomatenpflanzen?", mode=mode))[0] == "garden.md"
            assert paths(h.search("Сколько солнца нужно помидорам?", mode=mode))[0] == "garden.md"
            assert paths(h.search("When is the tax return due?", mode=mode))[0] == "nalogi.md"
            assert paths(h.search("How do I fix a flat bicycle tyre?", mode=mode))[0] == "fahrrad.md"
    finally:
        h.close()


def test_the_evaluation_cache_passes_a_mix_through():
    """`hybrid eval` wraps the embedder in its cache: the wrapper must still read as a mix (the
    search asks a mix to reach other languages) and pass the known halves of an upgrade on."""
    from hybrid.eval.run import CachingEmbedder
    mix = MixEmbedder(make_embedder("hash:32"), make_embedder("hash:16"))
    cached = CachingEmbedder(mix)
    assert cached.parts is mix.parts and cached.id == mix.id
    q = "how much sun do tomatoes need"
    # an English question's two vectors (ReachQuery), as the mix gives them, through the wrapper
    reach, direct = cached.embed_query(q, reach=True), mix.embed_query(q, reach=True)
    assert isinstance(reach, mixmod.ReachQuery) and isinstance(direct, mixmod.ReachQuery)
    np.testing.assert_array_equal(reach.vector, direct.vector)
    np.testing.assert_array_equal(reach.second, direct.second)
    assert not np.array_equal(direct.vector, mix.embed_query(q))  # reaching weighs the second model more
    assert isinstance(mix.embed_query(q), np.ndarray)
    # a question in another language: the one vector, reaching or not
    de = "Wie viel Sonne brauchen Tomatenpflanzen im Garten?"
    assert isinstance(mix.embed_query(de, reach=True), np.ndarray)
    known = {0: mix.parts[0].embed_documents(["one note"])[0]}
    np.testing.assert_allclose(cached.embed_documents(["one note"], [known, {}]),
                               mix.embed_documents(["one note"]), atol=1e-6)


def test_confidence_reads_an_english_question_as_the_first_models_cosine():
    from hybrid.retrieval.languages import scored_by
    mid = spec_id(mixmod.DEFAULT)
    first = make_embedder("hash:8").id  # any id: only the mix's own is taken apart
    assert scored_by(mid, "how did I set up tailscale", reach=False) == spec_id("minilm")
    assert scored_by(mid, "how did I set up tailscale", reach=True) == mid  # USE weighs in too
    assert scored_by(mid, "Wie habe ich Tailscale eingerichtet?", reach=False) == mid
    assert scored_by(first, "anything", reach=False) == first


def test_the_index_command_says_what_an_upgrade_did(tmp_path, hybrid_home):
    from click.testing import CliRunner

    from hybrid.faces.cli.main import main
    write(tmp_path / "vault", "garden.md", "# Garden\n\nTomatoes need six hours of sun.\n")
    hybrid_home.mkdir(parents=True, exist_ok=True)
    config = hybrid_home / "config.toml"
    config.write_text('[settings]\nembedder = "hash:32"\n', encoding="utf-8")
    first = CliRunner().invoke(main, ["index", str(tmp_path / "vault"), "--name", "v"])
    assert first.exit_code == 0, first.output
    assert "upgraded" not in first.output
    text = config.read_text(encoding="utf-8")
    config.write_text(text.replace('embedder = "hash:32"', 'embedder = "mix:hash:32,hash:16"'), encoding="utf-8")
    second = CliRunner().invoke(main, ["index"])
    assert second.exit_code == 0, second.output
    assert "· upgraded to mix(hash:32,hash:16) (1 vectors kept their first half)" in second.output


def test_a_note_in_another_language_is_scored_by_the_cosine_of_the_half_it_has():
    """ReachQuery.rescore: a document whose two scores say it has no first half (the mixed
    score is the second model's cosine times b/(a+b)) takes that cosine; an English document,
    and one only the mixed search scored, keep theirs."""
    from hybrid.embedders.mix import ReachQuery
    q = ReachQuery(np.zeros(3, dtype=np.float32), np.zeros(3, dtype=np.float32), (1.0, 0.5))
    out = q.rescore({1: 0.6, 2: 0.5 * 0.45 / 1.5, 3: 0.3}, {1: 0.7, 2: 0.45})
    assert out == {1: 0.6, 2: 0.45, 3: 0.3}


def _english_vault_with_notes_in_other_languages(root):
    """Sixteen English notes of the sample vault (money, baking, travel, backups, Spanish
    practice) and six notes in Chinese, Japanese, French, German, Spanish and Russian, each on a
    topic no English note covers."""
    import shutil
    for rel in ["finance/Tax checklist 2024.md", "finance/Insurance.md", "finance/Emergency fund.md",
                "finance/Budget 2025.md", "misc/Car maintenance.md", "misc/Sourdough.md",
                "misc/Half marathon plan.md", "misc/Reading list.md", "home-lab/backups.md",
                "home-lab/networking.md", "home-lab/ZFS pool.md", "journal/Lisbon trip.md",
                "learning/Spanish practice.md", "work/runbooks/Redis Failover.md",
                "work/design/Inventory Reservation.md", "home-lab/home assistant.md"]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(SAMPLE_VAULT / rel, root / rel)
    write(root, "intl/红烧肉.md", "# 红烧肉\n\n五花肉六百克切块，冷水下锅焯水。小火把冰糖炒化，倒入肉块翻炒上色，"
          "加生抽、老抽、八角和葱，加开水没过肉，小火炖一个小时，最后大火收汁。\n")
    write(root, "intl/歯医者.md", "# 歯医者\n\n半年に一回、歯のクリーニングと検診。駅前の田中歯科、予約は電話で。"
          "歯間ブラシを毎晩使うように言われた。\n")
    write(root, "intl/Vélo.md", "# Entretien du vélo\n\nNettoyer et lubrifier la chaîne tous les 300 km ou après "
          "chaque sortie sous la pluie. Pression des pneus : 6 bars. Changer les plaquettes de frein usées.\n")
    write(root, "intl/Mietvertrag.md", "# Kündigung Mietvertrag\n\nDie Kündigungsfrist für Mieter beträgt drei "
          "Monate zum Monatsende. Die Kündigung muss schriftlich per Einschreiben an die Hausverwaltung.\n")
    write(root, "intl/Tortilla.md", "# Tortilla de patatas\n\nFreír las patatas en láminas y la cebolla a fuego "
          "lento en mucho aceite de oliva, mezclar con seis huevos batidos y cuajar en la sartén.\n")
    write(root, "intl/Борщ.md", "# Борщ\n\nСварить бульон из говядины, свёклу потушить с томатной пастой и "
          "уксусом, добавить картофель, капусту, морковь и лук. Подавать со сметаной.\n")
    return root


@pytest.mark.slow  # the real models index 22 notes
def test_english_questions_find_the_note_in_another_language_first(default_mix, tmp_path):
    """Among English notes, an English question's answer written in another language comes
    first (by both halves it scored a third of its cosine, below English notes that did not
    answer), and English questions about English notes are answered as before."""
    h = hybrid.open(tmp_path / "home", embedders=[default_mix])
    try:
        h.add_vault(_english_vault_with_notes_in_other_languages(tmp_path / "vault"), "notes")
        h.index()
        for q, want in [("how do I cook red braised pork belly", "intl/红烧肉.md"),
                        ("how often should I get my teeth cleaned", "intl/歯医者.md"),
                        ("how often should I lubricate the bike chain", "intl/Vélo.md"),
                        ("notice period for cancelling the apartment lease", "intl/Mietvertrag.md"),
                        ("spanish potato omelette recipe", "intl/Tortilla.md"),
                        ("beetroot soup recipe", "intl/Борщ.md")]:
            for mode in ("vector", "hybrid"):
                assert paths(h.search(q, mode=mode))[0] == want, (q, mode)
        assert paths(h.search("how much should we keep in the emergency fund"))[0] == "finance/Emergency fund.md"
        assert paths(h.search("sourdough starter feeding ratio"))[0] == "misc/Sourdough.md"
    finally:
        h.close()
